// goro::pg's COPY streams against a real PostgreSQL, at 1 and 4 Ps: rows in (text and
// CSV, written in pieces that split rows) and out (a row at a time), a refused row
// with the server's words, abort and destruction (nothing copied, the connection kept),
// a Context ending a copy either way, COPY inside a transaction, and a COPY run as a
// plain statement (refused, the connection kept).
#include <goro/pg/pg.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "leak_check.hpp"
#include "pg_test_util.hpp"

namespace goro::pg {
namespace {

using namespace std::chrono_literals;
using testing::ms_since;
using testing::PgPool;

class PgCopy : public PgPool {
 protected:
  // A fresh table (id int PRIMARY KEY, name text, data bytea).
  std::string fresh_table(Pool& db, const char* base) {
    const std::string t = table(base);
    const Context ctx;
    EXPECT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    EXPECT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (id int PRIMARY KEY, name text, data bytea)"));
    return t;
  }
  static long long count(Pool& db, const std::string& t) {
    auto n = db.query(Context(), "SELECT count(*) FROM " + t);
    return n ? *(*n)[0].get<long long>(0) : -1;
  }
};

TEST_P(PgCopy, RowsGoInInPiecesAndComeOutARowAtATime) {
  run([&] {
    goro::test::LeakCheck leaks("copy");
    Pool db(options(2));
    const Context ctx;
    const std::string t = fresh_table(db, "copy_rows");
    // 1000 rows in text format, written in 7-byte pieces: rows straddle the writes.
    std::string data;
    for (int i = 0; i < 1000; ++i)
      data += std::to_string(i) + "\tname " + std::to_string(i) + "\t\\\\x0a" + "\n";
    auto in = db.copy_in(ctx, "COPY " + t + " (id, name, data) FROM STDIN");
    ASSERT_TRUE(in) << in.error().what();
    for (std::size_t at = 0; at < data.size(); at += 7) {
      ASSERT_FALSE(in->write(ctx, std::string_view(data).substr(at, 7)));
    }
    auto copied = in->finish(ctx);
    ASSERT_TRUE(copied) << copied.error().what();
    EXPECT_EQ(*copied, 1000);
    EXPECT_EQ(in->write(ctx, "more"), errc::closed);
    auto row = db.query(ctx, "SELECT name, data FROM " + t + " WHERE id = 999");
    ASSERT_TRUE(row) << row.error().what();
    EXPECT_EQ(*(*row)[0].get<std::string>(0), "name 999");
    EXPECT_EQ((*row)[0].get<Bytes>(1)->data, "\n");

    // CSV, one big write (libpq is handed it in pieces).
    std::string csv;
    for (int i = 1000; i < 21000; ++i) csv += std::to_string(i) + ",\"a, \"\"quoted\"\" name\",\n";
    auto in_csv = db.copy_in(ctx, "COPY " + t + " (id, name, data) FROM STDIN (FORMAT csv)");
    ASSERT_TRUE(in_csv) << in_csv.error().what();
    ASSERT_FALSE(in_csv->write(ctx, csv));
    EXPECT_EQ(*in_csv->finish(ctx), 20000);
    EXPECT_EQ(count(db, t), 21000);

    // Out, a row at a time, in order.
    auto out = db.copy_out(ctx, "COPY (SELECT id, name FROM " + t + " ORDER BY id) TO STDOUT");
    ASSERT_TRUE(out) << out.error().what();
    int rows = 0;
    for (;;) {
      auto r = out->next(ctx);
      ASSERT_TRUE(r) << r.error().what();
      if (!*r) break;
      const std::string want = rows < 1000 ? std::to_string(rows) + "\tname " + std::to_string(rows) + "\n"
                                           : std::to_string(rows) + "\ta, \"quoted\" name\n";
      ASSERT_EQ(**r, want) << "row " << rows;
      ++rows;
    }
    EXPECT_EQ(rows, 21000);
    EXPECT_EQ(out->rows(), 21000);
    EXPECT_EQ(out->next(ctx).error(), errc::closed);
    // Both connections went back to the pool, fit.
    const PoolStats s = db.stats();
    EXPECT_EQ(s.open, s.idle);
    EXPECT_EQ(s.discarded, 0u);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgCopy, ARefusedRowFailsFinishWithTheServersWords) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    const std::string t = fresh_table(db, "copy_refused");
    auto in = db.copy_in(ctx, "COPY " + t + " (id, name) FROM STDIN");
    ASSERT_TRUE(in);
    ASSERT_FALSE(in->write(ctx, "1\tone\nnot a number\ttwo\n"));
    auto copied = in->finish(ctx);
    ASSERT_FALSE(copied);
    EXPECT_EQ(copied.error(), errc::server_error);
    EXPECT_EQ(copied.error().field("sqlstate"), "22P02");  // invalid_text_representation
    EXPECT_NE(copied.error().field("context").find("line 2"), std::string_view::npos)
        << copied.error().field("context");
    EXPECT_EQ(count(db, t), 0);  // nothing copied
    // A duplicate key, found as the rows go in.
    auto dup = db.copy_in(ctx, "COPY " + t + " (id, name) FROM STDIN");
    ASSERT_TRUE(dup);
    ASSERT_FALSE(dup->write(ctx, "1\ta\n1\tb\n"));
    EXPECT_EQ(dup->finish(ctx).error().field("sqlstate"), "23505");
    // The one connection is still the pool's, and fine.
    EXPECT_EQ(count(db, t), 0);
    EXPECT_EQ(db.stats().connects, 1u);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgCopy, AbortedOrDestroyedNothingIsCopied) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    const std::string t = fresh_table(db, "copy_abort");
    {
      auto in = db.copy_in(ctx, "COPY " + t + " (id) FROM STDIN");
      ASSERT_TRUE(in);
      ASSERT_FALSE(in->write(ctx, "1\n2\n"));
      EXPECT_FALSE(in->abort(ctx, "changed my mind"));
      EXPECT_EQ(in->finish(ctx).error(), errc::closed);
    }
    {
      auto in = db.copy_in(ctx, "COPY " + t + " (id) FROM STDIN");
      ASSERT_TRUE(in);
      ASSERT_FALSE(in->write(ctx, "3\n"));
      // Destroyed unfinished.
    }
    {
      // Destroyed before the end of its rows: cancelled, the rest dropped.
      auto out = db.copy_out(ctx, "COPY (SELECT generate_series(1, 1000000)) TO STDOUT");
      ASSERT_TRUE(out);
      auto first = out->next(ctx);
      ASSERT_TRUE(first && *first) << (first ? "ended" : first.error().what());
      EXPECT_EQ(**first, "1\n");
    }
    EXPECT_EQ(count(db, t), 0);
    EXPECT_EQ(db.stats().connects, 1u);  // the connection lived through all three
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgCopy, AContextEndsACopyEitherWay) {
  run([&] {
    Pool db(options(1));
    const std::string t = fresh_table(db, "copy_ctx");
    {
      auto in = db.copy_in(Context(), "COPY " + t + " (id) FROM STDIN");
      ASSERT_TRUE(in);
      auto [ctx, cancel] = goro::with_cancel(Context());
      ASSERT_FALSE(in->write(ctx, "1\n"));
      cancel();
      EXPECT_EQ(in->write(ctx, "2\n"), context_errc::canceled);
      EXPECT_EQ(in->finish(Context()).error(), errc::closed);  // over
    }
    {
      // Rows that come slower than the deadline: the server is told to stop. (Rows of
      // 10 kB: the server sends a row once its 8 kB buffer is full.)
      auto [ctx, cancel] = goro::with_timeout(Context(), 300ms);
      auto out = db.copy_out(ctx,
                             "COPY (SELECT repeat('x', 10000), pg_sleep(0.05) "
                             "FROM generate_series(1, 200)) TO STDOUT");
      ASSERT_TRUE(out) << out.error().what();
      const auto t0 = std::chrono::steady_clock::now();
      Error ended;
      for (;;) {
        auto r = out->next(ctx);
        if (!r) {
          ended = r.error();
          break;
        }
        ASSERT_TRUE(*r) << "all 200 rows came in 300 ms";
      }
      cancel();
      EXPECT_EQ(ended, context_errc::deadline_exceeded) << ended.what();
      EXPECT_LT(ms_since(t0), 2000);
    }
    EXPECT_EQ(count(db, t), 0);
    auto next = db.query(Context(), "SELECT 1");
    ASSERT_TRUE(next) << next.error().what();
    EXPECT_EQ(db.stats().connects, 1u);
    ASSERT_TRUE(db.exec(Context(), "DROP TABLE " + t));
  });
}

TEST_P(PgCopy, InsideATransaction) {
  run([&] {
    Pool db(options(2));
    const Context ctx;
    const std::string t = fresh_table(db, "copy_tx");
    {
      auto tx = db.begin(ctx);
      ASSERT_TRUE(tx);
      auto in = tx->copy_in(ctx, "COPY " + t + " (id, name) FROM STDIN");
      ASSERT_TRUE(in) << in.error().what();
      ASSERT_FALSE(in->write(ctx, "1\tone\n2\ttwo\n"));
      EXPECT_EQ(*in->finish(ctx), 2);
      EXPECT_EQ(count(db, t), 0);  // not committed yet
      auto out = tx->copy_out(ctx, "COPY " + t + " (name) TO STDOUT");
      ASSERT_TRUE(out);
      std::string names;
      for (auto r = out->next(ctx); r && *r; r = out->next(ctx)) names += **r;
      EXPECT_EQ(names, "one\ntwo\n");
      EXPECT_FALSE(tx->commit(ctx));
    }
    EXPECT_EQ(count(db, t), 2);
    {
      auto tx = db.begin(ctx);
      ASSERT_TRUE(tx);
      auto in = tx->copy_in(ctx, "COPY " + t + " (id, name) FROM STDIN");
      ASSERT_TRUE(in);
      ASSERT_FALSE(in->write(ctx, "3\tthree\n"));
      EXPECT_TRUE(in->finish(ctx));
      // Rolled back with the transaction.
    }
    EXPECT_EQ(count(db, t), 2);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgCopy, ACopyRunAsAStatementIsRefusedAndTheConnectionKept) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    const std::string t = fresh_table(db, "copy_plain");
    auto in = db.exec(ctx, "COPY " + t + " (id) FROM STDIN");
    ASSERT_FALSE(in);
    EXPECT_EQ(in.error(), errc::protocol_error);
    EXPECT_NE(in.error().what().find("copy_in()"), std::string::npos) << in.error().what();
    auto out = db.query(ctx, "COPY (SELECT generate_series(1, 100000)) TO STDOUT");
    ASSERT_FALSE(out);
    EXPECT_NE(out.error().what().find("copy_out()"), std::string::npos) << out.error().what();
    // The other direction through each.
    auto wrong_in = db.copy_in(ctx, "COPY " + t + " TO STDOUT");
    ASSERT_FALSE(wrong_in);
    EXPECT_EQ(wrong_in.error(), errc::protocol_error);
    auto wrong_out = db.copy_out(ctx, "COPY " + t + " FROM STDIN");
    ASSERT_FALSE(wrong_out);
    EXPECT_EQ(wrong_out.error(), errc::protocol_error);
    auto not_copy = db.copy_out(ctx, "SELECT 1");
    ASSERT_FALSE(not_copy);
    EXPECT_EQ(not_copy.error(), errc::protocol_error);
    auto next = db.query(ctx, "SELECT 5");
    ASSERT_TRUE(next) << next.error().what();
    EXPECT_EQ(*(*next)[0].get<int>(0), 5);
    EXPECT_EQ(count(db, t), 0);
    EXPECT_EQ(db.stats().connects, 1u);
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, PgCopy, ::testing::Values(1, 4), testing::procs_name);

}  // namespace
}  // namespace goro::pg
