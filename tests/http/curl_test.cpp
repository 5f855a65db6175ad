// The server against a real client: the curl command line tool.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>

#include "curl_util.hpp"
#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

Handler app() {
  Router r;
  r.handle("GET /hello", [](Request& req, ResponseWriter& w) {
    w.text("hello over HTTP/1." + std::to_string(req.version_minor()));
  });
  r.handle("POST /echo", [](Request& req, ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (!body) return;
    w.header().set("X-Body-Length", std::to_string(body->size()));
    w.header().set("X-Chunked", req.content_length() < 0 ? "yes" : "no");
    w.write(*body);
  });
  r.handle("GET /stream", [](Request&, ResponseWriter& w) {
    for (int i = 0; i < 4; ++i) {
      w.write("part" + std::to_string(i) + ";");
      w.flush();
    }
  });
  return r;
}

std::string write_file(const std::string& name, std::size_t size) {
  std::string path = "/tmp/goro-http-" + name + "-" + std::to_string(getpid());
  std::ofstream f(path, std::ios::binary);
  for (std::size_t i = 0; i < size; ++i) f.put(static_cast<char>('a' + i % 26));
  return path;
}

class Curl : public ::testing::Test {
 protected:
  TestServer server{app()};
};

TEST_F(Curl, Http10) {
  CurlOutput o = run_curl("--http1.0 -D - " + server.url("/hello"));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("HTTP/1.1 200 OK"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Connection: close"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("hello over HTTP/1.0"), std::string::npos);
}

TEST_F(Curl, KeepAliveReusesTheConnection) {
  CurlOutput o = run_curl("-v --http1.1 " + server.url("/hello") + " " + server.url("/hello") + " " +
                  server.url("/hello"));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "hello over HTTP/1.1hello over HTTP/1.1hello over HTTP/1.1");
  EXPECT_NE(o.err.find("Re-using existing connection"), std::string::npos) << o.err;
}

TEST_F(Curl, ChunkedUpload) {
  std::string file = write_file("chunked", 300000);
  CurlOutput o = run_curl("-D - --http1.1 -H 'Transfer-Encoding: chunked' --data-binary @" + file + " " +
                  server.url("/echo") + " -o /tmp/goro-http-echoed-" + std::to_string(getpid()));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("X-Chunked: yes"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("X-Body-Length: 300000"), std::string::npos) << o.out;
  std::ifstream a(file), b("/tmp/goro-http-echoed-" + std::to_string(getpid()));
  std::string sa(std::istreambuf_iterator<char>(a), {}), sb(std::istreambuf_iterator<char>(b), {});
  EXPECT_TRUE(sa == sb);
  std::remove(file.c_str());
  std::remove(("/tmp/goro-http-echoed-" + std::to_string(getpid())).c_str());
}

TEST_F(Curl, ExpectContinue) {
  std::string file = write_file("continue", 2 << 20);
  CurlOutput o =
      run_curl("-v --http1.1 -H 'Expect: 100-continue' --expect100-timeout 10 --data-binary @" + file +
           " " + server.url("/echo") + " -o /dev/null -w '%{http_code} %{size_upload}'");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.err.find("HTTP/1.1 100 Continue"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "200 " + std::to_string(2 << 20));
  std::remove(file.c_str());
}

TEST_F(Curl, StreamedResponse) {
  CurlOutput o = run_curl("-D - --http1.1 " + server.url("/stream"));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(o.out.find("part0;part1;part2;part3;"), std::string::npos);
}

TEST(CurlTls, HttpsWithCaCert) {
  net::testing::TestPki pki;
  net::TlsCertificate leaf = pki.leaf("server", {"localhost"});
  TestServer server(app(), {}, 2, leaf);
  std::string port = std::to_string(server.port());
  CurlOutput o =
      run_curl("-v --http1.1 --cacert " + pki.ca_file() + " --resolve localhost:" + port +
           ":127.0.0.1 https://localhost:" + port + "/hello https://localhost:" + port + "/hello");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "hello over HTTP/1.1hello over HTTP/1.1");
  // curl 7.88: "* ALPN: server accepted http/1.1"; older: "ALPN, server accepted to use http/1.1".
  std::size_t alpn = o.err.find("server accepted");
  ASSERT_NE(alpn, std::string::npos) << o.err;
  EXPECT_NE(o.err.substr(alpn, 40).find("http/1.1"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("Re-using existing connection"), std::string::npos);
  // Without the CA, verification fails.
  CurlOutput bad = run_curl("--http1.1 --resolve localhost:" + port +
                    ":127.0.0.1 https://localhost:" + port + "/hello");
  EXPECT_NE(bad.status, 0);
}

}  // namespace
}  // namespace goro::http::test
