// libpq's plain blocking API (PQconnectdb, PQexec) on goroutines, over goro::hooks,
// against a real PostgreSQL started for this binary (scripts/test-servers.sh).
#include <libpq-fe.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

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

// The same over TCP with TLS (sslmode=require, a self-signed certificate).
TestServer& postgres_tls() {
  static TestServer server("pg", "60 tls");
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
    EXPECT_LE(queries.threads, thread_bound(queries, thread_budget()));
  });
}

// libpq with sslmode=require: OpenSSL under libpq's blocking calls, whose hooked reads
// park the goroutine in the middle of an OpenSSL call (the handshake, SSL_read), after
// which it may resume on another thread. OpenSSL's per-thread error queue and libpq's
// own state must still give every caller its rows and its errors: a query error, and a
// handshake that fails verification (verify-full against a CA that did not sign the
// server's certificate: libpq reads the reason from OpenSSL's error queue).
TEST_P(HooksPgTest, TlsConnectionsWhileGoroutinesChangeThreads) {
  GORO_REQUIRE_SERVER(postgres_tls());
  run_with(GetParam(), [] {
    constexpr int kClients = 24;
    constexpr int kQueries = 6;
    std::atomic<int> ok{0}, errors_seen{0}, refused{0}, moved{0};
    // Goroutines that keep every P busy, so that a client woken from a park is often
    // taken by another P: it resumes inside libpq and OpenSSL on another thread.
    std::atomic<bool> stop{false};
    goro::WaitGroup spinners;
    for (int i = 0; i < goro::maxprocs(); ++i) {
      spinners.add(1);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
          while (std::chrono::steady_clock::now() < until) {
          }
          goro::yield();
        }
        spinners.done();
      });
    }
    goro::WaitGroup wg;
    for (int i = 0; i < kClients; ++i) {
      wg.add(1);
      goro::go([&, i] {
        if (i % 8 == 7) {
          // The server's certificate is self-signed: checked against the system's CAs
          // (a file of them that cannot include it), verification fails.
          Conn c(PQconnectdb((postgres_tls().address() +
                              " sslmode=verify-ca sslrootcert=/etc/ssl/certs/ca-certificates.crt")
                                 .c_str()));
          if (PQstatus(c.get()) == CONNECTION_BAD &&
              std::string(PQerrorMessage(c.get())).find("certificate verify failed") !=
                  std::string::npos)
            refused.fetch_add(1);
          wg.done();
          return;
        }
        Conn c(PQconnectdb(postgres_tls().address().c_str()));
        bool good = PQstatus(c.get()) == CONNECTION_OK && PQsslInUse(c.get()) == 1;
        for (int q = 0; good && q < kQueries; ++q) {
          const long before = ::syscall(SYS_gettid);
          if (q == kQueries / 2) {
            Result bad(PQexec(c.get(), "SELECT 1 / 0"));
            if (PQresultStatus(bad.get()) == PGRES_FATAL_ERROR &&
                std::string(PQresultErrorMessage(bad.get())).find("division by zero") !=
                    std::string::npos)
              errors_seen.fetch_add(1);
          } else {
            Result r(PQexec(c.get(), "SELECT pg_sleep(0.002), repeat('x', 20000)"));
            good = PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQgetlength(r.get(), 0, 1) == 20000;
          }
          if (::syscall(SYS_gettid) != before) moved.fetch_add(1);
        }
        if (good) ok.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    stop.store(true);
    spinners.wait();
    std::printf("[ measure  ] libpq sslmode=require, %d Ps: %d of %d clients ok, %d query "
                "errors reported, %d refused by verification, %d calls resumed on another "
                "thread\n",
                goro::maxprocs(), ok.load(), kClients - kClients / 8, errors_seen.load(),
                refused.load(), moved.load());
    EXPECT_EQ(ok.load(), kClients - kClients / 8);
    EXPECT_EQ(errors_seen.load(), kClients - kClients / 8);
    EXPECT_EQ(refused.load(), kClients / 8);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksPgTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
