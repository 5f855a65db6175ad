// libpq's plain blocking API (PQconnectdb, PQexec) on goroutines, over goro::hooks,
// against a real PostgreSQL started for this binary (scripts/test-servers.sh).
#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>

#include "clibs_test_util.hpp"
#include "hooks_lib_util.hpp"

namespace goro::clibs::testing {
namespace {

using goro::hooks::testing::burst;

// max_connections 220: 200 at once, and the server's own.
TestServer& postgres() {
  static TestServer server("pg", "220");
  return server;
}

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

using HooksPgTest = ProcsTest;

TEST_P(HooksPgTest, BlockingCallsOnAGoroutine) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    Conn c(PQconnectdb(postgres().address().c_str()));
    ASSERT_EQ(PQstatus(c.get()), CONNECTION_OK) << PQerrorMessage(c.get());
    Result r(PQexec(c.get(), "SELECT 40 + 2"));
    ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQerrorMessage(c.get());
    EXPECT_STREQ(PQgetvalue(r.get(), 0, 0), "42");
    // 4 MB back: libpq reads it a buffer at a time, polling in between.
    Result big(PQexec(c.get(), "SELECT repeat('x', 4 * 1024 * 1024)"));
    ASSERT_EQ(PQresultStatus(big.get()), PGRES_TUPLES_OK) << PQerrorMessage(c.get());
    EXPECT_EQ(PQgetlength(big.get(), 0, 0), 4 * 1024 * 1024);
    // An error comes back as libpq reports it.
    Result bad(PQexec(c.get(), "SELECT * FROM no_such_table"));
    EXPECT_EQ(PQresultStatus(bad.get()), PGRES_FATAL_ERROR);
  });
}

// The figure: 200 handlers at one P, each running SELECT pg_sleep(0.1) through
// PQexec on its own connection, finish in about one query's time on a few threads.
TEST_P(HooksPgTest, ConcurrentSlowQueriesParkGoroutinesNotThreads) {
  GORO_REQUIRE_SERVER(postgres());
  run_with(GetParam(), [] {
    constexpr int kClients = 200;
    std::vector<Conn> conns(kClients);
    const auto connected = burst(kClients, [&](int i) {
      conns[i].reset(PQconnectdb(postgres().address().c_str()));
      return PQstatus(conns[i].get()) == CONNECTION_OK;
    });
    goro::hooks::testing::print("libpq PQconnectdb", kClients, connected);
    ASSERT_EQ(connected.succeeded, kClients) << PQerrorMessage(conns[0].get());
    const auto queries = burst(kClients, [&](int i) {
      Result r(PQexec(conns[i].get(), "SELECT pg_sleep(0.1)"));
      return PQresultStatus(r.get()) == PGRES_TUPLES_OK;
    });
    goro::hooks::testing::print("libpq PQexec(SELECT pg_sleep(0.1))", kClients, queries);
    EXPECT_EQ(queries.succeeded, kClients);
    EXPECT_GE(queries.ms, 99);
    EXPECT_LT(queries.ms, 2000);  // ~150 ms on an idle machine; one at a time is 20 s
    EXPECT_LE(queries.threads, thread_budget());
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksPgTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
