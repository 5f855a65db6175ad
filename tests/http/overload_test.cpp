// Overload protection (overload.hpp, ServerOptions::max_connections): what a client of an
// overloaded server sees — 503 or 429 at once with Retry-After, connections past the limit
// held in the backlog until one closes — and how the adaptive limit moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <goro/http/httptest.hpp>
#include <goro/http/overload.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "test_util.hpp"

namespace goro::http {
namespace {

using namespace std::chrono_literals;

// ---- the limiter itself ----

TEST(ConcurrencyLimiter, FixedLimitAdmitsThatManyAtOnce) {
  auto limiter = ConcurrencyLimiter::fixed(3);
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_FALSE(limiter->try_acquire());
  EXPECT_EQ(limiter->in_flight(), 3u);
  limiter->release(1ms);
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_EQ(limiter->limit(), 3u);
}

// Fills the limiter to its limit, lets the window pass, and releases every place with
// the given latency: one window of the adaptive limiter at full use.
void full_window(ConcurrencyLimiter& limiter, std::chrono::nanoseconds latency) {
  std::this_thread::sleep_for(2ms);
  std::size_t taken = 0;
  while (limiter.try_acquire()) ++taken;
  for (std::size_t i = 0; i < taken; ++i) limiter.release(latency);
}

TEST(ConcurrencyLimiter, AdaptiveLimitGrowsWhileLatencyHoldsAndShrinksWhenItRises) {
  auto limiter = ConcurrencyLimiter::adaptive(
      {.initial_limit = 4, .min_limit = 2, .max_limit = 64, .tolerance = 2.0,
       .window = 1ms, .min_samples = 2});
  for (int i = 0; i < 12; ++i) full_window(*limiter, 1ms);
  const std::size_t grown = limiter->limit();
  EXPECT_GT(grown, 20u) << "twelve full windows at the no-load latency";
  EXPECT_LE(grown, 64u);

  // Latency ten times the no-load one: the requests are queueing; the limit comes down
  // to its floor.
  for (int i = 0; i < 12; ++i) full_window(*limiter, 10ms);
  EXPECT_EQ(limiter->limit(), 2u);

  // Back to the no-load latency: it climbs again.
  for (int i = 0; i < 6; ++i) full_window(*limiter, 1ms);
  EXPECT_GT(limiter->limit(), 4u);
}

TEST(ConcurrencyLimiter, AdaptiveLimitDoesNotGrowWhenItIsNotReached) {
  auto limiter = ConcurrencyLimiter::adaptive(
      {.initial_limit = 8, .min_limit = 1, .max_limit = 64, .window = 1ms, .min_samples = 2});
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(2ms);
    for (int j = 0; j < 3; ++j) {  // one request at a time: far below the limit
      ASSERT_TRUE(limiter->try_acquire());
      limiter->release(1ms);
    }
  }
  EXPECT_EQ(limiter->limit(), 8u);
}

// ---- limit_concurrency through a server ----

int get_status(const std::string& url, std::string* retry_after = nullptr,
               std::string* body = nullptr) {
  Client client;
  Result<ClientResponse> r = client.get(url);
  if (!r) return -1;
  if (retry_after) *retry_after = std::string(r->header("retry-after"));
  if (body) *body = r->body;
  return r->status;
}

// Waits (parking) until cond() holds, at most 5 s.
template <class F>
bool eventually(F cond) {
  for (int i = 0; i < 5000 && !cond(); ++i) goro::sleep(1ms);
  return cond();
}

class LimitConcurrencyOnProcs : public ::testing::TestWithParam<int> {};

TEST_P(LimitConcurrencyOnProcs, ShedsPastTheLimitAtOnceWith503AndRetryAfter) {
  goro::run(
      [] {
        goro::Chan<int> gate;
        std::atomic<int> entered{0};
        std::atomic<int> ran{0};
        auto limiter = ConcurrencyLimiter::fixed(2);
        Handler app = chain(
            [&](Request&, ResponseWriter& w) {
              ran.fetch_add(1);
              entered.fetch_add(1);
              (void)gate.recv();
              w.text("done");
            },
            {limit_concurrency(limiter, {.retry_after = 3s})});
        auto server = httptest::Server::start(app);
        ASSERT_TRUE(server) << server.error().message();
        const std::string url = server->url() + "/";

        goro::WaitGroup wg;
        std::atomic<int> ok{0};
        for (int i = 0; i < 2; ++i) {
          wg.add(1);
          goro::go([&] {
            if (get_status(url) == 200) ok.fetch_add(1);
            wg.done();
          });
        }
        ASSERT_TRUE(eventually([&] { return entered.load() == 2; }));
        EXPECT_EQ(limiter->in_flight(), 2u);

        const std::uint64_t shed_before = server_stats().requests_shed;
        std::string retry_after, body;
        EXPECT_EQ(get_status(url, &retry_after, &body), 503);
        EXPECT_EQ(retry_after, "3");
        EXPECT_NE(body.find("overloaded"), std::string::npos) << body;
        EXPECT_EQ(ran.load(), 2) << "the shed request never reached the handler";
        EXPECT_GE(server_stats().requests_shed, shed_before + 1);

        gate.close();
        wg.wait();
        EXPECT_EQ(ok.load(), 2);
        EXPECT_EQ(limiter->in_flight(), 0u);
        EXPECT_EQ(get_status(url), 200) << "room again once the two are answered";
      },
      goro::Config{.maxprocs = GetParam()});
}

INSTANTIATE_TEST_SUITE_P(Procs, LimitConcurrencyOnProcs, ::testing::Values(1, 2, 4, 8));

TEST(LimitConcurrency, ShedsARequestThatWaitedPastMaxQueueDelay) {
  int ran = 0;
  Handler limited = chain([&](Request&, ResponseWriter& w) { ++ran; w.text("ran"); },
                          {limit_concurrency(ConcurrencyLimiter::fixed(10),
                                             {.max_queue_delay = 20ms})});
  // As the server sets it: when the request's bytes arrived.
  auto arrived = [&](std::chrono::nanoseconds ago) {
    return [&, ago](Request& req, ResponseWriter& w) {
      req.set_received_at(ago.count() < 0 ? std::chrono::steady_clock::time_point()
                                          : std::chrono::steady_clock::now() - ago);
      limited(req, w);
    };
  };
  httptest::Recorded late = httptest::record(arrived(100ms), httptest::new_request("GET", "/"));
  EXPECT_EQ(late.status, 503);
  EXPECT_EQ(late.header("retry-after"), "1");
  EXPECT_NE(late.body.find("overloaded"), std::string::npos) << late.body;
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(httptest::record(arrived(1ms), httptest::new_request("GET", "/")).status, 200);
  EXPECT_EQ(httptest::record(arrived(-1ns), httptest::new_request("GET", "/")).status, 200)
      << "an unknown arrival is not a late one";
  EXPECT_EQ(ran, 2);
}

// The server stamps each HTTP/1.1 request with the time the netpoller saw it arrive,
// which a request that waited for the netpoller (the usual keep-alive case) carries.
TEST(ReceivedAt, AKeepAliveRequestCarriesItsArrival) {
  std::atomic<long long> waited_us{-1};
  test::TestServer server(
      [&](Request& req, ResponseWriter& w) {
        if (req.received_at().time_since_epoch().count() != 0) {
          waited_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - req.received_at())
                          .count();
        }
        w.text("ok");
      },
      {}, 2);
  test::RawConn c(server.port());
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(c.send(request));
  ASSERT_TRUE(c.read_response());
  std::this_thread::sleep_for(50ms);  // the connection waits in the netpoller
  ASSERT_TRUE(c.send(request));
  ASSERT_TRUE(c.read_response());
  EXPECT_GE(waited_us.load(), 0) << "the second request was stamped";
  EXPECT_LT(waited_us.load(), 50'000) << "stamped at its arrival, not at the wait's start";
}

// Many clients against a handler that waits 5 ms for a backend, through an adaptive
// limiter with a floor of 2: the limit moves within its bounds, requests past it are
// shed, and every request gets one of the two answers.
TEST(LimitConcurrency, AdaptiveLimiterAnswersEveryRequestServedOrShed) {
  goro::run(
      [] {
        auto limiter = ConcurrencyLimiter::adaptive(
            {.initial_limit = 4, .min_limit = 2, .max_limit = 16, .window = 20ms,
             .min_samples = 5});
        Handler app = chain(
            [](Request&, ResponseWriter& w) {
              goro::sleep(5ms);
              w.text("ok");
            },
            {limit_concurrency(limiter)});
        auto server = httptest::Server::start(app);
        ASSERT_TRUE(server) << server.error().message();
        const std::string url = server->url() + "/";
        std::atomic<int> served{0}, shed{0}, other{0};
        goro::WaitGroup wg;
        for (int c = 0; c < 32; ++c) {
          wg.add(1);
          goro::go([&] {
            Client client;
            for (int i = 0; i < 20; ++i) {
              Result<ClientResponse> r = client.get(url);
              if (r && r->status == 200) {
                served.fetch_add(1);
              } else if (r && r->status == 503) {
                shed.fetch_add(1);
                goro::sleep(2ms);
              } else {
                other.fetch_add(1);
              }
            }
            wg.done();
          });
        }
        wg.wait();
        EXPECT_EQ(served.load() + shed.load(), 32 * 20);
        EXPECT_EQ(other.load(), 0);
        EXPECT_GT(served.load(), 0);
        EXPECT_GT(shed.load(), 0) << "32 clients against a limit of at most 16";
        EXPECT_GE(limiter->limit(), 2u);
        EXPECT_LE(limiter->limit(), 16u);
        EXPECT_EQ(limiter->in_flight(), 0u);
      },
      goro::Config{.maxprocs = 2});
}

// While requests are being shed for their wait, a batch of requests readied together is
// decided before any of them runs: on one P the newest one is served and the others are
// answered 503 at once, not after its handler (first in, first out, the oldest would run
// and the others would wait for it, then be served late or shed late). One P: with more,
// an idle P takes each request as it arrives and there is no batch to order.
TEST(LimitConcurrency, UnderPressureABatchIsShedAtOnceAndItsNewestServed) {
  constexpr auto kSpin = 40ms;
  Handler limited = chain(
      [&](Request&, ResponseWriter& w) {
        // CPU without a runtime call, as a handler that computes: the P is not given up.
        const auto until = std::chrono::steady_clock::now() + kSpin;
        while (std::chrono::steady_clock::now() < until) {
        }
        w.text("served");
      },
      {limit_concurrency(ConcurrencyLimiter::fixed(8), {.max_queue_delay = 500ms})});
  // A request marked late is stamped as having arrived a second ago: it is shed for its
  // wait, which puts the limiter under pressure. No other request here waits 500 ms.
  test::TestServer server(
      [&](Request& req, ResponseWriter& w) {
        if (req.header("x-late") == "1") {
          req.set_received_at(std::chrono::steady_clock::now() - 1s);
        }
        limited(req, w);
      },
      {}, 1);
  // One attempt: what it saw, or "" when the batch was decided as it should be. A machine
  // busy with other work can delay the client's batch past the handler it should arrive
  // during, or the server past the pressure's 100 ms, and then the requests are served
  // one by one as they come; so up to three attempts, each from a fresh start. First in,
  // first out, every attempt would see all five served, one after another.
  constexpr int kBatch = 5;
  auto attempt = [&]() -> std::string {
    test::RawConn late(server.port()), busy(server.port());
    if (!late.send("GET / HTTP/1.1\r\nHost: x\r\nX-Late: 1\r\n\r\n")) return "send failed";
    std::optional<test::RawResponse> shed = late.read_response();
    if (!shed || shed->status != 503) return "the late request was not shed";

    // The P spins for one request; the batch arrives meanwhile.
    std::vector<std::unique_ptr<test::RawConn>> batch;
    for (int i = 0; i < kBatch; ++i) batch.push_back(std::make_unique<test::RawConn>(server.port()));
    if (!busy.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) return "send failed";
    std::this_thread::sleep_for(10ms);
    for (auto& c : batch) {
      if (!c->send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) return "send failed";
    }
    std::vector<int> status(kBatch, 0);
    std::vector<std::chrono::steady_clock::time_point> answered(kBatch);
    std::vector<std::thread> readers;
    for (int i = 0; i < kBatch; ++i) {
      readers.emplace_back([&, i] {
        const auto at = static_cast<std::size_t>(i);
        if (std::optional<test::RawResponse> r = batch[at]->read_response()) status[at] = r->status;
        answered[at] = std::chrono::steady_clock::now();
      });
    }
    std::optional<test::RawResponse> first = busy.read_response();
    for (std::thread& t : readers) t.join();
    if (!first || first->status != 200) return "the busy request was not served";

    // The batch may come in two polls (the netpoller can see part of it, then the rest),
    // each decided on its own: the newest of each is served. What a client sees either
    // way: some are shed, and each shed answer comes before a served one's handler has
    // run, not after it.
    int served = 0, sheds = 0;
    std::chrono::steady_clock::time_point last_served{};
    for (int i = 0; i < kBatch; ++i) {
      const auto at = static_cast<std::size_t>(i);
      if (status[at] == 200) {
        ++served;
        last_served = std::max(last_served, answered[at]);
      } else if (status[at] == 503) {
        ++sheds;
      } else {
        ADD_FAILURE() << "request " << i << " was answered " << status[at];
      }
    }
    if (served == 0) return "none of the batch was served";
    if (sheds == 0) return "all " + std::to_string(served) + " of the batch were served";
    for (int i = 0; i < kBatch; ++i) {
      const auto at = static_cast<std::size_t>(i);
      if (status[at] == 503 && answered[at] + kSpin / 2 >= last_served) {
        return "request " + std::to_string(i) + " was shed only " +
               std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                  last_served - answered[at])
                                  .count()) +
               " us before the last served answer";
      }
    }
    return "";
  };
  std::vector<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    std::string what = attempt();
    if (what.empty()) return;
    seen.push_back(what);
    std::this_thread::sleep_for(150ms);  // the pressure ends: the next attempt starts afresh
  }
  ADD_FAILURE() << "three attempts, none decided the batch first: " << seen[0] << "; " << seen[1]
                << "; " << seen[2];
}

// ---- rate_limit ----

TEST(RateLimit, AnswersFromItsBucketThen429WithRetryAfter) {
  Handler app = chain([](Request&, ResponseWriter& w) { w.text("ok"); },
                      {rate_limit({.rate = 0.5, .burst = 3})});
  const auto from = [](std::string_view addr) {
    return httptest::new_request("GET", "/").remote_addr(addr);
  };
  for (int i = 0; i < 3; ++i) {
    httptest::Recorded r = httptest::record(app, from("192.0.2.1:4000"));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("ratelimit-limit"), "3");
    EXPECT_EQ(r.header("ratelimit-remaining"), std::to_string(2 - i));
  }
  const std::uint64_t shed_before = server_stats().requests_shed;
  httptest::Recorded refused = httptest::record(app, from("192.0.2.1:4001"));
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.header("retry-after"), "2") << "a token every 2 s";
  EXPECT_EQ(refused.header("ratelimit-remaining"), "0");
  EXPECT_EQ(refused.header("ratelimit-limit"), "3");
  EXPECT_NE(refused.body.find("rate limit exceeded"), std::string::npos) << refused.body;
  EXPECT_EQ(server_stats().requests_shed, shed_before + 1);

  // Another address has a bucket of its own; the port is no part of the key.
  EXPECT_EQ(httptest::record(app, from("192.0.2.2:4000")).status, 200);
  EXPECT_EQ(httptest::record(app, from("[2001:db8::1]:4000")).status, 200);
}

TEST(RateLimit, KeysByHeaderOrForwardedForAndAnEmptyKeyIsExempt) {
  Handler by_header = chain([](Request&, ResponseWriter& w) { w.text("ok"); },
                            {rate_limit({.rate = 0.1, .burst = 1, .key = key_by_header("x-api-key")})});
  auto with_key = [](std::string_view key) {
    return httptest::new_request("GET", "/").header("X-Api-Key", key);
  };
  EXPECT_EQ(httptest::record(by_header, with_key("alice")).status, 200);
  EXPECT_EQ(httptest::record(by_header, with_key("alice")).status, 429);
  EXPECT_EQ(httptest::record(by_header, with_key("bob")).status, 200);
  EXPECT_EQ(httptest::record(by_header, httptest::new_request("GET", "/")).status, 200);
  EXPECT_EQ(httptest::record(by_header, httptest::new_request("GET", "/")).status, 429)
      << "requests without the field share a bucket";

  Handler by_proxy = chain([](Request&, ResponseWriter& w) { w.text("ok"); },
                           {rate_limit({.rate = 0.1, .burst = 1, .key = key_by_forwarded_for(1)})});
  auto via = [](std::string_view xff) {
    return httptest::new_request("GET", "/").header("X-Forwarded-For", xff).remote_addr("10.0.0.9:80");
  };
  EXPECT_EQ(httptest::record(by_proxy, via("198.51.100.7")).status, 200);
  EXPECT_EQ(httptest::record(by_proxy, via("203.0.113.1, 198.51.100.7")).status, 429)
      << "the nearest proxy saw the same client";
  EXPECT_EQ(httptest::record(by_proxy, via("198.51.100.8")).status, 200);
  // Garbage in the field: the connection's address is the key.
  EXPECT_EQ(httptest::record(by_proxy, via("not-an-address")).status, 200);
  EXPECT_EQ(httptest::record(by_proxy, via("also garbage")).status, 429);

  Handler exempting = chain([](Request&, ResponseWriter& w) { w.text("ok"); },
                            {rate_limit({.rate = 0.1, .burst = 1,
                                         .key = [](Request& req) {
                                           return req.path() == "/health" ? std::string()
                                                                          : std::string("all");
                                         }})});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(httptest::record(exempting, httptest::new_request("GET", "/health")).status, 200);
  }
}

TEST(RateLimit, AFloodOfKeysIsForgottenNotHeld) {
  Handler app = chain([](Request&, ResponseWriter& w) { w.text("ok"); },
                      {rate_limit({.rate = 0.01, .burst = 1, .key = key_by_header("k"),
                                   .max_keys = 64})});
  goro::run([&] {
    auto key = [](std::string_view k) { return httptest::new_request("GET", "/").header("k", k); };
    EXPECT_EQ(httptest::record(app, key("first")).status, 200);
    EXPECT_EQ(httptest::record(app, key("first")).status, 429);
    for (int i = 0; i < 2000; ++i) {
      ASSERT_EQ(httptest::record(app, key("flood-" + std::to_string(i))).status, 200);
    }
    // Its bucket was among the longest idle, so it was forgotten: as good as new.
    EXPECT_EQ(httptest::record(app, key("first")).status, 200);
  });
}

TEST(ForwardedAddress, ReadsTheNthAddressFromTheRight) {
  EXPECT_EQ(forwarded_address("203.0.113.7", 1), "203.0.113.7");
  EXPECT_EQ(forwarded_address("203.0.113.7, 10.0.0.1", 1), "10.0.0.1");
  EXPECT_EQ(forwarded_address("203.0.113.7, 10.0.0.1", 2), "203.0.113.7");
  EXPECT_EQ(forwarded_address(" 2001:db8::1 ,10.0.0.1", 2), "2001:db8::1");
  EXPECT_EQ(forwarded_address("[2001:db8::1]:8443", 1), "2001:db8::1");
  EXPECT_EQ(forwarded_address("[2001:db8::1]", 1), "2001:db8::1");
  EXPECT_FALSE(forwarded_address("203.0.113.7", 2)) << "fewer addresses than proxies";
  EXPECT_FALSE(forwarded_address("203.0.113.7", 0));
  EXPECT_FALSE(forwarded_address("", 1));
  EXPECT_FALSE(forwarded_address("unknown", 1));
  EXPECT_FALSE(forwarded_address("203.0.113.7:80", 1)) << "IPv4 with a port is not an address";
  EXPECT_FALSE(forwarded_address("[2001:db8::1]x", 1));
  EXPECT_FALSE(forwarded_address("[2001:db8::1", 1));
  EXPECT_FALSE(forwarded_address("1.2.3.4,", 1)) << "the last element is empty";
  EXPECT_FALSE(forwarded_address("256.1.1.1", 1));
}

// ---- max_connections ----

class MaxConnectionsOnProcs : public ::testing::TestWithParam<int> {};

TEST_P(MaxConnectionsOnProcs, ConnectionsPastTheLimitWaitForOneToClose) {
  ServerOptions options;
  options.max_connections = 2;
  const std::uint64_t waits_before = server_stats().accept_waits;
  test::TestServer server([](Request&, ResponseWriter& w) { w.text("hi"); }, options, GetParam());
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

  test::RawConn a(server.port()), b(server.port());
  ASSERT_TRUE(a.send(request));
  ASSERT_TRUE(b.send(request));
  ASSERT_TRUE(a.read_response());
  ASSERT_TRUE(b.read_response());

  // The kernel completes the third handshake (the backlog), but nobody accepts it.
  test::RawConn c(server.port());
  ASSERT_TRUE(c.send(request));
  EXPECT_FALSE(c.fill(300)) << "answered while two connections were open";
  EXPECT_EQ(server.server()->connection_count(), 2u);
  EXPECT_GT(server_stats().accept_waits, waits_before);

  // a keeps its speed meanwhile.
  ASSERT_TRUE(a.send(request));
  EXPECT_TRUE(a.read_response());

  b.shutdown_write();
  ASSERT_TRUE(b.closed_by_peer());
  std::optional<test::RawResponse> answer = c.read_response();
  ASSERT_TRUE(answer) << "accepted once b closed";
  EXPECT_EQ(answer->status, 200);
}

INSTANTIATE_TEST_SUITE_P(Procs, MaxConnectionsOnProcs, ::testing::Values(1, 2, 4, 8));

// A flood of connections, each sending a request, far past max_connections: the server
// never holds more than the limit, answers every one of them as earlier ones close
// (the rest wait in the kernel's backlog), and shows its limit on ServerStats (the
// http_server_max_connections gauge of /metrics).
TEST_P(MaxConnectionsOnProcs, AFloodOfConnectionsIsServedWithinTheLimit) {
  ServerOptions options;
  options.max_connections = 8;
  const std::uint64_t limit_before = server_stats().max_connections;
  test::TestServer server([](Request&, ResponseWriter& w) { w.text("hi"); }, options, GetParam());
  const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  {
    test::RawConn first(server.port());  // answered: the accept loop runs
    ASSERT_TRUE(first.send(request));
    ASSERT_TRUE(first.read_response());
  }
  EXPECT_EQ(server_stats().max_connections, limit_before + 8);
  constexpr int kFlood = 200;
  std::vector<std::unique_ptr<test::RawConn>> flood;
  for (int i = 0; i < kFlood; ++i) {
    flood.push_back(std::make_unique<test::RawConn>(server.port()));
    ASSERT_TRUE(flood.back()->send(request));
  }
  std::size_t most = 0;
  int answered = 0;
  for (auto& conn : flood) {
    std::optional<test::RawResponse> answer = conn->read_response();
    if (answer && answer->status == 200) ++answered;
    most = std::max(most, server.server()->connection_count());
    conn.reset();  // room for the next one in the backlog
  }
  EXPECT_EQ(answered, kFlood);
  EXPECT_LE(most, 8u);
  server.stop(1s);
  EXPECT_EQ(server_stats().max_connections, limit_before) << "a stopped server's limit counts no more";
}

// The accept loop waits for room (max_connections = 1, held by an idle keep-alive
// connection) while a second client sits in the backlog: shutdown ends that wait and,
// with no idle grace, closes the idle connection at once, so stop() returns well before
// its deadline.
TEST(MaxConnections, ShutdownEndsAnAcceptLoopWaitingAtTheLimit) {
  ServerOptions options;
  options.max_connections = 1;
  options.shutdown_idle_grace = 0ms;  // the default 500 ms would meet the 500 ms deadline
  auto server = std::make_unique<test::TestServer>(
      [](Request&, ResponseWriter& w) { w.text("hi"); }, options, 2);
  test::RawConn a(server->port());
  ASSERT_TRUE(a.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(a.read_response());
  test::RawConn waiting(server->port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server->stop(500ms)) << "the idle connection closes at once";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  server.reset();
}

}  // namespace
}  // namespace goro::http
