// goro::pg against a real PostgreSQL: the pool under load at 1, 2, 4 and 8 Ps (no
// connection made twice while calls queue for them; connects backing off while the
// server is away), types (uuid, bytea in binary, the empty statement), a Listener that
// outlives its connection, and TLS (sslmode require and verify-full, with a large
// result and a cancel through it).
#include <goro/pg/pg.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "leak_check.hpp"
#include "pg_test_util.hpp"

namespace goro::pg {
namespace {

using namespace std::chrono_literals;
using clibs::testing::TestServer;
using testing::ms_since;
using testing::PgPool;

// n goroutines each running `each` statements of SELECT $1, pausing 200 us between
// them as handlers do between requests; the failures.
int hammer(Pool& db, int n, int each) {
  std::atomic<int> failures{0};
  goro::WaitGroup wg;
  for (int g = 0; g < n; ++g) {
    wg.add(1);
    goro::go([&, g] {
      for (int i = 0; i < each; ++i) {
        auto r = db.query(Context(), "SELECT $1::int", {g * 1000 + i});
        if (!r || *(*r)[0].get<int>(0) != g * 1000 + i) failures.fetch_add(1);
        goro::sleep(std::chrono::microseconds(200));
      }
      wg.done();
    });
  }
  wg.wait();
  return failures.load();
}

class PgLoad : public PgPool {};

// With max_idle unset (max_open) a connection is made once and kept between calls.
// (With the old default of 10 idle under max_open 16, every moment with more than 10
// idle closed some, and the next calls made them again: loadtest/data's note scenario
// made 150 connections a second.) With max_idle 2, only 2 stay once the load is gone.
TEST_P(PgLoad, ConnectionsAreKeptBetweenCalls) {
  run([&] {
    goro::test::LeakCheck leaks("pool under load");
    {
      Pool db(options(16));
      EXPECT_EQ(hammer(db, 16, 25), 0);
      EXPECT_EQ(hammer(db, 48, 10), 0);
      const PoolStats s = db.stats();
      EXPECT_LE(s.connects, 16u);
      EXPECT_EQ(s.discarded, 0u);
      EXPECT_EQ(s.idle, s.open);
    }
    {
      Options o = options(16);
      o.max_idle = 2;
      Pool db(o);
      EXPECT_EQ(hammer(db, 16, 25), 0);
      EXPECT_LE(db.stats().idle, 2);
    }
  });
}

TEST_P(PgLoad, ConnectsBackOffWhileTheServerIsAway) {
  run([&] {
    Options o{.conninfo = "host=/nonexistent-goro-pg-dir user=goro dbname=postgres",
              .max_backoff = 200ms};
    Pool db(o);
    std::atomic<int> refused{0};
    goro::WaitGroup wg;
    const auto t0 = std::chrono::steady_clock::now();
    for (int g = 0; g < 16; ++g) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < 20; ++i) {
          auto r = db.query(Context(), "SELECT 1");
          if (!r && r.error() == std::errc::connection_refused &&
              r.error().what().rfind("pg: connect: ", 0) == 0)
            refused.fetch_add(1);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(refused.load(), 320);  // every call, with libpq's words
    const long long took = ms_since(t0);
    // Most calls failed at once with the last error instead of connecting: one connect
    // per pause (10, 20, 40 ... ms), plus those that raced the first failure.
    EXPECT_LE(db.stats().connect_errors, 16u + static_cast<std::uint64_t>(took / 10))
        << took << " ms";
    EXPECT_LT(db.stats().connect_errors, 320u);
    // After the pause, a call tries again.
    goro::sleep(250ms);
    const std::uint64_t before = db.stats().connect_errors;
    EXPECT_FALSE(db.query(Context(), "SELECT 1"));
    EXPECT_EQ(db.stats().connect_errors, before + 1);
    EXPECT_EQ(db.stats().open, 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, PgLoad, ::testing::Values(1, 2, 4, 8), testing::procs_name);

class PgTypes : public PgPool {};

TEST_P(PgTypes, UuidsRoundTrip) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    const std::optional<Uuid> u = Uuid::parse("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->to_string(), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    EXPECT_EQ(Uuid::parse("a0eebc999c0b4ef8bb6d6bb9bd380a11"), u);
    EXPECT_FALSE(Uuid::parse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"));
    EXPECT_FALSE(Uuid::parse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g"));
    EXPECT_FALSE(Uuid::parse("a0eebc99x9c0b-4ef8-bb6d-6bb9bd380a11"));
    auto rows = db.query(ctx, "SELECT $1::uuid, gen_random_uuid(), $2::uuid, 'x'::text",
                         {*u, std::optional<Uuid>()});
    ASSERT_TRUE(rows) << rows.error().what();
    EXPECT_EQ(*(*rows)[0].get<Uuid>(0), *u);
    auto random = (*rows)[0].get<Uuid>(1);
    ASSERT_TRUE(random) << random.error().what();
    EXPECT_EQ(random->bytes[6] >> 4, 4);  // version 4
    EXPECT_FALSE((*rows)[0].get<std::optional<Uuid>>(2)->has_value());
    EXPECT_EQ((*rows)[0].get<Uuid>(3).error(), errc::bad_value);
  });
}

TEST_P(PgTypes, ByteaComesInBinaryWhereItPays) {
  run([&] {
    Pool db(options(1));
    const Context ctx;
    std::string big(1 << 20, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 251);
    const std::string t = table("bytea_binary");
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE IF EXISTS " + t));
    ASSERT_TRUE(db.exec(ctx, "CREATE TABLE " + t + " (id int PRIMARY KEY, name text, data bytea)"));
    // In: binary parameters, so a bytea with every byte value goes as it is.
    ASSERT_TRUE(db.exec(ctx, "INSERT INTO " + t + " VALUES ($1, $2, $3)", {1, "big", Bytes{big}}));
    ASSERT_TRUE(db.exec(ctx, "INSERT INTO " + t + " VALUES ($1, $2, $3)",
                        {2, "small", Bytes{std::string("\x00\xff", 2)}}));
    auto length = db.query(ctx, "SELECT length(data) FROM " + t + " WHERE id = 1");
    ASSERT_TRUE(length);
    EXPECT_EQ(*(*length)[0].get<int>(0), 1 << 20);
    // Out: bytea and text columns only. The first run is text (hex), and shows the
    // columns; from the second on the statement's results come in binary.
    const std::string select = "SELECT data, name FROM " + t + " WHERE id = $1";
    for (int run = 0; run < 3; ++run) {
      auto r = db.query(ctx, select, {2});
      ASSERT_TRUE(r) << r.error().what();
      EXPECT_EQ((*r)[0].get<Bytes>(0)->data, std::string("\x00\xff", 2));
      EXPECT_EQ(*(*r)[0].get<std::string>(1), "small");
      EXPECT_EQ((*r)[0].text(0), run == 0 ? std::string("\\x00ff") : std::string("\x00\xff", 2))
          << "run " << run;
      auto whole = db.query(ctx, select, {1});
      ASSERT_TRUE(whole);
      EXPECT_EQ((*whole)[0].get<Bytes>(0)->data, big);
    }
    // A column of another type keeps the statement in text.
    for (int run = 0; run < 2; ++run) {
      auto mixed = db.query(ctx, "SELECT id, data FROM " + t + " WHERE id = $1", {2});
      ASSERT_TRUE(mixed);
      EXPECT_EQ((*mixed)[0].text(1), "\\x00ff");
      EXPECT_EQ(*(*mixed)[0].get<int>(0), 2);
    }
    ASSERT_TRUE(db.exec(ctx, "DROP TABLE " + t));
  });
}

TEST_P(PgTypes, TheEmptyStatementIsNoRowsNotABrokenConnection) {
  run([&] {
    Pool db(options(1));
    auto none = db.query(Context(), "");
    ASSERT_TRUE(none) << none.error().what();
    EXPECT_EQ(none->size(), 0);
    auto again = db.query(Context(), "  ", {1});
    EXPECT_FALSE(again);  // one parameter given, none asked for
    EXPECT_EQ(again.error(), errc::server_error);
    EXPECT_TRUE(db.query(Context(), "SELECT 1"));
    EXPECT_EQ(db.stats().connects, 1u);
  });
}

// The Listener's own backend, as pg_stat_activity shows it.
int listener_pid(Pool& db) {
  auto r = db.query(Context(),
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> "
                    "pg_backend_pid()");
  return r && r->size() == 1 ? *(*r)[0].get<int>(0) : 0;
}

TEST_P(PgTypes, AListenerListensAgainAfterItsConnectionBreaks) {
  run([&] {
    goro::test::LeakCheck leaks("listener reconnect");
    Options o = options(2);
    o.max_backoff = 100ms;
    Pool db(o);
    const Context ctx;
    const std::string channel = table("reconnecting");
    auto listener = db.listen(ctx, channel);
    ASSERT_TRUE(listener) << listener.error().what();
    const Chan<Notification>& ch = (*listener)->notifications();
    const int first = listener_pid(db);
    ASSERT_GT(first, 0);
    auto killed = db.query(ctx, "SELECT pg_terminate_backend($1, 5000)", {first});
    ASSERT_TRUE(killed && *(*killed)[0].get<bool>(0));
    // Notify until one arrives: those sent before it listens again are lost.
    std::optional<Notification> got;
    const auto t0 = std::chrono::steady_clock::now();
    while (!got && ms_since(t0) < 5000) {
      ASSERT_TRUE(db.exec(ctx, "SELECT pg_notify($1, 'back')", {channel}));
      (void)goro::select(goro::recv_case(ch, got), goro::timeout_case(100ms));
    }
    ASSERT_TRUE(got) << "no notification within 5 s of the backend's end";
    EXPECT_EQ(got->payload, "back");
    EXPECT_EQ((*listener)->reconnects(), 1u);
    EXPECT_NE(listener_pid(db), first);
    (*listener)->close();
    listener->reset();
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, PgTypes, ::testing::Values(1, 4), testing::procs_name);

// ---------------------------------------------------------------------------------------
// TLS: a server of its own, listening on 127.0.0.1 with ssl=on and a self-signed
// certificate for CN=127.0.0.1.

TestServer& tls_server() {
  static TestServer server("pg", "20 tls");
  return server;
}

class PgTls : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { GORO_REQUIRE_SERVER(server_); }
  TestServer& server_ = tls_server();
};

TEST_P(PgTls, SslmodeRequireAndVerifyFull) {
  clibs::testing::run_with(GetParam(), [&] {
    const Context ctx;
    // server_.address() asks for sslmode=require.
    Pool db(Options{.conninfo = server_.address(), .max_open = 2});
    auto ssl = db.query(ctx, "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    ASSERT_TRUE(ssl) << ssl.error().what();
    EXPECT_TRUE(*(*ssl)[0].get<bool>(0));
    EXPECT_EQ((*ssl)[0].get<std::string>(1)->rfind("TLSv1.", 0), 0u);
    // A large result through TLS records (libpq reads them as the socket says).
    auto big = db.query(ctx, "SELECT repeat('x', 4 * 1024 * 1024), g FROM generate_series(1, 3) g");
    ASSERT_TRUE(big) << big.error().what();
    EXPECT_EQ(big->size(), 3);
    EXPECT_EQ((*big)[2].get<std::string_view>(0)->size(), 4u * 1024 * 1024);
    // A statement cancelled through TLS; the connection kept.
    auto [deadline, cancel] = goro::with_timeout(ctx, 100ms);
    auto slow = db.query(deadline, "SELECT pg_sleep(10)");
    cancel();
    EXPECT_EQ(slow.error(), context_errc::deadline_exceeded);
    EXPECT_TRUE(db.query(ctx, "SELECT 1"));

    // verify-full against the server's own certificate as the root: the name matches.
    const std::string cert = server_.dir() + "/data/server.crt";
    std::string verified = server_.address();
    verified.replace(verified.find("sslmode=require"), 15,
                     "sslmode=verify-full sslrootcert=" + cert);
    Pool strict(Options{.conninfo = verified, .max_open = 1});
    auto ok = strict.query(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    ASSERT_TRUE(ok) << ok.error().what();
    EXPECT_TRUE(*(*ok)[0].get<bool>(0));

    // verify-full with a root that did not sign it: refused, in libpq's words.
    std::string wrong = verified;
    wrong.replace(wrong.find(cert), cert.size(), "/etc/ssl/certs/ca-certificates.crt");
    Pool refused(Options{.conninfo = wrong, .max_open = 1});
    auto no = refused.query(ctx, "SELECT 1");
    ASSERT_FALSE(no);
    EXPECT_EQ(no.error(), std::errc::connection_refused);
    EXPECT_NE(no.error().what().find("certificate"), std::string::npos) << no.error().what();
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, PgTls, ::testing::Values(1, 4), testing::procs_name);

}  // namespace
}  // namespace goro::pg
