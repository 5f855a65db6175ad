// goro::redis::Client against a real redis-server (scripts/test-servers.sh, on a Unix
// socket in a temporary folder, through tests/clibs' TestServer), at 1 and 4 Ps: commands and typed replies, the
// server's errors with its words, pipelines, transactions, scripts, the pool's limit,
// Contexts and timeouts, the server restarting under calls and subscriptions, and a
// fake server that answers garbage.
#include <goro/redis/redis.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/net/listener.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "clibs_test_util.hpp"
#include "leak_check.hpp"

namespace goro::redis {
namespace {

using namespace std::chrono_literals;

// One server for the whole binary (stopping one takes redis-server a second or two).
using clibs::testing::TestServer;

TestServer& the_server() {
  static TestServer server("redis");
  return server;
}

class RedisClient : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    GORO_REQUIRE_SERVER(server_);
    Client flush(options());
    ASSERT_TRUE(goro_run_flush(flush));
  }
  Options options() const {
    Options o;
    o.address = "unix:" + server_.address();
    return o;
  }
  void run(std::function<void()> body) {
    goro::Config config;
    config.maxprocs = GetParam();
    goro::run(std::move(body), config);
  }
  // Each test starts from an empty database.
  static bool goro_run_flush(Client& c) {
    bool ok = false;
    goro::run([&] { ok = static_cast<bool>(c.command(Context(), {"FLUSHALL"})); });
    return ok;
  }
  TestServer& server_ = the_server();
};

std::string ms_since(std::chrono::steady_clock::time_point t0) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count()) +
         " ms";
}

TEST_P(RedisClient, CommandsAndTypedReplies) {
  run([&] {
    Client redis(options());
    const Context ctx;
    const std::string binary("a\0b\r\nc", 6);
    ASSERT_FALSE(redis.set(ctx, "k1", binary));
    auto got = redis.get(ctx, "k1");
    ASSERT_TRUE(got) << got.error().what();
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ(**got, binary);
    auto missing = redis.get(ctx, "no-such-key");
    ASSERT_TRUE(missing);
    EXPECT_FALSE(missing->has_value());

    EXPECT_EQ(*redis.incr(ctx, "n"), 1);
    EXPECT_EQ(*redis.incr(ctx, "n"), 2);
    // A command of any length, built at run time.
    std::vector<std::string> mget{"MGET"};
    for (int i = 0; i < 50; ++i) mget.push_back(i % 2 == 0 ? "k1" : "no-such-key");
    auto many = redis.command(ctx, mget);
    ASSERT_TRUE(many) << many.error().what();
    ASSERT_EQ(many->elements.size(), 50u);
    EXPECT_EQ(many->elements[0].str, binary);
    EXPECT_TRUE(many->elements[1].is_nil());
    EXPECT_EQ(*redis.del(ctx, {"k1", "n", "no-such-key"}), 2);

    // A TTL in whole seconds and in milliseconds.
    ASSERT_FALSE(redis.set(ctx, "t", "v", 2s));
    EXPECT_EQ(redis.command(ctx, {"TTL", "t"})->integer, 2);
    ASSERT_FALSE(redis.set(ctx, "t", "v", 1500ms));
    EXPECT_GT(redis.command(ctx, {"PTTL", "t"})->integer, 1000);
  });
}

TEST_P(RedisClient, ServerErrorsCarryTheServersWords) {
  run([&] {
    Client redis(options());
    const Context ctx;
    ASSERT_FALSE(redis.set(ctx, "s", "not a number"));
    auto r = redis.incr(ctx, "s");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::server_error);
    EXPECT_EQ(r.error().what(), "ERR value is not an integer or out of range");
    EXPECT_EQ(r.error().field("prefix"), "ERR");
    auto wrong = redis.command(ctx, {"LPUSH", "s", "x"});
    ASSERT_FALSE(wrong);
    EXPECT_EQ(wrong.error().field("prefix"), "WRONGTYPE");
    // The connection goes on: an error reply is a whole exchange.
    EXPECT_EQ(redis.command(ctx, {"PING"})->str, "PONG");
    EXPECT_EQ(redis.stats().discarded, 0u);
  });
}

TEST_P(RedisClient, PipelinesAndTransactions) {
  run([&] {
    Client redis(options());
    const Context ctx;
    Pipeline p;
    for (int i = 0; i < 100; ++i) p.add({"INCR", "counter"});
    p.add({"NO-SUCH-COMMAND"});
    auto replies = redis.exec(ctx, p);
    ASSERT_TRUE(replies) << replies.error().what();
    ASSERT_EQ(replies->size(), 101u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ((*replies)[i].integer, i + 1);
    EXPECT_TRUE(replies->back().is_error());

    Pipeline tx;
    tx.add({"SET", "a", "1"}).add({"INCRBY", "a", "41"}).add({"GET", "a"});
    auto done = redis.transaction(ctx, tx);
    ASSERT_TRUE(done) << done.error().what();
    ASSERT_EQ(done->elements.size(), 3u);
    EXPECT_EQ(done->elements[1].integer, 42);
    EXPECT_EQ(done->elements[2].str, "42");

    // A command the server will not queue aborts the whole transaction.
    Pipeline bad;
    bad.add({"SET", "b", "1"}).add({"NO-SUCH-COMMAND"});
    auto aborted = redis.transaction(ctx, bad);
    ASSERT_FALSE(aborted);
    EXPECT_EQ(aborted.error(), errc::server_error);
    EXPECT_FALSE(redis.get(ctx, "b")->has_value());
  });
}

// WATCH: a transaction that lost its race says so and ran nothing; 16 goroutines
// incrementing through watch() and retrying on tx_failed lose no increment; a watch
// ended without EXEC (an error or an exception out of fn) leaves its connection
// unwatched for the next call.
TEST_P(RedisClient, WatchedTransactionsAreOptimistic) {
  run([&] {
    Options o = options();
    o.pool_size = 1;  // every call on the one connection: a watch left on it would show
    Client redis(o);
    Client other(options());
    const Context ctx;
    ASSERT_FALSE(redis.set(ctx, "w", "1"));
    Error lost = redis.watch(ctx, {"w"}, [&](Watch& w) -> Error {
      auto v = w.command(ctx, {"GET", "w"});
      if (!v) return v.error();
      EXPECT_EQ(v->str, "1");
      EXPECT_FALSE(other.set(ctx, "w", "changed"));  // another client, between WATCH and EXEC
      Pipeline p;
      p.add({"SET", "w", "mine"});
      auto r = w.transaction(ctx, p);
      return r ? Error() : r.error();
    });
    EXPECT_EQ(lost, errc::tx_failed) << lost.what();
    EXPECT_EQ(**redis.get(ctx, "w"), "changed");

    // An error out of fn before EXEC: the connection is unwatched before it goes back,
    // so a plain transaction on it after another client's write still runs.
    Error mine = redis.watch(ctx, {"w"}, [&](Watch&) -> Error {
      return Error(std::make_error_code(std::errc::operation_canceled), "gave up");
    });
    EXPECT_EQ(mine.what(), "gave up");
    EXPECT_FALSE(other.set(ctx, "w", "again"));
    Pipeline plain;
    plain.add({"SET", "w", "after"});
    EXPECT_TRUE(redis.transaction(ctx, plain));
    EXPECT_THROW((void)redis.watch(ctx, {"w"}, [&](Watch&) -> Error { throw std::runtime_error("x"); }),
                 std::runtime_error);
    EXPECT_FALSE(other.set(ctx, "w", "again"));
    EXPECT_TRUE(redis.transaction(ctx, plain));
    EXPECT_EQ(redis.stats().open, 1);
    EXPECT_EQ(redis.stats().discarded, 0u);

    // Increments by GET and SET under WATCH, retried when they lose.
    Options shared = options();
    shared.pool_size = 8;
    Client many(shared);
    ASSERT_FALSE(many.set(ctx, "n", "0"));
    std::atomic<int> failures{0}, retries{0};
    goro::WaitGroup wg;
    for (int g = 0; g < 16; ++g) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < 10; ++i) {
          for (;;) {
            Error e = many.watch(ctx, {"n"}, [&](Watch& w) -> Error {
              auto v = w.command(ctx, {"GET", "n"});
              if (!v) return v.error();
              goro::yield();  // a window for the others
              Pipeline p;
              const std::string next = std::to_string(std::stoll(v->str) + 1);
              p.add({"SET", "n", next});
              auto r = w.transaction(ctx, p);
              return r ? Error() : r.error();
            });
            if (e != errc::tx_failed) {
              if (e) failures.fetch_add(1);
              break;
            }
            retries.fetch_add(1);
          }
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(**many.get(ctx, "n"), "160");
    std::printf("  160 increments, %d retried after losing the race\n", retries.load());
  });
}

// A pool of 16 under 16 goroutines that pause between calls, as handlers do between
// requests: with max_idle unset (pool_size) each connection is dialed once. (With the
// old default of 10 idle, every moment with more than 10 idle closed some, and the
// next calls dialed them again.) With max_idle 2, only 2 stay once the load is gone.
TEST_P(RedisClient, ConnectionsAreKeptBetweenCalls) {
  run([&] {
    for (const std::optional<int> max_idle : {std::optional<int>(), std::optional<int>(2)}) {
      Options o = options();
      o.pool_size = 16;
      o.max_idle = max_idle;
      Client redis(o);
      std::atomic<int> failures{0};
      goro::WaitGroup wg;
      for (int g = 0; g < 16; ++g) {
        wg.add(1);
        goro::go([&] {
          for (int i = 0; i < 25; ++i) {
            if (!redis.command(Context(), {"PING"})) failures.fetch_add(1);
            goro::sleep(std::chrono::microseconds(200));
          }
          wg.done();
        });
      }
      wg.wait();
      EXPECT_EQ(failures.load(), 0);
      const PoolStats s = redis.stats();
      if (!max_idle) {
        EXPECT_LE(s.connects, 16u) << "400 calls on 16 connections";
      }
      EXPECT_LE(s.idle, max_idle.value_or(16));
    }
  });
}

TEST_P(RedisClient, ScriptsRunBySha1AndLoadThemselves) {
  run([&] {
    Client redis(options());
    const Context ctx;
    ASSERT_TRUE(redis.command(ctx, {"SCRIPT", "FLUSH"}));
    Script sum("return tonumber(ARGV[1]) + tonumber(redis.call('GET', KEYS[1]) or 0)");
    ASSERT_FALSE(redis.set(ctx, "base", "40"));
    const std::string_view keys[] = {"base"};
    const std::string_view args[] = {"2"};
    auto first = redis.eval(ctx, sum, keys, args);  // NOSCRIPT, then EVAL
    ASSERT_TRUE(first) << first.error().what();
    EXPECT_EQ(first->integer, 42);
    auto loaded = redis.command(ctx, {"SCRIPT", "EXISTS", sum.sha1()});
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->elements.at(0).integer, 1);  // the server knows it by its SHA-1
    auto again = redis.eval(ctx, sum, keys, args);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->integer, 42);
  });
}

// 40 calls that each hold a connection 100 ms, on a pool of 4: never more than 4 open,
// and about 10 rounds' time.
TEST_P(RedisClient, PoolNeverOpensMoreThanItsSize) {
  run([&] {
    Options o = options();
    o.pool_size = 4;
    Client redis(o);
    const Context ctx;
    std::atomic<int> ok{0}, most_open{0};
    goro::WaitGroup wg;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) {
      wg.add(1);
      goro::go([&] {
        auto r = redis.command(ctx, {"BLPOP", "empty-list", "0.1"});
        if (r && r->is_nil()) ok.fetch_add(1);
        int open = redis.stats().open;
        int seen = most_open.load();
        while (open > seen && !most_open.compare_exchange_weak(seen, open)) {
        }
        wg.done();
      });
    }
    wg.wait();
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(ok.load(), 40);
    EXPECT_LE(most_open.load(), 4);
    const PoolStats s = redis.stats();
    EXPECT_LE(s.connects, 4u);
    EXPECT_GT(s.waits, 0u);
    EXPECT_GE(elapsed, 950ms) << ms_since(t0);
    EXPECT_LT(elapsed, 5s) << ms_since(t0);
  });
}

TEST_P(RedisClient, ContextAndTimeoutsEndACallAtOnce) {
  run([&] {
    Options o = options();
    o.read_timeout = 100ms;
    Client redis(o);
    auto t0 = std::chrono::steady_clock::now();
    auto slow = redis.command(Context(), {"BLPOP", "empty-list", "5"});
    ASSERT_FALSE(slow);
    EXPECT_EQ(slow.error(), net::errc::timeout) << slow.error().what();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << ms_since(t0);

    auto [ctx, cancel] = goro::with_timeout(Context(), 50ms);
    Options patient = options();
    Client redis2(patient);
    t0 = std::chrono::steady_clock::now();
    auto cut = redis2.command(ctx, {"BLPOP", "empty-list", "5"});
    cancel();
    ASSERT_FALSE(cut);
    EXPECT_EQ(cut.error(), context_errc::deadline_exceeded) << cut.error().what();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << ms_since(t0);
    // The connection cut short is not reused; the next call works.
    EXPECT_EQ(redis2.stats().discarded, 1u);
    EXPECT_EQ(redis2.command(Context(), {"PING"})->str, "PONG");
  });
}

// The server stops under a client and comes back: calls fail at once with a clear
// error meanwhile, then work again; nothing leaks.
TEST_P(RedisClient, ServerRestartFailsCallsClearlyThenRecovers) {
  run([&] {
    goro::test::LeakCheck leaks("redis restart");
    {
      Client redis(options());
      const Context ctx;
      ASSERT_FALSE(redis.set(ctx, "k", "v"));
      for (int i = 0; i < 8; ++i) ASSERT_TRUE(redis.command(ctx, {"PING"}));
      server_.stop();
      auto t0 = std::chrono::steady_clock::now();
      auto down = redis.command(ctx, {"PING"});
      ASSERT_FALSE(down);
      EXPECT_NE(down.error().what().find("redis: dial unix:"), std::string::npos)
          << down.error().what();
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << ms_since(t0);
      server_.start();
      ASSERT_TRUE(server_.ok());
      // Back within the back-off (at most max_backoff, 500 ms).
      t0 = std::chrono::steady_clock::now();
      Result<Reply, Error> up = Error(errc::closed);
      while (std::chrono::steady_clock::now() - t0 < 3s) {
        up = redis.command(ctx, {"PING"});
        if (up) break;
        goro::sleep(20ms);
      }
      ASSERT_TRUE(up) << up.error().what();
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << ms_since(t0);
      EXPECT_GT(redis.stats().connect_errors, 0u);
    }
  });
}

TEST_P(RedisClient, SubscriptionsDeliverAndSurviveARestart) {
  run([&] {
    goro::test::LeakCheck leaks("redis subscription");
    Client redis(options());
    const Context ctx;
    auto sub = redis.subscribe(ctx, {"news"}, {"alerts.*"});
    ASSERT_TRUE(sub) << sub.error().what();
    Subscription& s = **sub;
    EXPECT_EQ(*redis.publish(ctx, "news", "hello"), 1);
    EXPECT_EQ(*redis.publish(ctx, "alerts.fire", "hot"), 1);
    auto m1 = s.messages().recv();
    auto m2 = s.messages().recv();
    ASSERT_TRUE(m1 && m2);
    EXPECT_EQ(m1->channel, "news");
    EXPECT_EQ(m1->payload, "hello");
    EXPECT_EQ(m2->channel, "alerts.fire");
    EXPECT_EQ(m2->pattern, "alerts.*");

    server_.stop();
    server_.start();
    ASSERT_TRUE(server_.ok());
    // Publish until the subscription is back and hears it.
    std::optional<Message> m3;
    const auto t0 = std::chrono::steady_clock::now();
    while (!m3 && std::chrono::steady_clock::now() - t0 < 5s) {
      (void)redis.publish(ctx, "news", "again");
      goro::select(goro::recv_case(s.messages(), m3), goro::timeout_case(50ms));
    }
    ASSERT_TRUE(m3) << "no message after the restart";
    EXPECT_EQ(m3->payload, "again");
    EXPECT_GE(s.reconnects(), 1u);
    s.close();
    // The channel ends once closed.
    while (s.messages().recv()) {
    }
    sub->reset();
  });
}

// A server that answers with bytes that are not RESP: each call fails with a
// protocol error naming the fault, and the client goes on.
TEST_P(RedisClient, GarbageFromTheServerIsAnErrorNotACrash) {
  run([&] {
    auto ln = net::listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln) << ln.error().message();
    const std::string address = ln->addr().to_string();
    const std::vector<std::string> answers = {"%3\r\n", "+OK\n", ":12x\r\n", "$5\r\nab",
                                              "$3\r\nabcdef\r\n", "*99999999999\r\n"};
    goro::WaitGroup served;
    served.add(1);
    goro::go([&] {
      for (const std::string& answer : answers) {
        auto c = ln->accept();
        if (!c) break;
        char buf[256];
        (void)c->read(buf, sizeof buf);
        (void)c->write(answer.data(), answer.size());
        (void)c->close();
      }
      served.done();
    });
    Options o;
    o.address = address;
    o.read_timeout = 2s;
    o.max_backoff = 1ms;
    Client redis(o);
    for (const std::string& answer : answers) {
      auto r = redis.command(Context(), {"PING"});
      ASSERT_FALSE(r) << answer;
      EXPECT_TRUE(r.error() == errc::protocol_error || r.error() == std::errc::connection_reset)
          << answer << ": " << r.error().what();
      EXPECT_NE(r.error().what().find("redis: "), std::string::npos) << r.error().what();
    }
    served.wait();
    (void)ln->close();
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, RedisClient, ::testing::Values(1, 4),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace goro::redis
