// HTTP/2 against clients nobody here wrote: curl (over TLS with ALPN h2, and h2c with
// prior knowledge), nghttp, h2load, Node's http2 module and Go's net/http (over TLS).
// A client that is not installed skips its test, saying which.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <goro/http/router.hpp>

#include "h2_test_util.hpp"
#include "test_certs.hpp"

namespace goro::http::test {
namespace {

struct Output {
  int status = -1;
  std::string out;  // stdout and stderr
};

Output run(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return o;
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  o.status = pclose(p);
  return o;
}

bool installed(const std::string& tool) {
  return run("command -v " + tool + " >/dev/null").status == 0;
}

#define REQUIRE_TOOL(tool) \
  if (!installed(tool)) GTEST_SKIP() << tool << " is not installed"

Handler app() {
  auto r = std::make_shared<Router>();
  r->handle("GET /hello", [](Request& req, ResponseWriter& w) {
    w.text("hello " + std::string(req.query("name").value_or("")));
  });
  r->handle("POST /echo", [](Request& req, ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (body) w.write(*body);
  });
  r->handle("GET /stream", [](Request&, ResponseWriter& w) {
    for (int i = 0; i < 3; ++i) {
      w.write("part" + std::to_string(i) + ";");
      w.flush();
    }
  });
  return [r](Request& req, ResponseWriter& w) { (*r)(req, w); };
}

class Http2Clients : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new net::testing::TestPki();
    leaf_ = new net::TlsCertificate(pki_->leaf("server", {"localhost"}));
  }
  static void TearDownTestSuite() {
    delete leaf_;
    delete pki_;
  }
  std::string h2c_url(const H2Server& s, const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(s.port()) + path;
  }
  // curl's options to reach a TLS server as https://localhost:<port>.
  std::string tls_curl(const H2Server& s, const std::string& path) {
    std::string port = std::to_string(s.port());
    return "--cacert " + pki_->ca_file() + " --resolve localhost:" + port +
           ":127.0.0.1 https://localhost:" + port + path;
  }

  static net::testing::TestPki* pki_;
  static net::TlsCertificate* leaf_;
};
net::testing::TestPki* Http2Clients::pki_ = nullptr;
net::TlsCertificate* Http2Clients::leaf_ = nullptr;

TEST_F(Http2Clients, CurlOverTlsNegotiatesH2) {
  REQUIRE_TOOL("curl");
  H2Server server(app(), {}, *leaf_);
  Output o = run("curl -sS --max-time 15 --http2 -w ' %{http_version}' " +
                 tls_curl(server, "/hello?name=tls"));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "hello tls 2");
  // A client that offers only http/1.1 still gets HTTP/1.1.
  o = run("curl -sS --max-time 15 --http1.1 -w ' %{http_version}' " +
          tls_curl(server, "/hello?name=one"));
  EXPECT_EQ(o.out, "hello one 1.1");
}

// The handshake's deadline (read_header_timeout) does not outlive it: a response
// written later still goes out.
TEST_F(Http2Clients, CurlOverTlsPastTheHandshakeDeadline) {
  REQUIRE_TOOL("curl");
  ServerOptions o;
  o.read_header_timeout = std::chrono::milliseconds(200);
  H2Server server(
      [](Request&, ResponseWriter& w) {
        goro::sleep(std::chrono::milliseconds(600));
        w.text("late");
      },
      o, *leaf_);
  Output o2 = run("curl -sS --max-time 15 --http2 -w ' %{http_version}' " + tls_curl(server, "/"));
  EXPECT_EQ(o2.out, "late 2");
}

TEST_F(Http2Clients, CurlPriorKnowledgeH2c) {
  REQUIRE_TOOL("curl");
  H2Server server(app());
  Output o = run("curl -sS --max-time 15 --http2-prior-knowledge -w ' %{http_version}' " +
                 h2c_url(server, "/hello?name=h2c"));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "hello h2c 2");
  o = run("curl -sS --max-time 15 --http2-prior-knowledge " + h2c_url(server, "/stream"));
  EXPECT_EQ(o.out, "part0;part1;part2;");
  // A POST body of 1 MiB, echoed.
  o =
      run("head -c 1048576 /dev/zero | tr '\\0' q | curl -sS --max-time 15 "
          "--http2-prior-knowledge --data-binary @- " +
          h2c_url(server, "/echo") + " | wc -c");
  EXPECT_EQ(std::atoi(o.out.c_str()), 1 << 20) << o.out;
}

TEST_F(Http2Clients, Nghttp) {
  REQUIRE_TOOL("nghttp");
  H2Server server(app());
  Output o = run("timeout 15 nghttp " + h2c_url(server, "/hello?name=nghttp"));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out, "hello nghttp");
  o = run("timeout 15 nghttp -s " + h2c_url(server, "/hello") + " " + h2c_url(server, "/stream") +
          " " + h2c_url(server, "/missing"));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("part2;"), std::string::npos) << o.out;
}

TEST_F(Http2Clients, H2loadAllRequestsSucceed) {
  REQUIRE_TOOL("h2load");
  H2Server server(app());
  Output o = run("timeout 20 h2load -n 1000 -c 4 -m 8 " + h2c_url(server, "/hello?name=load"));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("1000 succeeded, 0 failed, 0 errored"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("status codes: 1000 2xx"), std::string::npos) << o.out;
}

TEST_F(Http2Clients, NodeHttp2) {
  REQUIRE_TOOL("node");
  const std::string script = std::string(GORO_H2_CLIENTS_DIR) + "/client.js";
  {
    H2Server plain(app());
    Output o =
        run("timeout 20 node " + script + " http://127.0.0.1:" + std::to_string(plain.port()));
    EXPECT_EQ(o.out, "ok\n");
    EXPECT_EQ(o.status, 0);
  }
  H2Server secure(app(), {}, *leaf_);  // one runtime per process: after the first stops
  Output o = run("timeout 20 node " + script +
                 " https://127.0.0.1:" + std::to_string(secure.port()) + " " + pki_->ca_file());
  EXPECT_EQ(o.out, "ok\n");
  EXPECT_EQ(o.status, 0);
}

TEST_F(Http2Clients, GoNetHttpOverTls) {
  REQUIRE_TOOL("go");
  const std::string program = std::string(GORO_H2_CLIENTS_DIR) + "/client.go";
  // Built before the server starts: a cold build cache may take a while.
  std::string binary = "/tmp/goro-h2-go-client-" + std::to_string(getpid());
  Output built = run("cd /tmp && timeout 120 go build -o " + binary + " " + program);
  ASSERT_EQ(built.status, 0) << built.out;
  H2Server server(app(), {}, *leaf_);
  Output o = run("timeout 20 " + binary + " https://127.0.0.1:" + std::to_string(server.port()) +
                 " " + pki_->ca_file());
  std::remove(binary.c_str());
  EXPECT_EQ(o.out, "ok\n");
  EXPECT_EQ(o.status, 0);
}

}  // namespace
}  // namespace goro::http::test
