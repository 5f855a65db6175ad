// libpq on goroutines (examples/clients/pg.hpp over net::FdWatch) against a real
// PostgreSQL started for this binary in a temporary folder.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/net/listener.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "clibs_test_util.hpp"
#include "pg.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One cluster for the whole binary (initdb takes a second), stopped at exit.
TestServer& postgres() {
  static TestServer server("pg", "120");
  return server;
}

using PgTest = ProcsTest;

TEST_P(PgTest, StraightLineQueries) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pg::Conn c = pg::Conn::connect(postgres().address());
    ASSERT_TRUE(c.ok()) << c.error();
    const std::string table = "people";
    ASSERT_TRUE(
        c.query("CREATE TEMP TABLE people (id serial PRIMARY KEY, name text UNIQUE, note text)")
            .ok());
    pg::Result ins = c.query("INSERT INTO " + table + " (name, note) VALUES ($1, $2), ($3, $4)",
                             {"ann", "first", "bob", std::nullopt});
    ASSERT_TRUE(ins.ok()) << ins.error();
    EXPECT_EQ(ins.affected(), "2");
    pg::Result sel = c.query("SELECT name, note FROM " + table + " ORDER BY id");
    ASSERT_TRUE(sel.ok()) << sel.error();
    ASSERT_EQ(sel.rows(), 2);
    EXPECT_EQ(sel.column_name(0), "name");
    EXPECT_EQ(sel.get(0, 0), "ann");
    EXPECT_EQ(sel.get(0, 1), "first");
    EXPECT_TRUE(sel.is_null(1, 1));
    // A server error, with its SQLSTATE; the connection stays usable.
    pg::Result dup = c.query("INSERT INTO " + table + " (name) VALUES ($1)", {"ann"});
    EXPECT_FALSE(dup.ok());
    EXPECT_EQ(dup.sqlstate(), "23505") << dup.error();
    pg::Result bad = c.query("SELEC 1");
    EXPECT_EQ(bad.sqlstate(), "42601");
    // Several statements: the last result.
    pg::Result last = c.query("SELECT 1; SELECT 2");
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(last.get(0, 0), "2");
  });
}

TEST_P(PgTest, ConcurrentSlowQueriesParkGoroutinesNotThreads) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    constexpr int kClients = 50;
    std::vector<pg::Conn> conns(kClients);
    {
      goro::WaitGroup wg;
      for (auto& c : conns) {
        wg.add(1);
        goro::go([&] {
          c = pg::Conn::connect(postgres().address());
          wg.done();
        });
      }
      wg.wait();
    }
    for (auto& c : conns) ASSERT_TRUE(c.ok()) << c.error();
    std::atomic<int> done{0};
    goro::WaitGroup wg;
    // Connecting may have made threads (the name lookup runs in goro::blocking, handed
    // off when slow, as under a sanitizer): the queries must add none beyond the budget.
    const int threads_before = goro::stats().threads;
    const auto t0 = Clock::now();
    for (auto& c : conns) {
      wg.add(1);
      goro::go([&] {
        if (c.query("SELECT pg_sleep(0.2)").ok()) done.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    const double ms = ms_since(t0);
    EXPECT_EQ(done.load(), kClients);
    // Together, in about one query's time: none waits for another's thread.
    EXPECT_GE(ms, 199);
    EXPECT_LT(ms, 1500);
    EXPECT_LE(goro::stats().threads, std::max(threads_before, thread_budget()));
  });
}

TEST_P(PgTest, AContextCancelsTheQueryOnTheServer) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pg::Conn c = pg::Conn::connect(postgres().address());
    ASSERT_TRUE(c.ok()) << c.error();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 100ms);
    const auto t0 = Clock::now();
    pg::Result r = c.query("SELECT pg_sleep(30)", {}, ctx);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.code(), goro::context_errc::deadline_exceeded) << r.error();
    EXPECT_LT(ms_since(t0), 5000);
    // Cancelled on the server, not merely abandoned: the connection answers at once.
    ASSERT_TRUE(c.ok()) << c.error();
    pg::Result next = c.query("SELECT 42");
    ASSERT_TRUE(next.ok()) << next.error();
    EXPECT_EQ(next.get(0, 0), "42");
    // A cancel function from another goroutine.
    auto [ctx2, cancel2] = goro::with_cancel(goro::background());
    goro::go([cancel2 = cancel2] {
      goro::sleep(50ms);
      cancel2();
    });
    EXPECT_EQ(c.query("SELECT pg_sleep(30)", {}, ctx2).code(), goro::context_errc::canceled);
    EXPECT_TRUE(c.query("SELECT 1").ok());
    cancel();
  });
}

TEST_P(PgTest, LargeResultsAndLargeQueries) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pg::Conn c = pg::Conn::connect(postgres().address());
    ASSERT_TRUE(c.ok()) << c.error();
    // 8 MB back: libpq reads a buffer per PQconsumeInput, with the rest already in the
    // socket and no new edge coming, which only a level-triggered wait survives.
    pg::Result big = c.query("SELECT repeat('x', 1000) FROM generate_series(1, 8000)");
    ASSERT_TRUE(big.ok()) << big.error();
    EXPECT_EQ(big.rows(), 8000);
    EXPECT_EQ(big.get(7999, 0).size(), 1000u);
    // 4 MB out: more than the socket takes at once, so PQflush says "later" and the
    // write waits.
    const std::string value(4 << 20, 'y');
    pg::Result echo = c.query("SELECT length($1)", {value});
    ASSERT_TRUE(echo.ok()) << echo.error();
    EXPECT_EQ(echo.get(0, 0), std::to_string(value.size()));
  });
}

TEST_P(PgTest, PoolLendsFewConnectionsToManyGoroutines) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    const std::string app = "pool_p" + std::to_string(GetParam());
    pg::Pool pool(postgres().address() + " application_name=" + app, 4);
    std::atomic<int> right{0};
    goro::WaitGroup wg;
    for (int i = 0; i < 100; ++i) {
      wg.add(1);
      goro::go([&, i] {
        pg::Result r = pool.query("SELECT $1::int * 2", {std::to_string(i)});
        if (r.ok() && r.get(0, 0) == std::to_string(2 * i)) right.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(right.load(), 100);
    pg::Result n =
        pool.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", {app});
    ASSERT_TRUE(n.ok()) << n.error();
    EXPECT_LE(std::stoi(std::string(n.get(0, 0))), 4);
  });
}

TEST_P(PgTest, ABrokenConnectionFailsAndThePoolReplacesIt) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pg::Pool pool(postgres().address(), 1);
    pg::Result pid = pool.query("SELECT pg_backend_pid()");
    ASSERT_TRUE(pid.ok()) << pid.error();
    pg::Conn killer = pg::Conn::connect(postgres().address());
    ASSERT_TRUE(killer.ok());
    ASSERT_TRUE(killer.query("SELECT pg_terminate_backend($1)", {std::string(pid.get(0, 0))}).ok());
    // The next query on the terminated backend fails (no hang); the one after gets a
    // fresh connection.
    pg::Result dead = pool.query("SELECT 1");
    EXPECT_FALSE(dead.ok());
    EXPECT_FALSE(dead.error().empty());
    pg::Result fresh = pool.query("SELECT pg_backend_pid()");
    ASSERT_TRUE(fresh.ok()) << fresh.error();
    EXPECT_NE(fresh.get(0, 0), pid.get(0, 0));
  });
}

// A server that turns every connection away the way a PostgreSQL still starting up
// does: it reads the startup packet and answers "cannot connect now" (SQLSTATE 57P03),
// after which libpq tries the next host, on a new socket.
class StartingUpServer {
 public:
  StartingUpServer() {
    char dir[] = "/tmp/goro-pg-fake-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    auto ln = net::listen("unix", dir_ + "/.s.PGSQL.5432");
    if (!ln) return;
    listener_ = std::move(*ln);
    done_.add(1);
    goro::go([this] {
      while (auto c = listener_.accept()) {
        char len[4];
        auto got = c->read_full(len, 4);
        if (!got || *got != 4) continue;
        const std::uint32_t n = (std::uint32_t(std::uint8_t(len[0])) << 24) |
                                (std::uint32_t(std::uint8_t(len[1])) << 16) |
                                (std::uint32_t(std::uint8_t(len[2])) << 8) | std::uint8_t(len[3]);
        std::string rest(n - 4, '\0');
        if (!c->read_full(rest.data(), rest.size())) continue;
        using namespace std::string_literals;
        const std::string fields =
            "SFATAL\0VFATAL\0C57P03\0Mthe database system is starting up\0\0"s;
        const std::uint32_t size = static_cast<std::uint32_t>(fields.size() + 4);
        std::string msg = "E";
        for (int shift : {24, 16, 8, 0}) msg += static_cast<char>((size >> shift) & 0xff);
        msg += fields;
        (void)c->write(msg.data(), msg.size());
        ++turned_away_;
      }
      done_.done();
    });
  }
  ~StartingUpServer() {
    listener_.close();
    done_.wait();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  const std::string& dir() const { return dir_; }
  int turned_away() const { return turned_away_.load(); }

 private:
  std::string dir_;
  net::Listener listener_;
  goro::WaitGroup done_;
  std::atomic<int> turned_away_{0};
};

TEST_P(PgTest, ConnectFailuresAndSocketsLibpqReplaces) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pg::Conn none = pg::Conn::connect("host=/nonexistent-goro-dir user=goro");
    EXPECT_FALSE(none.ok());
    EXPECT_NE(none.error().find("nonexistent-goro-dir"), std::string::npos) << none.error();
    EXPECT_FALSE(none.query("SELECT 1").ok());
    // Two hosts, the first one starting up: libpq reads its refusal, closes the socket
    // it was waiting on and opens another for the second host, usually under the same
    // number. The watch must follow, or the connect would wait forever.
    StartingUpServer starting;
    ASSERT_FALSE(starting.dir().empty());
    const std::string real = postgres().address().substr(std::string("host=").size());
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 5s);
    pg::Conn second = pg::Conn::connect("host=" + starting.dir() + "," + real, ctx);
    ASSERT_TRUE(second.ok()) << second.error();
    EXPECT_EQ(starting.turned_away(), 1);
    EXPECT_TRUE(second.query("SELECT 1").ok());
    cancel();
    // A context already cancelled.
    auto [done, stop] = goro::with_cancel(goro::background());
    stop();
    EXPECT_FALSE(pg::Conn::connect(postgres().address(), done).ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, PgTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
