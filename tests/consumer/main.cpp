// Uses an installed goro: a few goroutines, a channel, a sleep; with goro::httptest, a
// handler served by record() and by a test server on loopback. Prints "consumer: ok"
// and exits 0 when the runtime behaves.
#if defined(CONSUMER_HAS_FRAMEWORK)
#include <goro/goro.hpp>
#else
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#endif

#if defined(CONSUMER_HAS_HTTPTEST)
#include <goro/http/httptest.hpp>
#endif

#include <chrono>
#include <cstdio>
#include <string>

#if defined(CONSUMER_HAS_HTTPTEST)
// A handler checked without a network, then over a socket; 0 when both answer right.
static int check_httptest() {
  namespace httptest = goro::http::httptest;
  goro::http::Handler hello = [](goro::http::Request& req, goro::http::ResponseWriter& w) {
    w.text("hello " + std::string(req.path()));
  };
  httptest::Recorded r = httptest::record(hello, httptest::new_request("GET", "/you"));
  if (r.status != 200 || r.body != "hello /you") {
    std::printf("consumer: httptest::record gave %d '%s'\n", r.status, r.body.c_str());
    return 1;
  }
  goro::Result<httptest::Server> server = httptest::Server::start(hello);
  if (!server) {
    std::printf("consumer: httptest::Server: %s\n", server.error().message().c_str());
    return 1;
  }
  goro::Result<goro::http::ClientResponse> got = server->client().get(server->url() + "/net");
  server->close();
  if (!got || got->body != "hello /net") {
    std::printf("consumer: httptest::Server answered %s\n",
                got ? got->body.c_str() : got.error().message().c_str());
    return 1;
  }
  std::printf("consumer: httptest record and server at %s\n", server->url().c_str());
  return 0;
}
#endif

#if defined(CONSUMER_HAS_FRAMEWORK)
// The option structs as the README writes them: designated initializers naming a few
// fields. With -Wextra, g++ warns about any field left out that has no initializer of
// its own; this compiles only while every public options struct gives each one.
[[maybe_unused]] static void options_as_users_write_them() {
  goro::Config config{.maxprocs = 2};
  goro::GoOptions go{.name = "worker"};
  goro::AppOptions app{.name = "service", .request_ids = true};
  goro::http::FrameworkReply reply{.status = 404, .body = "gone"};
  goro::http::ServerOptions server{.enable_h2c = true};
  goro::http::ClientOptions client{.max_redirects = 3};
  goro::http::AccessLogOptions log{.format = goro::http::AccessLogFormat::json};
  goro::http::FileServerOptions files{.index = "home.html"};
  goro::http::websocket::AcceptOptions ws{.max_message_size = 1 << 16};
  goro::http::websocket::DialOptions dial{.max_message_size = 1 << 16};
  goro::http::websocket::Compression deflate{.enabled = true};
  goro::net::ListenOptions listen{.reuse_port = true};
  goro::net::TlsConfig tls{.alpn = {"h2"}};
  goro::net::TlsCertificate cert{.cert_file = "c.pem", .key_file = "k.pem"};
  (void)reply;
  (void)config, (void)go, (void)app, (void)server, (void)client, (void)log, (void)files;
  (void)ws, (void)dial, (void)deflate, (void)listen, (void)tls, (void)cert;
}

// A program's own flags through the installed goro::framework; 0 when they read right.
static int check_flags() {
  goro::FlagSet flags("consumer");
  int& workers = flags.add("workers", 1, "background workers");
  const char* argv[] = {"consumer", "--workers=3", "input.txt"};
  if (flags.parse(3, argv) || workers != 3 || flags.args().size() != 1) {
    std::printf("consumer: FlagSet read --workers=3 as %d\n", workers);
    return 1;
  }
  return 0;
}
#endif

int main() {
#if defined(CONSUMER_HAS_FRAMEWORK)
  if (check_flags() != 0) return 1;
#endif
  int rc = goro::run([]() -> int {
    constexpr int kN = 100;
    goro::Chan<int> results;  // unbuffered: every send meets a receive
    for (int i = 0; i < kN; i++) {
      goro::go([i, results]() mutable {
        if (i % 10 == 0) goro::sleep(std::chrono::milliseconds(1));
        results.send(i);
      });
    }
    long sum = 0;
    for (int i = 0; i < kN; i++) sum += results.recv().value_or(-1'000'000);
    const long want = kN * (kN - 1) / 2;
    if (sum != want) {
      std::printf("consumer: sum %ld, want %ld\n", sum, want);
      return 1;
    }
    std::printf("consumer: %d goroutines on %d Ps, goid of main %llu\n", kN, goro::maxprocs(),
                static_cast<unsigned long long>(goro::goid()));
#if defined(CONSUMER_HAS_HTTPTEST)
    if (check_httptest() != 0) return 1;
#endif
    return 0;
  });
  if (rc == 0) std::printf("consumer: ok\n");
  return rc;
}
