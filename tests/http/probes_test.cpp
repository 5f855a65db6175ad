// Readiness and drain on http::Server, the probes (probes.hpp), and the shutdown's grace
// for idle connections that were busy a moment ago: what a load balancer in front of the
// server sees while it starts, serves, drains and stops.
#include <goro/http/middleware.hpp>
#include <goro/http/probes.hpp>
#include <goro/http/router.hpp>
#include <goro/http/httptest.hpp>

#include <atomic>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;
using namespace goro::http;
using goro::http::test::RawConn;
using goro::http::test::TestServer;

namespace {

Handler app(std::atomic<int>* handled = nullptr) {
  Router r;
  r.handle("GET /hello", [handled](Request&, ResponseWriter& w) {
    if (handled != nullptr) handled->fetch_add(1);
    w.text("hello");
  });
  r.handle("GET /healthz", liveness_handler());
  r.handle("GET /readyz", readiness_handler());
  return r;
}

std::optional<test::RawResponse> get(std::uint16_t port, std::string_view target) {
  RawConn c(port);
  c.send("GET " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  return c.read_response();
}

class Probes : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Procs, Probes, ::testing::Values(1, 2, 4, 8));

}  // namespace

// Serving: both probes say ok; ?verbose lists each condition as Kubernetes does.
TEST_P(Probes, ReadyWhileServing) {
  TestServer server(app(), {}, GetParam());
  auto live = get(server.port(), "/healthz");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(live->body, "ok\n");
  EXPECT_EQ(live->header("cache-control"), "no-store");
  auto ready = get(server.port(), "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "ok\n");
  auto verbose = get(server.port(), "/readyz?verbose");
  ASSERT_TRUE(verbose);
  EXPECT_EQ(verbose->status, 200);
  EXPECT_EQ(verbose->body, "[+]serving ok\n[+]draining ok\nreadyz check passed\n");
}

// A readiness check that fails makes /readyz 503, naming the check and why; liveness
// stays 200 (a failing dependency is no reason to restart the process).
TEST_P(Probes, FailingCheckIsNotReady) {
  std::atomic<bool> warm{false};
  ServerOptions o;
  o.readiness_checks.push_back({"cache", [&warm](const goro::Context&) -> goro::Error {
    if (warm.load()) return {};
    return goro::Error(make_error_code(std::errc::resource_unavailable_try_again),
                       "still loading");
  }});
  TestServer server(app(), o, GetParam());
  auto ready = get(server.port(), "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body,
            "[+]serving ok\n[+]draining ok\n[-]cache failed: still loading\nreadyz check failed\n");
  auto live = get(server.port(), "/healthz");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  warm.store(true);
  ready = get(server.port(), "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
}

// drain(): readiness false at once and for good, drain_context() cancelled, while
// requests (on new connections too) are served as before; then shutdown() stops.
TEST_P(Probes, DrainTurnsReadinessOffAndKeepsServing) {
  std::atomic<int> handled{0};
  TestServer server(app(&handled), {}, GetParam());
  ASSERT_NE(server.server(), nullptr);
  goro::Context drained = server.server()->drain_context();
  EXPECT_FALSE(drained.cancelled());
  server.server()->drain();
  EXPECT_TRUE(drained.cancelled());
  auto ready = get(server.port(), "/readyz?verbose");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("[-]draining failed: the server is shutting down\n"), std::string::npos)
      << ready->body;
  for (int i = 0; i < 5; ++i) {
    auto r = get(server.port(), "/hello");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("connection"), "");
  }
  EXPECT_EQ(handled.load(), 5);
  server.server()->drain();  // again: nothing changes
  EXPECT_FALSE(server.stop(2000ms));
}

// Server::readiness() before serve() and after shutdown(): not serving.
TEST(ProbesServer, NotReadyBeforeServingNorAfterShutdown) {
  goro::run([] {
    Server server(app());
    Readiness r = server.readiness();
    EXPECT_FALSE(r.ready);
    ASSERT_FALSE(r.lines.empty());
    EXPECT_EQ(r.lines[0], "[-]serving failed: not accepting connections");
    goro::Result<goro::net::Listener> ln = goro::net::listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    goro::WaitGroup serving;
    serving.add(1);
    goro::go([&] {
      server.serve(*ln);
      serving.done();
    });
    for (int i = 0; i < 200 && !server.readiness().ready; ++i) goro::sleep(5ms);
    EXPECT_TRUE(server.readiness().ready);
    EXPECT_FALSE(server.shutdown(std::chrono::steady_clock::now() + 1s));
    serving.wait();
    EXPECT_FALSE(server.readiness().ready);
    EXPECT_TRUE(server.drain_context().cancelled()) << "shutdown drains first";
  });
}

// The probes() middleware answers GET and HEAD on its paths before the handler (which
// never sees them), and passes everything else on; an empty path is not served.
TEST(ProbesMiddleware, AnswersAheadOfTheHandler) {
  std::atomic<int> seen{0};
  Handler inner = [&seen](Request&, ResponseWriter& w) {
    seen.fetch_add(1);
    w.text("inner");
  };
  Handler h = chain(inner, {probes()});
  auto live = httptest::record(h, httptest::new_request("GET", "/healthz"));
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.body, "ok\n");
  auto head = httptest::record(h, httptest::new_request("HEAD", "/readyz"));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  // record() serves through Server::serve_conn: a server serving a connection is ready.
  auto ready = httptest::record(h, httptest::new_request("GET", "/readyz"));
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok\n");
  EXPECT_EQ(seen.load(), 0);
  auto post = httptest::record(h, httptest::new_request("POST", "/healthz"));
  EXPECT_EQ(post.body, "inner");
  auto other = httptest::record(h, httptest::new_request("GET", "/healthz/x"));
  EXPECT_EQ(other.body, "inner");
  Handler moved = chain(inner, {probes({.liveness_path = "/live", .readiness_path = ""})});
  EXPECT_EQ(httptest::record(moved, httptest::new_request("GET", "/live")).body, "ok\n");
  EXPECT_EQ(httptest::record(moved, httptest::new_request("GET", "/readyz")).body, "inner");
  EXPECT_EQ(seen.load(), 3);
}

// A keep-alive client that sends its next request just as the shutdown begins (a load
// balancer's pooled connection, a benchmark) is answered, with "Connection: close",
// within the grace; one that sends nothing is closed once the grace is over.
TEST_P(Probes, ShutdownAnswersTheNextRequestOfABusyConnection) {
  std::atomic<int> handled{0};
  ServerOptions o;
  o.shutdown_idle_grace = 400ms;
  TestServer server(app(&handled), o, GetParam());
  RawConn busy(server.port());
  RawConn quiet(server.port());
  for (RawConn* c : {&busy, &quiet}) {
    c->send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(c->read_response());
  }
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { EXPECT_FALSE(server.stop(3000ms)); });
  std::this_thread::sleep_for(100ms);
  busy.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = busy.read_response();
  ASSERT_TRUE(r) << "the request sent during the shutdown was cut";
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(busy.closed_by_peer(1000));
  EXPECT_TRUE(quiet.closed_by_peer(2000));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 300ms) << "the quiet connection was closed before the grace ended";
  stopper.join();
  EXPECT_EQ(handled.load(), 3);
}

// shutdown_idle_grace = 0: idle connections close at once (Go's Shutdown).
TEST(ProbesServer, NoGraceClosesIdleAtOnce) {
  ServerOptions o;
  o.shutdown_idle_grace = 0ms;
  TestServer server(app(), o, 2);
  RawConn idle(server.port());
  idle.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(idle.read_response());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server.stop(3000ms));
  EXPECT_TRUE(idle.closed_by_peer(1000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 300ms);
}
