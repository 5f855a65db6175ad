// libpqxx (6.4, over libpq's blocking calls) on goroutines, over goro::hooks, written as a
// C++ team's existing pqxx code is: connection, work, exec, exec_params, prepared
// statements, commit, exceptions. Against a real PostgreSQL started for this binary
// (scripts/test-servers.sh).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <goro/scheduler/runtime.hpp>

#include "clibs_test_util.hpp"
#include "hooks_lib_util.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using goro::hooks::testing::burst;

// max_connections 220: 200 at once, and the server's own.
TestServer& postgres() {
  static TestServer server("pg", "220");
  return server;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

using HooksPqxxTest = ProcsTest;

// Plain pqxx, unchanged: a transaction that writes through exec_params and a prepared
// statement and commits, then another that reads it back.
TEST_P(HooksPqxxTest, ExistingCodeOnAGoroutine) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pqxx::connection c(postgres().address());
    c.prepare("add_item", "INSERT INTO items (name, qty) VALUES ($1, $2)");
    {
      pqxx::work w(c);
      w.exec("CREATE TEMP TABLE items (name text PRIMARY KEY, qty int NOT NULL)");
      w.exec_params("INSERT INTO items (name, qty) VALUES ($1, $2)", "apples", 3);
      w.exec_prepared("add_item", "pears", 5);
      w.commit();
    }
    pqxx::work w(c);
    const pqxx::result r = w.exec("SELECT name, qty FROM items ORDER BY name");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0][0].as<std::string>(), "apples");
    EXPECT_EQ(r[1][1].as<int>(), 5);
    EXPECT_EQ(w.exec_params1("SELECT sum(qty) + $1 FROM items", 34)[0].as<int>(), 42);
    // 4 MB back: libpq reads it a buffer at a time, polling in between.
    const pqxx::row big = w.exec1("SELECT repeat('x', 4 * 1024 * 1024)");
    EXPECT_EQ(big[0].size(), 4u * 1024 * 1024);
    w.commit();
  });
}

// The proof that matters: 200 goroutines at one P, each in a pqxx::work on its own
// connection running SELECT pg_sleep(0.2) and committing, finish in about one query's
// time (one at a time: 40 s) on a few threads.
TEST_P(HooksPqxxTest, ConcurrentSlowQueriesParkGoroutinesNotThreads) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    constexpr int kClients = 200;
    std::vector<std::unique_ptr<pqxx::connection>> conns(kClients);
    const auto connected = burst(kClients, [&](int i) {
      conns[i] = std::make_unique<pqxx::connection>(postgres().address());
      return conns[i]->is_open();
    });
    goro::hooks::testing::print("libpqxx connection", kClients, connected);
    ASSERT_EQ(connected.succeeded, kClients);
    const auto queries = burst(kClients, [&](int i) {
      pqxx::work w(*conns[i]);
      const pqxx::result r = w.exec("SELECT pg_sleep(0.2), " + w.quote(i));
      w.commit();
      return r.size() == 1 && r[0][1].as<int>() == i;
    });
    goro::hooks::testing::print("libpqxx work.exec(SELECT pg_sleep(0.2)) + commit", kClients,
                                queries);
    EXPECT_EQ(queries.succeeded, kClients);
    EXPECT_GE(queries.ms, 199);
    EXPECT_LT(queries.ms, 3000);
    EXPECT_LE(queries.threads, thread_bound(queries, thread_budget()));
  });
}

// A bad statement throws pqxx's exception with PostgreSQL's message and SQLSTATE; the
// transaction is aborted as pqxx says, the connection takes a new one, and the goroutine
// and the runtime go on (a sleep, another goroutine).
TEST_P(HooksPqxxTest, AnErrorThrowsTheServersMessage) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    pqxx::connection c(postgres().address());
    std::string message, sqlstate;
    try {
      pqxx::work w(c);
      w.exec("SELECT * FROM no_such_table");
      ADD_FAILURE() << "no exception";
    } catch (const pqxx::undefined_table& e) {
      message = e.what();
      sqlstate = e.sqlstate();
    }
    EXPECT_NE(message.find("relation \"no_such_table\" does not exist"), std::string::npos)
        << message;
    EXPECT_EQ(sqlstate, "42P01");
    EXPECT_THROW(pqxx::work(c).exec1("SELECT 1 / 0"), pqxx::data_exception);

    pqxx::work w(c);
    EXPECT_EQ(w.exec1("SELECT 6 * 7")[0].as<int>(), 42);
    w.commit();
    const auto t0 = std::chrono::steady_clock::now();
    goro::sleep(20ms);
    EXPECT_GE(ms_since(t0), 19);
    std::atomic<bool> ran{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      ran.store(true);
      wg.done();
    });
    wg.wait();
    EXPECT_TRUE(ran.load());
  });
}

// pqxx's await_notification waits in poll on libpq's socket: the goroutine parks, and at
// one P the goroutine that sends the NOTIFY still runs.
TEST_P(HooksPqxxTest, AwaitNotificationParksTheGoroutine) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    struct Receiver : pqxx::notification_receiver {
      using pqxx::notification_receiver::notification_receiver;
      void operator()(const std::string& payload, int) override { this->payload = payload; }
      std::string payload;
    };
    pqxx::connection listener(postgres().address());
    Receiver receiver(listener, "jobs");
    pqxx::connection sender(postgres().address());
    const auto t0 = std::chrono::steady_clock::now();
    After notify(50ms, [&] {
      pqxx::work w(sender);
      w.exec("NOTIFY jobs, 'job-1'");
      w.commit();
    });
    EXPECT_EQ(listener.await_notification(5, 0), 1);
    EXPECT_EQ(receiver.payload, "job-1");
    EXPECT_GE(ms_since(t0), 49);
    EXPECT_LT(ms_since(t0), 2000);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksPqxxTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
