// goro::redis when servers go away, at 1, 2, 4 and 8 Ps: a redis-server killed
// (SIGKILL) and started again under 32 goroutines of commands — the calls in flight fail
// with clear errors, none with a torn reply taken for another, the pool dials again,
// and no goroutine, descriptor or connection beyond pool_size is left — and a Sentinel
// failover, after which the client writes to the new master.
#include <goro/redis/redis.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "clibs_test_util.hpp"
#include "leak_check.hpp"

namespace goro::redis {
namespace {

using namespace std::chrono_literals;
using clibs::testing::TestServer;

long long ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

// Its own server: the tests here kill it.
TestServer& the_server() {
  static TestServer server("redis");
  return server;
}

class RedisFault : public clibs::testing::ProcsTest {
 protected:
  void SetUp() override { GORO_REQUIRE_SERVER(server_); }
  TestServer& server_ = the_server();
};

// What a failed call while the server was away may say; "" for an unclear error.
std::string kind_of(const Error& e) {
  if (e.what().rfind("redis: ", 0) != 0) return "";
  if (e == errc::protocol_error || e == errc::server_error) return "";
  if (e.what().rfind("redis: dial ", 0) == 0) return "could not dial";
  return "connection broke";
}

TEST_P(RedisFault, AKilledServerFailsCallsClearlyAndThePoolRecovers) {
  clibs::testing::run_with(GetParam(), [&] {
    goro::test::LeakCheck leaks("redis killed under load");
    Options o;
    o.address = "unix:" + server_.address();
    o.pool_size = 8;
    o.max_backoff = 50ms;
    Client redis(o);
    ASSERT_TRUE(redis.command(Context(), {"FLUSHALL"}));
    std::atomic<bool> stop{false};
    std::atomic<int> ok{0}, most_open{0};
    std::mutex mu;
    std::map<std::string, int> failures;  // (mu) by kind
    std::vector<std::string> unclear;     // (mu)
    goro::WaitGroup wg;
    for (int g = 0; g < 32; ++g) {
      wg.add(1);
      goro::go([&, g] {
        const std::string key = "k" + std::to_string(g);
        // Values of this goroutine alone: a reply taken for another call's would show.
        const long long base = static_cast<long long>(g) * 1000000000LL;
        long long last = -1;   // the value SET last, -1 when unknown
        for (long long i = 0; !stop.load(); ++i) {
          auto r = redis.command(Context(), {"SET", key, std::to_string(base + i), "GET"});
          const int open = redis.stats().open;
          int seen = most_open.load();
          while (open > seen && !most_open.compare_exchange_weak(seen, open)) {
          }
          if (r) {
            // nil: the key is new (the server started empty again).
            const bool mine = r->is_nil() ||
                              (r->is_string() && (last < 0 || std::stoll(r->str) == base + last));
            if (!mine) {
              std::lock_guard lock(mu);
              unclear.push_back("a reply not this key's: " + r->str);
            }
            last = i;
            ok.fetch_add(1);
            continue;
          }
          last = -1;  // it may or may not have been set
          {
            std::lock_guard lock(mu);
            const std::string kind = kind_of(r.error());
            if (kind.empty()) {
              unclear.push_back(r.error().what());
            } else {
              ++failures[kind];
            }
          }
          goro::sleep(1ms);
        }
        wg.done();
      });
    }
    goro::sleep(300ms);
    EXPECT_GT(ok.load(), 0);
    // SIGKILL: no goodbye, connections reset; then the folder is cleaned and a new
    // server started on the same socket.
    {
      std::ifstream pidfile(server_.dir() + "/redis.pid");
      int pid = 0;
      pidfile >> pid;
      ASSERT_GT(pid, 0);
      ASSERT_EQ(::kill(pid, SIGKILL), 0);
    }
    goro::sleep(300ms);
    goro::blocking([&] {
      server_.stop();
      server_.start();
    });
    ASSERT_TRUE(server_.ok()) << server_.error();
    const int at_restart = ok.load();
    const auto t0 = std::chrono::steady_clock::now();
    while (ok.load() < at_restart + 500 && ms_since(t0) < 5000) goro::sleep(10ms);
    std::map<std::string, int> after_recovery;
    {
      std::lock_guard lock(mu);
      after_recovery = failures;
    }
    goro::sleep(300ms);
    stop.store(true);
    wg.wait();
    EXPECT_GE(ok.load(), at_restart + 500) << "the pool did not recover within 5 s";
    std::lock_guard lock(mu);
    EXPECT_TRUE(unclear.empty()) << unclear.size() << " unclear, first: " << unclear.front();
    int total = 0;
    for (const auto& [kind, n] : failures) {
      total += n;
      std::printf("  %d failed: %s\n", n, kind.c_str());
    }
    EXPECT_GT(total, 0) << "no call failed while the server was away";
    EXPECT_EQ(failures, after_recovery) << "calls failed after the pool had recovered";
    EXPECT_LE(most_open.load(), 8);
    EXPECT_GT(redis.stats().discarded, 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, RedisFault, ::testing::Values(1, 2, 4, 8), clibs::testing::procs_name);

// ---------------------------------------------------------------------------------------
// Sentinel: a master, its replica and a sentinel (test-servers.sh sentinel).

TestServer& sentinel_set() {
  static TestServer set("sentinel");
  return set;
}

// The value of key= in test-servers.sh's line.
std::string field_of(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  }
  return "";
}

TEST(RedisSentinel, TheClientFollowsAFailoverToTheNewMaster) {
  TestServer& set = sentinel_set();
  GORO_REQUIRE_SERVER(set);
  const std::string master = field_of(set.address(), "master");
  const std::string replica = field_of(set.address(), "replica");
  const std::string sentinel = field_of(set.address(), "sentinel");
  clibs::testing::run_with(2, [&] {
    goro::test::LeakCheck leaks("sentinel failover");
    const Context ctx;
    Options o;
    o.sentinel = {.master = "goro", .addresses = {"127.0.0.1:1", sentinel}};
    o.pool_size = 4;
    o.max_backoff = 50ms;
    Client redis(o);
    ASSERT_FALSE(redis.set(ctx, "before", "1"));
    auto role = redis.command(ctx, {"ROLE"});
    ASSERT_TRUE(role) << role.error().what();
    EXPECT_EQ(role->elements.at(0).str, "master");

    // A name no sentinel knows: a clear error, each sentinel's answer in it.
    Options unknown = o;
    unknown.sentinel.master = "nobody";
    Client lost(unknown);
    auto none = lost.command(ctx, {"PING"});
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), std::errc::connection_refused);
    EXPECT_NE(none.error().what().find("no sentinel gave the address of master nobody"),
              std::string::npos)
        << none.error().what();
    EXPECT_NE(none.error().what().find("127.0.0.1:1: "), std::string::npos) << none.error().what();

    Options direct;
    direct.address = sentinel;
    Client to_sentinel(direct);
    auto failover = to_sentinel.command(ctx, {"SENTINEL", "FAILOVER", "goro"});
    ASSERT_TRUE(failover) << failover.error().what();
    // Writes go on; within the failover they may fail, then land on the new master.
    const auto t0 = std::chrono::steady_clock::now();
    int failed = 0;
    bool moved = false;
    while (!moved && ms_since(t0) < 15000) {
      auto r = redis.command(ctx, {"INCR", "after"});
      if (!r) {
        ++failed;
        EXPECT_EQ(r.error().what().rfind("redis: ", 0), 0u) << r.error().what();
        goro::sleep(20ms);
        continue;
      }
      auto now = to_sentinel.command(ctx, {"SENTINEL", "get-master-addr-by-name", "goro"});
      moved = now && now->elements.size() == 2 &&
              now->elements[0].str + ":" + now->elements[1].str == replica;
      goro::sleep(20ms);
    }
    ASSERT_TRUE(moved) << "the sentinel did not name the replica master within 15 s";
    // Once the sentinel names the new master and the old one has closed our connections
    // (the sentinel has it CLIENT KILL them as it reconfigures it), writes reach it.
    Options to_new;
    to_new.address = replica;
    Client new_master(to_new);
    Result<Reply, Error> last = Error(errc::closed);
    for (int i = 0; i < 300; ++i) {
      last = redis.command(ctx, {"SET", "landed", std::to_string(i)});
      if (last) {
        auto seen = new_master.get(ctx, "landed");
        if (seen && *seen && **seen == std::to_string(i)) break;
      }
      goro::sleep(50ms);
    }
    ASSERT_TRUE(last) << last.error().what();
    auto seen = new_master.get(ctx, "landed");
    ASSERT_TRUE(seen && *seen) << "a write through the client never reached the new master";
    EXPECT_TRUE(*new_master.get(ctx, "before"));  // replicated before the failover
    // The +switch-master announcement retires the pool's connections at once; without
    // it they would write to the old master until the sentinel next looks at it and
    // closes them (its INFO period, 10 s).
    EXPECT_LT(ms_since(t0), 8000);
    std::printf("  failover followed in %lld ms, %d calls failed meanwhile; old master %s\n",
                ms_since(t0), failed, master.c_str());
  });
}

}  // namespace
}  // namespace goro::redis
