// Request::tls(): what a handler learns of the TLS connection a request came on (Go's
// r.TLS), against curl presenting client certificates, over HTTP/1.1 and HTTP/2.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

// Runs curl with args; returns its stdout, or "curl failed: <stderr>".
std::string curl(const std::string& args) {
  char err_file[] = "/tmp/goro-http-tls-state-XXXXXX";
  int fd = mkstemp(err_file);
  if (fd >= 0) close(fd);
  std::string cmd = "curl --silent --show-error --max-time 20 " + args + " 2>" + err_file;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "curl failed: popen";
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  std::ifstream e(err_file);
  std::string err(std::istreambuf_iterator<char>(e), {});
  std::remove(err_file);
  return status == 0 ? out : "curl failed: " + err;
}

// "TLSv1.3 h2 localhost alice spiffe://... <sha256> verified", or "plaintext".
void describe(Request& req, ResponseWriter& w) {
  const net::TlsConnectionState* tls = req.tls();
  if (tls == nullptr) {
    w.text("plaintext");
    return;
  }
  std::string s = tls->version + " " + tls->alpn + " " + tls->server_name;
  if (tls->peer) {
    s += " " + tls->peer->common_name + " " + (tls->peer->uris.empty() ? "" : tls->peer->uris[0]) +
         " " + tls->peer->sha256 + (tls->peer_verified ? " verified" : " unverified");
  } else {
    s += " no-client-certificate";
  }
  w.text(s);
}

// An HTTPS server (HTTP/2 and HTTP/1.1 through ALPN) with config's client
// authentication, on its own runtime thread.
class TlsServer {
 public:
  explicit TlsServer(net::TlsConfig config) {
    std::promise<int> port;
    auto port_future = port.get_future();
    thread_ = std::thread([this, config, &port] {
      goro::run(
          [&] {
            auto ctx = net::TlsContext::server(config);
            auto ln = ctx ? net::tls_listen("tcp", "127.0.0.1:0", *ctx)
                          : Result<net::TlsListener>(ctx.error());
            if (!ln) {
              port.set_value(0);
              return;
            }
            Server server({.enable_http2 = true}, describe);
            port.set_value(ln->addr().port());
            goro::WaitGroup serving;
            serving.add(1);
            goro::go([&] {
              (void)server.serve(*ln);
              serving.done();
            });
            while (!stop_.load(std::memory_order_acquire)) goro::sleep(std::chrono::milliseconds(2));
            (void)server.shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(2));
            serving.wait();
          },
          goro::Config{.maxprocs = 2});
    });
    port_ = port_future.get();
  }
  ~TlsServer() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
  int port_ = 0;
};

std::string https(const net::testing::TestPki& pki, int port, const std::string& extra) {
  const std::string p = std::to_string(port);
  return curl("--cacert " + pki.ca_file() + " --resolve localhost:" + p + ":127.0.0.1 " + extra +
              " https://localhost:" + p + "/");
}

class RequestTls : public ::testing::Test {
 protected:
  net::testing::TestPki pki;
  net::testing::TestPki stranger;
  net::TlsCertificate leaf = pki.leaf("server", {"localhost"});
  net::TlsCertificate alice =
      pki.client_leaf("alice", "alice", "URI:spiffe://example.org/ns/web/sa/alice");
  net::TlsCertificate mallory = stranger.client_leaf("mallory", "mallory", "URI:spiffe://x/m");
  // The SHA-256 of alice's certificate, as `openssl x509 -fingerprint -sha256` says it.
  std::string alice_sha256() {
    FILE* f = std::fopen(alice.cert_file.c_str(), "r");
    X509* cert = f != nullptr ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
    if (f != nullptr) std::fclose(f);
    unsigned char digest[32];
    unsigned int len = 0;
    std::string hex;
    if (cert != nullptr && X509_digest(cert, EVP_sha256(), digest, &len) == 1) {
      char two[3];
      for (unsigned i = 0; i < len; ++i) {
        std::snprintf(two, sizeof two, "%02x", digest[i]);
        hex += two;
      }
    }
    X509_free(cert);
    return hex;
  }
};

TEST_F(RequestTls, HandlerSeesTheClientCertificate) {
  TlsServer server({.certificates = {leaf},
                    .alpn = {"h2", "http/1.1"},
                    .client_auth = net::TlsClientAuth::request,
                    .client_ca_file = pki.ca_file()});
  ASSERT_NE(server.port(), 0);
  const std::string cert = "--cert " + alice.cert_file + " --key " + alice.key_file;
  const std::string who = "alice spiffe://example.org/ns/web/sa/alice " + alice_sha256() + " verified";
  EXPECT_EQ(https(pki, server.port(), "--http1.1 " + cert), "TLSv1.3 http/1.1 localhost " + who);
  EXPECT_EQ(https(pki, server.port(), "--http2 " + cert), "TLSv1.3 h2 localhost " + who);
  EXPECT_EQ(https(pki, server.port(), "--http1.1"), "TLSv1.3 http/1.1 localhost no-client-certificate");
  // A certificate from a CA the server does not trust ends the handshake.
  std::string refused = https(pki, server.port(),
                              "--http1.1 --cert " + mallory.cert_file + " --key " + mallory.key_file);
  EXPECT_EQ(refused.rfind("curl failed", 0), 0u) << refused;
}

TEST_F(RequestTls, RequireRefusesAClientWithoutCertificate) {
  TlsServer server({.certificates = {leaf},
                    .alpn = {"h2", "http/1.1"},
                    .client_auth = net::TlsClientAuth::require,
                    .client_ca_file = pki.ca_file()});
  ASSERT_NE(server.port(), 0);
  std::string refused = https(pki, server.port(), "--http1.1");
  EXPECT_EQ(refused.rfind("curl failed", 0), 0u) << refused;
  std::string ok = https(pki, server.port(),
                         "--http2 --cert " + alice.cert_file + " --key " + alice.key_file);
  EXPECT_NE(ok.find(" h2 localhost alice "), std::string::npos) << ok;
}

TEST(RequestTlsPlain, NullOverPlaintext) {
  TestServer server(describe);
  EXPECT_EQ(curl(server.url("/")), "plaintext");
}

}  // namespace
}  // namespace goro::http::test
