// goro::pg against a real PostgreSQL (scripts/test-servers.sh, on a Unix socket in a
// temporary folder, through tests/clibs' TestServer), at 1 and 4 Ps: values through
// parameters and results, the server's errors with their fields, prepared statements,
// transactions (alone and concurrent), Context cancellation of a running statement (in
// the pool and in a transaction), the pool's limit, LISTEN/NOTIFY, a connection the
// server killed while it was idle, and a server that is not there.
#include <goro/pg/pg.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "leak_check.hpp"
#include "pg_test_util.hpp"

namespace goro::pg {
namespace testing {

clibs::testing::TestServer& the_server() {
  static clibs::testing::TestServer server("pg", "100");
  return server;
}

}  // namespace testing

namespace {

using namespace std::chrono_literals;
using std::chrono::system_clock;
using testing::ms_since;
using testing::PgPool;

TEST_P(PgPool, ValuesRoundTripThroughParametersAndResults) {
  run([&] {
    Pool db(options());
    const Context ctx;
    std::string all_bytes;
    for (int i = 0; i < 256; ++i) all_bytes += static_cast<char>(i);
    const std::string text = "it's \"quoted\" \\ and ünïcödé ✓";
    const auto when = system_clock::time_point(std::chrono::microseconds(1700000000123456LL));
    auto rows = db.query(ctx,
                         "SELECT $1::int, $2::bigint, $3::float8, $4::text, $5::bool, "
                         "$6::bytea, $7::timestamptz, $8::int, $9::text",
                         {-2147483647, 9000000000000000001LL, 0.1 + 0.2, text, true,
                          Bytes{all_bytes}, when, std::optional<int>(), std::nullopt});
    ASSERT_TRUE(rows) << rows.error().what();
    ASSERT_EQ(rows->size(), 1);
    ASSERT_EQ(rows->columns(), 9);
    const Row row = (*rows)[0];
    EXPECT_EQ(*row.get<int>(0), -2147483647);
    EXPECT_EQ(*row.get<long long>(1), 9000000000000000001LL);
    EXPECT_EQ(*row.get<std::int64_t>(1), 9000000000000000001LL);
    EXPECT_EQ(*row.get<double>(2), 0.1 + 0.2);
    EXPECT_EQ(*row.get<std::string>(3), text);
    EXPECT_EQ(*row.get<std::string_view>(3), text);
    EXPECT_EQ(*row.get<bool>(4), true);
    EXPECT_EQ(row.get<Bytes>(5)->data, all_bytes);
    EXPECT_EQ(*row.get<system_clock::time_point>(6), when);
    EXPECT_EQ(row.text(6), "2023-11-14 22:13:20.123456+00");
    auto null_int = row.get<std::optional<int>>(7);
    ASSERT_TRUE(null_int) << null_int.error().what();
    EXPECT_FALSE(null_int->has_value());
    EXPECT_FALSE(row.get<std::optional<std::string>>(8)->has_value());
    EXPECT_EQ(*row.get<std::optional<int>>(0), std::optional<int>(-2147483647));

    // Times before 1970 and without an offset (timestamp), and doubles past the finite.
    const auto before = system_clock::time_point(std::chrono::microseconds(-1));
    auto edges = db.query(ctx,
                          "SELECT $1::timestamptz, '1969-12-31 23:59:59.5'::timestamp, "
                          "$2::float8, $3::float8",
                          {before, HUGE_VAL, -1e-300});
    ASSERT_TRUE(edges) << edges.error().what();
    EXPECT_EQ((*edges)[0].text(0), "1969-12-31 23:59:59.999999+00");
    EXPECT_EQ(*(*edges)[0].get<system_clock::time_point>(0), before);
    EXPECT_EQ(*(*edges)[0].get<system_clock::time_point>(1),
              system_clock::time_point(std::chrono::milliseconds(-500)));
    EXPECT_EQ(*(*edges)[0].get<double>(2), HUGE_VAL);
    EXPECT_EQ(*(*edges)[0].get<double>(3), -1e-300);

    // NULL read as a type that cannot hold it, and text that is not the type asked for.
    auto not_optional = row.get<int>(7);
    ASSERT_FALSE(not_optional);
    EXPECT_EQ(not_optional.error(), errc::bad_value);
    EXPECT_NE(not_optional.error().what().find("column 7"), std::string::npos)
        << not_optional.error().what();
    auto not_int = row.get<int>(3);
    ASSERT_FALSE(not_int);
    EXPECT_EQ(not_int.error(), errc::bad_value);
    EXPECT_EQ(row.get<int>(1).error(), errc::bad_value);  // past int's range
    EXPECT_EQ(row.get<int>(42).error(), errc::bad_value);

    // A parameter list built at run time, column names, and rows touched.
    const std::string t = table("roundtrip");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    ASSERT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (id int PRIMARY KEY, name text)"));
    std::vector<Value> params;
    std::string insert = "INSERT INTO " + t + " VALUES ";
    for (int i = 0; i < 10; ++i) {
      insert += (i ? ", ($" : "($") + std::to_string(2 * i + 1) + ", $" +
                std::to_string(2 * i + 2) + ")";
      params.emplace_back(i);
      params.emplace_back("name " + std::to_string(i));
    }
    auto inserted = db.exec(ctx, insert, params);
    ASSERT_TRUE(inserted) << inserted.error().what();
    EXPECT_EQ(*inserted, 10);
    auto named = db.query(ctx, "SELECT id AS ident, name FROM " + t + " ORDER BY id");
    ASSERT_TRUE(named);
    EXPECT_EQ(named->size(), 10);
    EXPECT_EQ(named->column_name(0), "ident");
    EXPECT_EQ(*(*named)[9].get<std::string>(1), "name 9");
    EXPECT_EQ(*db.exec(ctx, "DELETE FROM " + t + " WHERE id < $1", {5}), 5);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgPool, ServerErrorsCarryTheirFields) {
  run([&] {
    Pool db(options(2));
    const Context ctx;
    const std::string t = table("unique");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    ASSERT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (k text CONSTRAINT " + t +
                                 "_k_key UNIQUE)"));
    ASSERT_TRUE(db.exec(ctx, "INSERT INTO " + t + " VALUES ($1)", {"one"}));
    auto dup = db.exec(ctx, "INSERT INTO " + t + " VALUES ($1)", {"one"});
    ASSERT_FALSE(dup);
    const Error e = dup.error();
    EXPECT_EQ(e, errc::server_error);
    EXPECT_EQ(e.field("sqlstate"), "23505");
    EXPECT_EQ(e.field("constraint"), t + "_k_key");
    EXPECT_FALSE(e.field("detail").empty());
    EXPECT_EQ(e.field("severity"), "ERROR");
    EXPECT_NE(e.what().find("duplicate key"), std::string::npos) << e.what();

    auto syntax = db.query(ctx, "SELEC 1");
    ASSERT_FALSE(syntax);
    EXPECT_EQ(syntax.error(), errc::server_error);
    EXPECT_EQ(syntax.error().field("sqlstate"), "42601");

    // The connections stay usable.
    for (int i = 0; i < 4; ++i) {
      auto one = db.query(ctx, "SELECT count(*) FROM " + t);
      ASSERT_TRUE(one) << one.error().what();
      EXPECT_EQ(*(*one)[0].get<long long>(0), 1);
    }
    EXPECT_EQ(db.stats().discarded, 0u);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgPool, StatementsArePreparedOncePerConnection) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    for (int i = 0; i < 100; ++i) {
      auto r = db.query(ctx, "SELECT $1::int * 2, $2::text", {i, "x" + std::to_string(i)});
      ASSERT_TRUE(r) << r.error().what();
      EXPECT_EQ(*(*r)[0].get<int>(0), 2 * i);
      EXPECT_EQ(*(*r)[0].get<std::string>(1), "x" + std::to_string(i));
    }
    // The one connection has that statement (and this one) prepared, once each.
    auto tx = db.begin(ctx);
    ASSERT_TRUE(tx) << tx.error().what();
    auto prepared = tx->query(
        ctx, "SELECT count(*), count(*) FILTER (WHERE statement LIKE 'SELECT $1::int * 2%') "
             "FROM pg_prepared_statements");
    ASSERT_TRUE(prepared) << prepared.error().what();
    EXPECT_EQ(*(*prepared)[0].get<long long>(0), 2);
    EXPECT_EQ(*(*prepared)[0].get<long long>(1), 1);
    EXPECT_FALSE(tx->commit(ctx));

    // A prepared SELECT * still runs after its table gained a column.
    const std::string t = table("prepared");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    ASSERT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (a int)"));
    ASSERT_TRUE(db.exec(ctx, "INSERT INTO " + t + " VALUES (1)"));
    EXPECT_EQ(db.query(ctx, "SELECT * FROM " + t)->columns(), 1);
    ASSERT_TRUE(db.exec(ctx, "ALTER TABLE " + t + " ADD COLUMN b text DEFAULT 'x'"));
    auto wider = db.query(ctx, "SELECT * FROM " + t);
    ASSERT_TRUE(wider) << wider.error().what();
    EXPECT_EQ(wider->columns(), 2);
    EXPECT_EQ(*(*wider)[0].get<std::string>(1), "x");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
    EXPECT_EQ(db.stats().connects, 1u);
  });
}

TEST_P(PgPool, Transactions) {
  run([&] {
    Pool db(options(2));
    const Context ctx;
    const std::string t = table("tx");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    ASSERT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (v int)"));
    auto count = [&] { return *(*db.query(ctx, "SELECT count(*) FROM " + t))[0].get<long long>(0); };
    {
      auto tx = db.begin(ctx);
      ASSERT_TRUE(tx) << tx.error().what();
      ASSERT_TRUE(tx->exec(ctx, "INSERT INTO " + t + " VALUES ($1)", {1}));
      EXPECT_EQ(count(), 0);  // not yet visible outside
      EXPECT_FALSE(tx->commit(ctx));
      EXPECT_EQ(tx->commit(ctx), errc::closed);
    }
    EXPECT_EQ(count(), 1);
    {
      auto tx = db.begin(ctx);
      ASSERT_TRUE(tx);
      ASSERT_TRUE(tx->exec(ctx, "INSERT INTO " + t + " VALUES ($1)", {2}));
      // Destroyed without commit: rolled back.
    }
    EXPECT_EQ(count(), 1);
    {
      auto tx = db.begin(ctx);
      ASSERT_TRUE(tx);
      ASSERT_TRUE(tx->exec(ctx, "INSERT INTO " + t + " VALUES ($1)", {3}));
      EXPECT_FALSE(tx->rollback(ctx));
    }
    EXPECT_EQ(count(), 1);
    {
      // A failed statement dooms the transaction: commit says so.
      auto tx = db.begin(ctx);
      ASSERT_TRUE(tx);
      ASSERT_TRUE(tx->exec(ctx, "INSERT INTO " + t + " VALUES ($1)", {4}));
      EXPECT_FALSE(tx->exec(ctx, "SELECT 1/0"));
      const Error e = tx->commit(ctx);
      EXPECT_EQ(e, errc::server_error);
    }
    EXPECT_EQ(count(), 1);
    {
      auto tx = db.begin(ctx, Isolation::serializable);
      ASSERT_TRUE(tx);
      auto level = tx->query(ctx, "SHOW transaction_isolation");
      ASSERT_TRUE(level) << level.error().what();
      EXPECT_EQ(*(*level)[0].get<std::string>(0), "serializable");
      EXPECT_FALSE(tx->commit(ctx));
    }
    {
      auto tx = db.begin(ctx, Isolation::repeatable_read);
      ASSERT_TRUE(tx);
      EXPECT_EQ(*(*tx->query(ctx, "SHOW transaction_isolation"))[0].get<std::string>(0),
                "repeatable read");
    }
    // Every transaction gave its connection back.
    const PoolStats s = db.stats();
    EXPECT_EQ(s.open, s.idle);
    EXPECT_EQ(s.discarded, 0u);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgPool, ADeadlineCancelsARunningStatement) {
  run([&] {
    Pool db(options(1));
    ASSERT_TRUE(db.exec(Context(), "SELECT 1"));
    auto [ctx, cancel] = goro::with_timeout(Context(), 100ms);
    const auto t0 = std::chrono::steady_clock::now();
    auto slow = db.query(ctx, "SELECT pg_sleep(10)");
    const long long took = ms_since(t0);
    cancel();
    ASSERT_FALSE(slow);
    EXPECT_EQ(slow.error(), context_errc::deadline_exceeded) << slow.error().what();
    EXPECT_LT(took, 2000);
    EXPECT_GE(took, 90);
    // The same connection (max_open 1), kept and usable.
    auto next = db.query(Context(), "SELECT 42");
    ASSERT_TRUE(next) << next.error().what();
    EXPECT_EQ(*(*next)[0].get<int>(0), 42);
    EXPECT_EQ(db.stats().connects, 1u);

    // Cancelled while waiting for the pool's one connection.
    auto tx = db.begin(Context());
    ASSERT_TRUE(tx);
    auto [ctx2, cancel2] = goro::with_timeout(Context(), 50ms);
    auto waited = db.query(ctx2, "SELECT 1");
    cancel2();
    ASSERT_FALSE(waited);
    EXPECT_EQ(waited.error(), context_errc::deadline_exceeded);
    EXPECT_FALSE(tx->commit(Context()));
  });
}

TEST_P(PgPool, ACancelledStatementInATransactionLeavesItToRollBack) {
  run([&] {
    Pool db(options(1));
    auto tx = db.begin(Context());
    ASSERT_TRUE(tx) << tx.error().what();
    auto [ctx, cancel] = goro::with_timeout(Context(), 100ms);
    const auto t0 = std::chrono::steady_clock::now();
    auto slow = tx->exec(ctx, "SELECT pg_sleep(10)");
    cancel();
    ASSERT_FALSE(slow);
    EXPECT_EQ(slow.error(), context_errc::deadline_exceeded);
    EXPECT_LT(ms_since(t0), 2000);
    // The server ended the statement with an error, which aborted the transaction.
    auto after = tx->exec(Context(), "SELECT 1");
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error().field("sqlstate"), "25P02");
    EXPECT_FALSE(tx->rollback(Context()));
    auto next = db.query(Context(), "SELECT 7");
    ASSERT_TRUE(next) << next.error().what();
    EXPECT_EQ(*(*next)[0].get<int>(0), 7);
    EXPECT_EQ(db.stats().connects, 1u);
  });
}

TEST_P(PgPool, ConcurrentTransactionsSerializeOnARowLock) {
  run([&] {
    Pool db(options(4));
    const Context ctx;
    const std::string t = table("counter");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    ASSERT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (id int PRIMARY KEY, n bigint)"));
    ASSERT_TRUE(db.exec(ctx, "INSERT INTO " + t + " VALUES (1, 0)"));
    std::atomic<int> failures{0};
    goro::WaitGroup wg;
    for (int i = 0; i < 16; ++i) {
      wg.add(1);
      goro::go([&] {
        for (int k = 0; k < 5; ++k) {
          auto tx = db.begin(ctx);
          if (!tx) {
            failures.fetch_add(1);
            continue;
          }
          auto n = tx->query(ctx, "SELECT n FROM " + t + " WHERE id = 1 FOR UPDATE");
          if (!n || !tx->exec(ctx, "UPDATE " + t + " SET n = $1 WHERE id = 1",
                              {*(*n)[0].get<long long>(0) + 1}) ||
              tx->commit(ctx))
            failures.fetch_add(1);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(failures.load(), 0);
    auto n = db.query(ctx, "SELECT n FROM " + t + " WHERE id = 1");
    ASSERT_TRUE(n);
    EXPECT_EQ(*(*n)[0].get<long long>(0), 80);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgPool, ThePoolHoldsAtMostMaxOpen) {
  run([&] {
    goro::test::LeakCheck leaks("pool");
    Pool db(options(4));
    std::atomic<int> failures{0}, most_open{0};
    goro::WaitGroup wg;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) {
      wg.add(1);
      goro::go([&] {
        auto r = db.exec(Context(), "SELECT pg_sleep(0.05)");
        if (!r) failures.fetch_add(1);
        int seen = db.stats().open;
        int prev = most_open.load();
        while (seen > prev && !most_open.compare_exchange_weak(prev, seen)) {
        }
        wg.done();
      });
    }
    wg.wait();
    const long long took = ms_since(t0);
    EXPECT_EQ(failures.load(), 0);
    EXPECT_LE(most_open.load(), 4);
    EXPECT_GE(took, 450);  // 40 statements of 50 ms, 4 at a time
    const PoolStats s = db.stats();
    EXPECT_LE(s.open, 4);
    EXPECT_LE(s.connects, 4u);
    EXPECT_GT(s.waits, 0u);
    EXPECT_EQ(s.idle, s.open);
  });
}

TEST_P(PgPool, ListenDeliversNotifications) {
  run([&] {
    goro::test::LeakCheck leaks("listener");
    Pool db(options(2));
    const Context ctx;
    auto listener = db.listen(ctx, "events");
    ASSERT_TRUE(listener) << listener.error().what();
    ASSERT_TRUE(db.exec(ctx, "NOTIFY events, 'hello'"));
    ASSERT_TRUE(db.exec(ctx, "SELECT pg_notify($1, $2)", {"events", "second"}));
    ASSERT_TRUE(db.exec(ctx, "SELECT pg_notify($1, $2)", {"other", "not for us"}));
    const Chan<Notification>& ch = (*listener)->notifications();
    for (const char* want : {"hello", "second"}) {
      std::optional<Notification> got;
      ASSERT_EQ(goro::select(goro::recv_case(ch, got), goro::timeout_case(2s)), 0) << want;
      ASSERT_TRUE(got) << want;
      EXPECT_EQ(got->channel, "events");
      EXPECT_EQ(got->payload, want);
      EXPECT_GT(got->backend_pid, 0);
    }
    (*listener)->close();
    std::optional<Notification> after;
    ASSERT_EQ(goro::select(goro::recv_case(ch, after), goro::timeout_case(2s)), 0);
    EXPECT_FALSE(after);  // closed, and the other channel's message never came
    listener->reset();
  });
}

TEST_P(PgPool, AConnectionTheServerKilledIsReplaced) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    auto pid = db.query(ctx, "SELECT pg_backend_pid()");
    ASSERT_TRUE(pid) << pid.error().what();
    const int victim = *(*pid)[0].get<int>(0);
    {
      // From another connection, while the pooled one is idle; waits until it is gone.
      Pool other(options(1));
      auto killed = other.query(ctx, "SELECT pg_terminate_backend($1, 5000)", {victim});
      ASSERT_TRUE(killed) << killed.error().what();
      EXPECT_TRUE(*(*killed)[0].get<bool>(0));
    }
    auto next = db.query(ctx, "SELECT pg_backend_pid()");
    ASSERT_TRUE(next) << next.error().what();
    EXPECT_NE(*(*next)[0].get<int>(0), victim);
    EXPECT_EQ(db.stats().discarded, 1u);
    EXPECT_EQ(db.stats().connects, 2u);
  });
}

TEST_P(PgPool, AServerThatIsNotThereFailsWithLibpqsWords) {
  run([&] {
    Pool db(Options{.conninfo = "host=/nonexistent-goro-pg-dir user=goro dbname=postgres"});
    auto r = db.query(Context(), "SELECT 1");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_refused);
    EXPECT_EQ(r.error().what().rfind("pg: connect: ", 0), 0u) << r.error().what();
    const PoolStats s = db.stats();
    EXPECT_EQ(s.connect_errors, 1u);
    EXPECT_EQ(s.open, 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, PgPool, ::testing::Values(1, 4), testing::procs_name);

}  // namespace
}  // namespace goro::pg
