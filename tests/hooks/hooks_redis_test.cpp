// hiredis' synchronous API (redisConnectUnix, redisCommand) on goroutines, over
// goro::hooks, against a real redis-server started for this binary.
#include <hiredis/hiredis.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>

#include "clibs_test_util.hpp"
#include "hooks_lib_util.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using goro::hooks::testing::burst;

TestServer& redis_server() {
  static TestServer server("redis");
  return server;
}

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Reply command(redisContext* c, const char* fmt, const char* arg) {
  return Reply(static_cast<redisReply*>(redisCommand(c, fmt, arg)));
}

using HooksRedisTest = ProcsTest;

// BLPOP on an empty list with a timeout, 200 at once at one P on 200 connections: they
// end together, and a push from another goroutine reaches its waiter.
TEST_P(HooksRedisTest, ConcurrentBlpopParkGoroutinesNotThreads) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(GetParam(), [] {
    constexpr int kClients = 200;
    std::vector<Context> conns(kClients);
    const auto connected = burst(kClients, [&](int i) {
      conns[i].reset(redisConnectUnix(redis_server().address().c_str()));
      return conns[i] != nullptr && conns[i]->err == 0;
    });
    ASSERT_EQ(connected.succeeded, kClients);
    const auto pops = burst(kClients, [&](int i) {
      const std::string key = "empty:" + std::to_string(i);
      Reply r = command(conns[i].get(), "BLPOP %s 0.1", key.c_str());
      return r != nullptr && r->type == REDIS_REPLY_NIL;
    });
    goro::hooks::testing::print("hiredis BLPOP 0.1 s", kClients, pops);
    EXPECT_EQ(pops.succeeded, kClients);
    EXPECT_GE(pops.ms, 99);
    EXPECT_LT(pops.ms, 2000);
    EXPECT_LE(pops.threads, thread_bound(pops, thread_budget()));

    Context pusher(redisConnectUnix(redis_server().address().c_str()));
    ASSERT_TRUE(pusher && pusher->err == 0);
    After push(50ms, [&] { command(pusher.get(), "RPUSH jobs %s", "job-1"); });
    Reply r = command(conns[0].get(), "BLPOP %s 5", "jobs");
    ASSERT_TRUE(r != nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->elements, 2u);
    EXPECT_EQ(std::string(r->element[1]->str), "job-1");
  });
}

// redisSetTimeout sets SO_RCVTIMEO: a BLPOP longer than it fails with hiredis' I/O error
// (EAGAIN) once the timeout passes, as it does on a thread.
TEST(HooksRedis, ASocketTimeoutEndsABlockingRead) {
  GORO_REQUIRE_SERVER(redis_server());
  run_with(1, [] {
    Context c(redisConnectUnix(redis_server().address().c_str()));
    ASSERT_TRUE(c && c->err == 0);
    ASSERT_EQ(redisSetTimeout(c.get(), timeval{0, 100'000}), REDIS_OK);
    const auto t0 = std::chrono::steady_clock::now();
    Reply r = command(c.get(), "BLPOP %s 2", "never");
    const auto ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
    EXPECT_EQ(r, nullptr);
    EXPECT_EQ(c->err, REDIS_ERR_IO) << c->errstr;  // "Resource temporarily unavailable"
    EXPECT_GE(ms.count(), 99);
    EXPECT_LT(ms.count(), 1500);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksRedisTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
