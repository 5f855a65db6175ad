// Idle keep-alive connections that park: after 30 ms without a byte (up to 400 ms for a
// connection in a request loop: 3 times the longest recent gap), a plain
// connection gives up its goroutine and waits in the netpoller (docs/design.md). What a
// client must not notice: the next request on the same connection is served, pipelined
// or split; the idle timeout and shutdown still close it on time; a client that leaves
// takes the connection with it. What a user can see: the goroutines are gone. Over TLS
// a connection waits on its goroutine instead, and is served just the same.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <goro/http/server.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>

#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;

// Longer than the 400 ms after which any idle connection has parked.
constexpr auto kParked = 1000ms;

std::string get(std::string_view path) {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: x\r\n\r\n";
}

Handler echo_path() {
  return [](Request& req, ResponseWriter& w) { w.text("path " + std::string(req.path())); };
}

// n connections that have each had one request answered (fewer if one failed).
std::vector<std::unique_ptr<RawConn>> served_once(const TestServer& server, int n) {
  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<RawConn>(server.port());
    if (!c->send(get("/")) || !c->read_response()) break;
    conns.push_back(std::move(c));
  }
  return conns;
}

class IdlePark : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Ps, IdlePark, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Ps"; });

// 64 connections each make a request and go idle: their goroutines go away, and each
// then gets its next requests answered, in order, on the same connection (one of them
// pipelines two, one splits its head across two writes).
TEST_P(IdlePark, ParkedConnectionsHoldNoGoroutineAndServeTheirNextRequests) {
  constexpr int kConns = 64;
  TestServer server(echo_path(), ServerOptions{}, GetParam());
  ASSERT_NE(server.port(), 0);
  // Counted before the connections come: the first of them may have parked already by
  // the time the last is answered (a first wait lasts 30 ms).
  const int before = goro::num_goroutine();
  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < kConns; ++i) {
    conns.push_back(std::make_unique<RawConn>(server.port()));
    ASSERT_TRUE(conns.back()->send(get("/first/" + std::to_string(i))));
    auto r = conns.back()->read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "path /first/" + std::to_string(i));
  }
  std::this_thread::sleep_for(kParked);
  const int idle = goro::num_goroutine();
  // One goroutine more may be waiting to return the memory they freed.
  EXPECT_LE(idle, before + 1) << "the idle connections still hold goroutines";
  EXPECT_EQ(server.server()->connection_count(), static_cast<std::size_t>(kConns));

  ASSERT_TRUE(conns[0]->send(get("/a") + get("/b")));
  ASSERT_TRUE(conns[1]->send("GET /spl"));
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(conns[1]->send("it HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (int i = 2; i < kConns; ++i) ASSERT_TRUE(conns[i]->send(get("/second/" + std::to_string(i))));

  auto a = conns[0]->read_response();
  auto b = conns[0]->read_response();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->body, "path /a");
  EXPECT_EQ(b->body, "path /b");
  auto split = conns[1]->read_response();
  ASSERT_TRUE(split);
  EXPECT_EQ(split->body, "path /split");
  for (int i = 2; i < kConns; ++i) {
    auto r = conns[i]->read_response();
    ASSERT_TRUE(r) << "connection " << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "path /second/" + std::to_string(i));
  }
  // And they park again.
  std::this_thread::sleep_for(kParked);
  EXPECT_LE(goro::num_goroutine(), idle);
  ASSERT_TRUE(conns[5]->send(get("/third")));
  auto third = conns[5]->read_response();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->body, "path /third");
}

// Connections that made one request and went quiet hold no goroutine 150 ms later (a
// first wait lasts 30 ms): an idle pool's memory goes back at once, not after seconds.
TEST_P(IdlePark, QuietConnectionsParkWithinAHundredMilliseconds) {
  constexpr int kConns = 32;
  TestServer server(echo_path(), ServerOptions{}, GetParam());
  ASSERT_NE(server.port(), 0);
  const int before = goro::num_goroutine();
  std::vector<std::unique_ptr<RawConn>> conns = served_once(server, kConns);
  ASSERT_EQ(conns.size(), static_cast<std::size_t>(kConns));
  std::this_thread::sleep_for(150ms);
  // One goroutine more may be waiting to return the memory they freed.
  EXPECT_LE(goro::num_goroutine(), before + 1) << "quiet connections still hold goroutines";
  ASSERT_TRUE(conns[3]->send(get("/after")));
  auto r = conns[3]->read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "path /after");
}

// Connections with a request every 60 ms park once, at their first wait, and from then
// on keep their goroutine between requests (they wait 3 × 60 ms before parking): a
// steady client does not pay for a park and a new goroutine per request.
TEST_P(IdlePark, ConnectionsAtASteadyPaceKeepTheirGoroutine) {
  constexpr int kConns = 8;
  constexpr int kRounds = 12;
  TestServer server(echo_path(), ServerOptions{}, GetParam());
  ASSERT_NE(server.port(), 0);
  const int before = goro::num_goroutine();
  std::vector<std::unique_ptr<RawConn>> conns = served_once(server, kConns);
  ASSERT_EQ(conns.size(), static_cast<std::size_t>(kConns));
  int held = 0;  // rounds at which every connection still had its goroutine
  for (int round = 0; round < kRounds; ++round) {
    std::this_thread::sleep_for(60ms);
    if (round >= 3 && goro::num_goroutine() >= before + kConns) ++held;
    for (auto& c : conns) ASSERT_TRUE(c->send(get("/r" + std::to_string(round))));
    for (auto& c : conns) {
      auto r = c->read_response();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->body, "path /r" + std::to_string(round));
    }
  }
  // A round or two may come late on a loaded machine; most must find them waiting.
  EXPECT_GE(held, kRounds - 3 - 2) << "steady connections parked between requests";
}

// Describes the request as the handler saw it: its peer, its header fields, its body,
// and how many response fields were there before the handler set any. /mark also sets
// a response field.
Handler describe() {
  return [](Request& req, ResponseWriter& w) {
    std::string out = "remote " + std::string(req.remote_addr()) + "\n";
    out += "fields before " + std::to_string(w.header().size()) + "\n";
    for (const HeaderField& f : req.headers())
      out += std::string(f.name) + ": " + std::string(f.value) + "\n";
    auto body = req.body();
    out += "body [" + (body ? *body : std::string("error")) + "]\n";
    if (req.path() == "/mark") w.header().set("X-Mark", "set");
    w.text(out);
  };
}

// A connection that waits for its next request lends its parser, buffers and request
// objects to the next connection its thread serves. Two clients taking turns must see
// nothing of each other: not the other's header fields, body, peer address or response
// fields, whether a request comes whole, pipelined or split.
TEST_P(IdlePark, ConnectionsTakingTurnsSeeNothingOfEachOther) {
  TestServer server(describe(), ServerOptions{}, GetParam());
  ASSERT_NE(server.port(), 0);
  RawConn a(server.port()), b(server.port());
  const std::string mark_a =
      "POST /mark HTTP/1.1\r\nHost: x\r\nX-Secret: from-a\r\nContent-Length: 6\r\n\r\nsecret";
  const std::string plain_b = "GET /plain HTTP/1.1\r\nHost: x\r\nX-Other: b\r\n\r\n";
  std::string remote_a, remote_b;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    if (round % 3 == 1) {
      ASSERT_TRUE(a.send(mark_a + mark_a));  // pipelined
    } else {
      ASSERT_TRUE(a.send(mark_a));
    }
    for (int n = round % 3 == 1 ? 2 : 1; n > 0; --n) {
      auto r = a.read_response();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->header("x-mark"), "set");
      EXPECT_NE(r->body.find("X-Secret: from-a\n"), std::string::npos) << r->body;
      EXPECT_NE(r->body.find("body [secret]\n"), std::string::npos) << r->body;
      EXPECT_EQ(r->body.find("X-Other"), std::string::npos) << r->body;
      EXPECT_NE(r->body.find("fields before 0\n"), std::string::npos) << r->body;
      const std::string remote = r->body.substr(0, r->body.find('\n'));
      if (remote_a.empty()) remote_a = remote;
      EXPECT_EQ(remote, remote_a);
    }
    if (round % 3 == 2) {
      ASSERT_TRUE(b.send(plain_b.substr(0, 9)));  // split inside the request line
      std::this_thread::sleep_for(5ms);
      ASSERT_TRUE(b.send(plain_b.substr(9)));
    } else {
      ASSERT_TRUE(b.send(plain_b));
    }
    auto r = b.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->count("x-mark"), 0u);
    EXPECT_NE(r->body.find("X-Other: b\n"), std::string::npos) << r->body;
    EXPECT_EQ(r->body.find("ecret"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("body []\n"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("fields before 0\n"), std::string::npos) << r->body;
    const std::string remote = r->body.substr(0, r->body.find('\n'));
    if (remote_b.empty()) remote_b = remote;
    EXPECT_EQ(remote, remote_b);
  }
  EXPECT_NE(remote_a, remote_b);
}

// The idle timeout counts from the start of the idle wait, parked or not.
TEST_P(IdlePark, IdleTimeoutClosesAParkedConnectionOnTime) {
  ServerOptions options;
  options.idle_timeout = 2s;
  TestServer server(echo_path(), options, GetParam());
  RawConn c(server.port());
  ASSERT_TRUE(c.send(get("/")));
  ASSERT_TRUE(c.read_response());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer(4000));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 1.9);
  EXPECT_LT(waited, 2.6);
  EXPECT_TRUE(c.pending().empty()) << c.pending();
  for (int i = 0; i < 100 && server.server()->connection_count() > 0; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.server()->connection_count(), 0u);
}

// A client that closes its parked connection: the server notices (the close starts the
// connection's goroutine, which reads the end of stream) and forgets it.
TEST_P(IdlePark, ClientClosingAParkedConnectionEndsIt) {
  constexpr int kConns = 20;
  TestServer server(echo_path(), ServerOptions{}, GetParam());
  {
    std::vector<std::unique_ptr<RawConn>> conns = served_once(server, kConns);
    ASSERT_EQ(conns.size(), static_cast<std::size_t>(kConns));
    std::this_thread::sleep_for(kParked);
    EXPECT_EQ(server.server()->connection_count(), static_cast<std::size_t>(kConns));
  }  // closed here
  for (int i = 0; i < 200 && server.server()->connection_count() > 0; ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.server()->connection_count(), 0u);
}

// Shutdown closes parked connections at once, as it does idle ones, and returns.
TEST_P(IdlePark, ShutdownClosesParkedConnectionsAtOnce) {
  constexpr int kConns = 20;
  TestServer server(echo_path(), ServerOptions{}, GetParam());
  std::vector<std::unique_ptr<RawConn>> conns = served_once(server, kConns);
  ASSERT_EQ(conns.size(), static_cast<std::size_t>(kConns));
  std::this_thread::sleep_for(kParked);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(server.stop(5000ms)) << "shutdown waited out its deadline";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  for (auto& c : conns) {
    EXPECT_TRUE(c->closed_by_peer(1000));
    EXPECT_TRUE(c->pending().empty()) << c->pending();
  }
}

// Over TLS the connection cannot park (the TLS stream may hold decrypted bytes the
// netpoller knows nothing of): it waits on its goroutine, and is served the same.
TEST(IdleParkTls, IdleTlsConnectionIsServedAfterTheIdleRelease) {
  net::testing::TestPki pki;
  with_server(
      echo_path(), ServerOptions{},
      [&](const std::string& base) {
        auto ctx = net::TlsContext::client({.server_name = "localhost", .ca_file = pki.ca_file()});
        ASSERT_TRUE(ctx) << ctx.error().message();
        Result<net::TlsConn> c =
            net::tls_dial("tcp", "127.0.0.1:" + base.substr(base.rfind(':') + 1), *ctx, 5s);
        ASSERT_TRUE(c) << c.error().message();
        ASSERT_FALSE(c->set_deadline(net::deadline_after(10s)));
        auto ask = [&](std::string_view path) {
          std::string req = get(path);
          EXPECT_TRUE(c->write(req.data(), req.size()));
          std::string got;
          char buf[4096];
          while (got.find("path ") == std::string::npos || got.back() != *path.rbegin()) {
            Result<std::size_t> n = c->read(buf, sizeof buf);
            if (!n || *n == 0) break;
            got.append(buf, *n);
          }
          return got;
        };
        EXPECT_NE(ask("/one").find("path /one"), std::string::npos);
        goro::sleep(kParked);
        EXPECT_NE(ask("/two").find("path /two"), std::string::npos);
        c->close();
      },
      2, pki.leaf("server", {"localhost"}));
}

}  // namespace
}  // namespace goro::http::test
