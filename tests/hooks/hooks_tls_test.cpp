// OpenSSL over goro::hooks: TLS clients that use OpenSSL's blocking API (SSL_connect,
// SSL_read on a blocking socket) on goroutines, against goro's own HTTPS server in the
// same runtime. Inside those calls the hooked read parks the goroutine, which may then
// resume on another thread, in the middle of an OpenSSL call: the thread-local hazard of
// docs/hooks.md. OpenSSL keeps its error queue per thread; what it reports must still
// reach the caller.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include <goro/http/httptest.hpp>
#include <goro/http/router.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "test_certs.hpp"

namespace {

using namespace std::chrono_literals;
namespace http = goro::http;

void run_with(int procs, const std::function<void()>& body) {
  goro::Config config;
  config.maxprocs = procs;
  goro::run(body, config);
}

// A blocking TCP connection to 127.0.0.1:port, made through the hooks.
int dial(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One HTTPS GET with OpenSSL's blocking calls; the response, or "" on failure (with
// *error the first error of OpenSSL's queue, read on the thread the call returned on).
std::string https_get(SSL_CTX* ctx, std::uint16_t port, const char* path, unsigned long* error,
                      bool* moved) {
  *error = 0;
  const int fd = dial(port);
  if (fd < 0) return "";
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "localhost");
  SSL_set1_host(ssl, "localhost");
  // The kernel's thread id: pthread_self() is declared const, so the compiler may read
  // it once for both.
  const long before = ::syscall(SYS_gettid);
  std::string response;
  if (SSL_connect(ssl) == 1) {
    const std::string request =
        std::string("GET ") + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) ==
        static_cast<int>(request.size())) {
      char buf[4096];
      int n;
      while ((n = SSL_read(ssl, buf, sizeof buf)) > 0) response.append(buf, n);
    }
  } else {
    *error = ERR_get_error();
  }
  *moved = before != ::syscall(SYS_gettid);
  ERR_clear_error();
  SSL_free(ssl);
  ::close(fd);
  return response;
}

class HooksTlsTest : public ::testing::TestWithParam<int> {};

TEST_P(HooksTlsTest, BlockingOpenSslClientsOnGoroutines) {
  run_with(GetParam(), [] {
    goro::net::testing::TestPki pki;
    http::httptest::StartOptions options;
    options.tls = pki.leaf("server", {"localhost"});
    http::Router routes;
    routes.handle("GET /slow", [](http::Request&, http::ResponseWriter& w) {
      goro::sleep(50ms);
      w.text("slow\n");
    });
    auto server = http::httptest::Server::start(routes, options);
    ASSERT_TRUE(server) << server.error().message();
    const std::uint16_t port = server->addr().port();

    SSL_CTX* trusting = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(trusting, pki.ca_file().c_str(), nullptr);
    SSL_CTX_set_verify(trusting, SSL_VERIFY_PEER, nullptr);
    SSL_CTX* untrusting = SSL_CTX_new(TLS_client_method());  // trusts no CA
    SSL_CTX_set_verify(untrusting, SSL_VERIFY_PEER, nullptr);

    constexpr int kClients = 40;
    std::atomic<int> ok{0}, refused{0}, moved{0};
    // Goroutines that keep every P busy, so that a client woken from a park is often
    // taken by another P (work stealing): it resumes inside OpenSSL on another thread.
    std::atomic<bool> stop{false};
    goro::WaitGroup spinners;
    for (int i = 0; i < 2 * goro::maxprocs(); ++i) {
      spinners.add(1);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto until = std::chrono::steady_clock::now() + 200us;
          while (std::chrono::steady_clock::now() < until) {
          }
          goro::yield();
        }
        spinners.done();
      });
    }
    goro::WaitGroup wg;
    for (int i = 0; i < kClients; ++i) {
      wg.add(1);
      goro::go([&, i] {
        unsigned long error = 0;
        bool switched = false;
        if (i % 4 != 3) {
          const std::string r = https_get(trusting, port, "/slow", &error, &switched);
          if (r.rfind("HTTP/1.1 200", 0) == 0 && r.find("slow\n") != std::string::npos)
            ok.fetch_add(1);
        } else {
          // The certificate does not verify: the handshake fails, and the reason is in
          // the error queue of the thread SSL_connect returned on.
          https_get(untrusting, port, "/slow", &error, &switched);
          if (ERR_GET_REASON(error) == SSL_R_CERTIFICATE_VERIFY_FAILED) refused.fetch_add(1);
        }
        if (switched) moved.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    stop.store(true);
    spinners.wait();
    std::printf(
        "OpenSSL blocking clients at %d P: %d ok, %d refused, %d resumed on another "
        "thread\n",
        goro::maxprocs(), ok.load(), refused.load(), moved.load());
    EXPECT_EQ(ok.load(), kClients - kClients / 4);
    EXPECT_EQ(refused.load(), kClients / 4);
    SSL_CTX_free(trusting);
    SSL_CTX_free(untrusting);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksTlsTest, ::testing::Values(1, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "P" + std::to_string(info.param);
                         });

}  // namespace
