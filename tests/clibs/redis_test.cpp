// hiredis' async context on goroutines (examples/clients/redis.hpp over net::FdWatch)
// against a real redis-server started for this binary on a Unix socket.
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/context.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "clibs_test_util.hpp"
#include "redis.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

TestServer& redis_server() {
  static TestServer server("redis");
  return server;
}

std::string key(const char* name) {
  return std::string(name) + ":p" + std::to_string(goro::maxprocs());
}

using RedisTest = ProcsTest;

TEST_P(RedisTest, StraightLineCommands) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    auto r = redis::Client::connect_unix(redis_server().address());
    const std::string k = key("greeting");
    EXPECT_EQ(r->command({"SET", k, std::string("hi\0there", 8)}).str, "OK");
    redis::Reply got = r->command({"GET", k});
    EXPECT_EQ(got.type, REDIS_REPLY_STRING);
    EXPECT_EQ(got.str, std::string("hi\0there", 8));  // binary-safe
    EXPECT_TRUE(r->command({"GET", key("missing")}).is_nil());
    redis::Reply wrong = r->command({"LPUSH", k, "x"});
    EXPECT_EQ(wrong.type, REDIS_REPLY_ERROR);
    EXPECT_FALSE(wrong.ok());
    EXPECT_NE(wrong.str.find("WRONGTYPE"), std::string::npos);
    const std::string list = key("list");
    r->command({"DEL", list});
    EXPECT_EQ(r->command({"RPUSH", list, "a", "b", "c"}).integer, 3);
    redis::Reply range = r->command({"LRANGE", list, "0", "-1"});
    ASSERT_EQ(range.elements.size(), 3u);
    EXPECT_EQ(range.elements[2].str, "c");
    EXPECT_TRUE(r->connected());
  });
}

TEST_P(RedisTest, ConcurrentBlpopsParkGoroutinesNotThreads) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    constexpr int kClients = 100;
    std::vector<std::unique_ptr<redis::Client>> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.push_back(redis::Client::connect_unix(redis_server().address()));
    }
    std::atomic<int> timed_out{0};
    goro::WaitGroup wg;
    const auto t0 = Clock::now();
    for (auto& c : clients) {
      wg.add(1);
      goro::go([&] {
        // Nothing is ever pushed: each waits its 0.1 s on the server and gets nil.
        if (c->command({"BLPOP", key("nothing"), "0.1"}).is_nil()) timed_out.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    const double ms = ms_since(t0);
    EXPECT_EQ(timed_out.load(), kClients);
    EXPECT_GE(ms, 99);
    EXPECT_LT(ms, 1500);
    EXPECT_LE(goro::stats().threads, thread_budget());
  });
}

TEST_P(RedisTest, BlpopWokenByAPushFromAnotherClient) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    auto waiter = redis::Client::connect_unix(redis_server().address());
    auto pusher = redis::Client::connect_unix(redis_server().address());
    const std::string q = key("jobs");
    waiter->command({"DEL", q});
    After push(30ms, [&] { pusher->command({"LPUSH", q, "job-1"}); });
    const auto t0 = Clock::now();
    redis::Reply job = waiter->command({"BLPOP", q, "5"});
    ASSERT_EQ(job.elements.size(), 2u) << job.error;
    EXPECT_EQ(job.elements[1].str, "job-1");
    EXPECT_LT(ms_since(t0), 2000);
  });
}

TEST_P(RedisTest, ManyGoroutinesPipelineOnOneConnection) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    auto r = redis::Client::connect_unix(redis_server().address());
    const std::string counter = key("counter");
    r->command({"DEL", counter});
    goro::Mutex mu;
    std::set<long long> seen;
    goro::WaitGroup wg;
    for (int g = 0; g < 50; ++g) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < 100; ++i) {
          redis::Reply n = r->command({"INCR", counter});
          std::lock_guard lock(mu);
          seen.insert(n.integer);
        }
        wg.done();
      });
    }
    wg.wait();
    // Every reply went to the goroutine that sent its command: 5000 distinct values.
    EXPECT_EQ(seen.size(), 5000u);
    EXPECT_EQ(r->command({"GET", counter}).str, "5000");
  });
}

TEST_P(RedisTest, LargeValues) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    auto r = redis::Client::connect_unix(redis_server().address());
    // hiredis reads 16 KiB per readiness; the rest of a 4 MB reply is already in the
    // socket, with no edge to come: the watch must be level-triggered.
    const std::string big(4 << 20, 'v');
    ASSERT_EQ(r->command({"SET", key("big"), big}).str, "OK");
    EXPECT_EQ(r->command({"GET", key("big")}).str, big);
  });
}

TEST_P(RedisTest, AContextEndsTheWait) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    auto r = redis::Client::connect_unix(redis_server().address());
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
    const auto t0 = Clock::now();
    redis::Reply gave_up = r->command({"BLPOP", key("never"), "10"}, ctx);
    EXPECT_EQ(gave_up.type, 0);
    EXPECT_FALSE(gave_up.error.empty());
    EXPECT_LT(ms_since(t0), 2000);
    cancel();
    // The BLPOP still holds the connection on the server; closing it does not wait.
    const auto t1 = Clock::now();
    r.reset();
    EXPECT_LT(ms_since(t1), 2000);
  });
}

TEST_P(RedisTest, AConnectionTheServerDropsFailsCleanly) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    auto victim = redis::Client::connect_unix(redis_server().address());
    const std::string name = key("victim");
    ASSERT_EQ(victim->command({"CLIENT", "SETNAME", name}).str, "OK");
    auto admin = redis::Client::connect_unix(redis_server().address());
    After kill(30ms, [&] {
      admin->command({"CLIENT", "KILL", "USER", "default", "SKIPME", "yes"});
    });
    // Parked in BLPOP when the server closes the connection: the reader sees the end,
    // hiredis frees the context (the cleanup hook releases the watch first).
    redis::Reply r = victim->command({"BLPOP", key("never"), "10"});
    EXPECT_EQ(r.type, 0);
    EXPECT_FALSE(victim->connected());
    EXPECT_FALSE(victim->command({"PING"}).error.empty());
    // A server that is not there.
    auto nobody = redis::Client::connect_unix("/nonexistent-goro.sock");
    EXPECT_FALSE(nobody->command({"PING"}).error.empty());
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, RedisTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
