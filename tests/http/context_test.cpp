// Request::context over real sockets: cancelled when the client hangs up while the
// handler waits (plain TCP and TLS), when http::timeout's limit passes (and the
// handler's later writes fail), at the shutdown deadline, and when the handler returns;
// the client abandons a call whose context ends, and the cancellation travels through
// a proxy to the backend. Runs with 1 and 4 Ps.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <goro/http/client.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/server.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using goro::context_errc;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A server on 127.0.0.1:0 in the current runtime; stop() shuts it down.
class LocalServer {
 public:
  LocalServer(Handler handler, ServerOptions options = {},
              std::optional<net::TlsCertificate> tls = std::nullopt)
      : server_(std::move(options), std::move(handler)) {
    auto ln = net::listen("tcp", "127.0.0.1:0");
    EXPECT_TRUE(ln);
    listener_.emplace(std::move(*ln));
    port_ = listener_->addr().port();
    if (tls) {
      net::TlsConfig config;
      config.certificates.push_back(*tls);
      auto ctx = net::TlsContext::server(config);
      EXPECT_TRUE(ctx);
      secure_.emplace(std::move(*listener_), *ctx);
    }
    serving_.add(1);
    goro::go([this] {
      if (secure_) {
        server_.serve(*secure_);
      } else {
        server_.serve(*listener_);
      }
      serving_.done();
    });
  }
  ~LocalServer() { stop(1s); }

  std::error_code stop(std::chrono::nanoseconds grace) {
    if (stopped_) return {};
    stopped_ = true;
    std::error_code ec = server_.shutdown(Clock::now() + grace);
    serving_.wait();
    for (int i = 0; i < 400 && server_.connection_count() > 0; ++i) goro::sleep(5ms);
    return ec;
  }

  Server& server() { return server_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url(std::string_view path) const {
    return "http://" + address() + std::string(path);
  }

 private:
  Server server_;
  std::optional<net::Listener> listener_;
  std::optional<net::TlsListener> secure_;
  std::uint16_t port_ = 0;
  goro::WaitGroup serving_;
  bool stopped_ = false;
};

// What the handlers saw, shared with the test goroutine.
struct Observed {
  goro::Mutex mu;
  std::vector<Clock::time_point> ended;
  std::vector<std::error_code> errors;
  std::atomic<int> started{0};

  void end(std::error_code ec) {
    std::lock_guard lock(mu);
    ended.push_back(Clock::now());
    errors.push_back(ec);
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return ended.size();
  }
};

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    goro::sleep(1ms);
  }
  return true;
}

class RequestContext : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  int procs() const { return std::get<0>(GetParam()); }
  bool tls() const { return std::get<1>(GetParam()); }

  std::optional<net::TlsCertificate> certificate() {
    if (!tls()) return std::nullopt;
    return pki_.leaf("server", {"localhost"});
  }

  std::unique_ptr<net::Stream> connect(const std::string& address) {
    Result<net::Conn> c = net::dial("tcp", address, 5s);
    EXPECT_TRUE(c) << c.error().message();
    if (!c) return nullptr;
    if (!tls()) return std::make_unique<net::Conn>(std::move(*c));
    if (!client_tls_) {
      auto ctx = net::TlsContext::client({.server_name = "localhost", .ca_file = pki_.ca_file()});
      EXPECT_TRUE(ctx);
      client_tls_ = *ctx;
    }
    auto t = net::TlsConn::client(std::make_unique<net::Conn>(std::move(*c)), client_tls_,
                                  "localhost");
    EXPECT_TRUE(t);
    EXPECT_FALSE(t->handshake());
    return std::make_unique<net::TlsConn>(std::move(*t));
  }

  void run(std::function<void()> body) {
    goro::run(std::move(body), goro::Config{.maxprocs = procs()});
  }

  net::testing::TestPki pki_;
  std::shared_ptr<net::TlsContext> client_tls_;
};

INSTANTIATE_TEST_SUITE_P(ProcsAndTls, RequestContext,
                         ::testing::Combine(::testing::Values(1, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return "P" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "Tls" : "Tcp");
                         });

// The measure: 20 handlers parked in 10 s waits whose clients close the
// connection are all gone within 50 ms (asserted with room for sanitizer builds; the
// figure is printed).
TEST_P(RequestContext, HandlersWhoseClientsHangUpReturnAtOnce) {
  run([&] {
    Observed seen;
    LocalServer server(
        [&](Request& req, ResponseWriter& w) {
          ++seen.started;
          std::error_code ec = goro::sleep(10s, req.context());
          seen.end(ec);
          w.text("too late\n");
        },
        {}, certificate());
    constexpr int kClients = 20;
    std::vector<std::unique_ptr<net::Stream>> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.push_back(connect(server.address()));
      ASSERT_TRUE(clients.back());
      constexpr std::string_view req = "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n";
      ASSERT_TRUE(clients.back()->write(req.data(), req.size()));
    }
    ASSERT_TRUE(wait_until([&] { return seen.started.load() == kClients; }, 5000ms));
    const auto closed_at = Clock::now();
    for (auto& c : clients) c->close();
    ASSERT_TRUE(wait_until([&] { return seen.count() == kClients; }, 5000ms))
        << seen.count() << " of " << kClients << " handlers returned";
    std::lock_guard lock(seen.mu);
    const double worst = ms_between(closed_at, *std::max_element(seen.ended.begin(), seen.ended.end()));
    std::printf("[ measure  ] %d handlers whose clients closed returned within %.2f ms\n", kClients,
                worst);
    EXPECT_LT(worst, 500.0);
    for (const auto& ec : seen.errors) EXPECT_EQ(ec, context_errc::canceled);
  });
}

TEST_P(RequestContext, TheContextEndsWhenTheHandlerReturns) {
  run([&] {
    goro::Chan<std::error_code> after(1);
    LocalServer server(
        [&](Request& req, ResponseWriter& w) {
          goro::go([ctx = req.context(), after] {
            goro::select(goro::recv_case(ctx.done()));
            after.send(ctx.err());
          });
          w.text("ok\n");
        },
        {}, certificate());
    auto c = connect(server.address());
    ASSERT_TRUE(c);
    constexpr std::string_view req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_TRUE(c->write(req.data(), req.size()));
    char buf[512];
    ASSERT_TRUE(c->read(buf, sizeof buf));
    auto [wait_ctx, cancel] = goro::with_timeout(goro::background(), 5s);
    std::optional<std::error_code> got;
    ASSERT_EQ(goro::select(goro::recv_case(after, got), goro::recv_case(wait_ctx.done())), 0);
    EXPECT_EQ(*got, context_errc::canceled);
    // The connection is alive: a keep-alive request is not disturbed by the old context.
    ASSERT_TRUE(c->write(req.data(), req.size()));
    auto n = c->read(buf, sizeof buf);
    ASSERT_TRUE(n && *n > 0);
    EXPECT_NE(std::string(buf, *n).find("200 OK"), std::string::npos);
    (void)cancel;
  });
}

TEST_P(RequestContext, TimeoutMiddlewareCancelsTheHandlerAndFailsItsWrites) {
  run([&] {
    goro::Chan<std::pair<std::error_code, std::error_code>> seen(1);
    Handler slow = [&](Request& req, ResponseWriter& w) {
      std::error_code slept = goro::sleep(10s, req.context());
      seen.send({slept, w.write("after the limit")});
    };
    LocalServer server(chain(slow, {timeout(60ms)}), {}, certificate());
    auto c = connect(server.address());
    ASSERT_TRUE(c);
    const auto start = Clock::now();
    constexpr std::string_view req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_TRUE(c->write(req.data(), req.size()));
    std::string reply;
    char buf[512];
    while (reply.find("handler timeout") == std::string::npos) {
      auto n = c->read(buf, sizeof buf);
      if (!n || *n == 0) break;
      reply.append(buf, *n);
    }
    EXPECT_NE(reply.find("503"), std::string::npos) << reply;
    auto [sleep_error, write_error] = *seen.recv();
    EXPECT_EQ(sleep_error, context_errc::deadline_exceeded);
    EXPECT_EQ(write_error, errc::handler_timeout);
    EXPECT_LT(ms_between(start, Clock::now()), 2000.0);
  });
}

TEST_P(RequestContext, ShutdownCancelsLongHandlersAtItsDeadlineAndSaysItStarted) {
  run([&] {
    Observed seen;
    std::atomic<int> streams_ended{0};
    LocalServer* self = nullptr;
    LocalServer server(
        [&](Request& req, ResponseWriter& w) {
          ++seen.started;
          if (req.path() == "/stream") {
            // A long-lived handler that ends as soon as shutdown begins.
            goro::select(goro::recv_case(req.context().done()),
                         goro::recv_case(self->server().shutdown_context().done()));
            ++streams_ended;
            w.text("bye\n");
            return;
          }
          goro::select(goro::recv_case(req.context().done()));
          seen.end(req.context().err());
        },
        {}, certificate());
    self = &server;
    auto a = connect(server.address());
    auto b = connect(server.address());
    ASSERT_TRUE(a && b);
    constexpr std::string_view stuck = "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n";
    constexpr std::string_view stream = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_TRUE(a->write(stuck.data(), stuck.size()));
    ASSERT_TRUE(b->write(stream.data(), stream.size()));
    ASSERT_TRUE(wait_until([&] { return seen.started.load() == 2; }, 5000ms));
    const auto start = Clock::now();
    std::error_code ec = server.stop(150ms);
    const double took = ms_between(start, Clock::now());
    EXPECT_EQ(ec, errc::shutdown_timeout);
    EXPECT_EQ(streams_ended.load(), 1);
    ASSERT_TRUE(wait_until([&] { return seen.count() == 1; }, 2000ms));
    std::lock_guard lock(seen.mu);
    EXPECT_EQ(seen.errors[0], context_errc::canceled);
    EXPECT_GE(ms_between(start, seen.ended[0]), 140.0);
    EXPECT_LT(took, 2000.0);
  });
}

TEST_P(RequestContext, MiddlewareValuesReachTheHandler) {
  run([&] {
    static const goro::ContextKey<std::string> user{"user"};
    Handler handler = [](Request& req, ResponseWriter& w) {
      const std::string* who = req.context().value(user);
      w.text(who ? *who : std::string("nobody"));
    };
    Middleware auth = [](Handler next) -> Handler {
      return [next](Request& req, ResponseWriter& w) {
        req.set_context(goro::with_value(req.context(), user, std::string(req.header("x-user"))));
        next(req, w);
      };
    };
    LocalServer server(chain(handler, {auth}), {}, certificate());
    auto c = connect(server.address());
    ASSERT_TRUE(c);
    constexpr std::string_view req = "GET / HTTP/1.1\r\nHost: x\r\nX-User: ana\r\n\r\n";
    ASSERT_TRUE(c->write(req.data(), req.size()));
    char buf[512];
    auto n = c->read(buf, sizeof buf);
    ASSERT_TRUE(n);
    std::string reply(buf, *n);
    EXPECT_EQ(reply.substr(reply.size() - 3), "ana") << reply;
  });
}

// A client that leaves frees the proxy's goroutine and the backend call at once: the
// proxy's call is abandoned (its connection closed), so the backend's handler sees its
// own client hang up.
TEST_P(RequestContext, CancellationTravelsThroughAProxyToTheBackend) {
  run([&] {
    Observed backend_seen;
    LocalServer backend([&](Request& req, ResponseWriter& w) {
      ++backend_seen.started;
      backend_seen.end(goro::sleep(10s, req.context()));
      w.text("slow\n");
    });
    Client client;
    goro::Chan<std::error_code> proxy_result(1);
    LocalServer proxy(
        [&](Request& req, ResponseWriter& w) {
          auto r = client.get(backend.url("/slow"), req.context());
          proxy_result.send(r ? std::error_code{} : r.error());
          if (r) w.text(r->body);
        },
        {}, certificate());
    auto c = connect(proxy.address());
    ASSERT_TRUE(c);
    constexpr std::string_view req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_TRUE(c->write(req.data(), req.size()));
    ASSERT_TRUE(wait_until([&] { return backend_seen.started.load() == 1; }, 5000ms));
    const auto closed_at = Clock::now();
    c->close();
    EXPECT_EQ(*proxy_result.recv(), context_errc::canceled);
    const double proxy_ms = ms_between(closed_at, Clock::now());
    ASSERT_TRUE(wait_until([&] { return backend_seen.count() == 1; }, 5000ms));
    std::lock_guard lock(backend_seen.mu);
    const double backend_ms = ms_between(closed_at, backend_seen.ended[0]);
    std::printf("[ measure  ] client gone -> proxy call abandoned %.2f ms, backend handler "
                "cancelled %.2f ms\n",
                proxy_ms, backend_ms);
    EXPECT_EQ(backend_seen.errors[0], context_errc::canceled);
    EXPECT_LT(backend_ms, 500.0);
  });
}

TEST(ClientContext, ADeadlineEndsTheCallAndTheBackendHearsOfIt) {
  goro::run(
      [] {
        Observed seen;
        LocalServer backend([&](Request& req, ResponseWriter& w) {
          seen.end(goro::sleep(10s, req.context()));
          w.text("slow\n");
        });
        Client client;
        auto [ctx, cancel] = goro::with_timeout(goro::background(), 80ms);
        const auto start = Clock::now();
        auto r = client.get(backend.url("/"), ctx);
        const double took = ms_between(start, Clock::now());
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), context_errc::deadline_exceeded) << r.error().message();
        EXPECT_GE(took, 75.0);
        EXPECT_LT(took, 1000.0);
        ASSERT_TRUE(wait_until([&] { return seen.count() == 1; }, 2000ms));
        EXPECT_EQ(seen.errors[0], context_errc::canceled);
        // A cancelled context fails the next call at once; a fresh one works.
        auto again = client.get(backend.url("/"), ctx);
        ASSERT_FALSE(again);
        EXPECT_EQ(again.error(), context_errc::deadline_exceeded);
        (void)cancel;
      },
      goro::Config{.maxprocs = 2});
}

}  // namespace
}  // namespace goro::http::test
