// goro::pg when things go wrong, at 1, 2, 4 and 8 Ps: a real PostgreSQL restarted (fast
// shutdown: every session ended) under 32 goroutines of statements — the calls in
// flight fail with clear errors, the pool connects again, and no goroutine, descriptor
// or connection beyond max_open is left — and a fake server that answers with what is
// not the protocol, each kind a clear error in bounded time, never a crash or a hang.
#include <goro/pg/pg.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/net/listener.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "leak_check.hpp"
#include "pg_test_util.hpp"

namespace goro::pg {
namespace testing {

// Its own server: the tests here restart it.
clibs::testing::TestServer& the_server() {
  static clibs::testing::TestServer server("pg", "100");
  return server;
}

}  // namespace testing

namespace {

using namespace std::chrono_literals;
using testing::ms_since;
using testing::PgPool;

// What a failed call during a restart may say, by kind; "" for an unclear error.
std::string kind_of(const Error& e) {
  const std::string what = e.what();
  if (e == errc::server_error) {
    // The server ending sessions (57P01), or refusing them while it stops or starts.
    const std::string_view state = e.field("sqlstate");
    return state.substr(0, 3) == "57P" ? "server ended the session" : "";
  }
  if (what.rfind("pg: ", 0) != 0) return "";
  if (e == std::errc::connection_refused) return "could not connect";
  if (e == std::errc::connection_reset || e == std::errc::io_error) return "connection broke";
  return "";
}

class PgFault : public PgPool {};

TEST_P(PgFault, ARestartUnderLoadFailsCallsClearlyAndThePoolRecovers) {
  run([&] {
    goro::test::LeakCheck leaks("restart under load");
    Options o = options(8);
    o.max_backoff = 50ms;
    Pool db(o);
    ASSERT_TRUE(db.exec(Context(), "SELECT 1"));
    std::atomic<bool> stop{false};
    std::atomic<int> ok{0}, most_open{0};
    std::mutex mu;
    std::map<std::string, int> failures;  // (mu) by kind
    std::vector<std::string> unclear;     // (mu)
    std::atomic<long long> slowest_ms{0};
    goro::WaitGroup wg;
    for (int g = 0; g < 32; ++g) {
      wg.add(1);
      goro::go([&, g] {
        for (int i = 0; !stop.load(); ++i) {
          auto [ctx, cancel] = goro::with_timeout(Context(), 10s);
          const auto t0 = std::chrono::steady_clock::now();
          auto r = db.query(ctx, "SELECT $1::int, pg_sleep(0.002)", {g * 100000 + i});
          cancel();
          const long long took = ms_since(t0);
          long long prev = slowest_ms.load();
          while (took > prev && !slowest_ms.compare_exchange_weak(prev, took)) {
          }
          const int open = db.stats().open;
          int seen = most_open.load();
          while (open > seen && !most_open.compare_exchange_weak(seen, open)) {
          }
          if (r && *(*r)[0].get<int>(0) == g * 100000 + i) {
            ok.fetch_add(1);
            continue;
          }
          {
            std::lock_guard lock(mu);
            const std::string kind = r ? "" : kind_of(r.error());
            if (kind.empty()) {
              unclear.push_back(r ? "a wrong answer" : r.error().what());
            } else {
              ++failures[kind];
            }
          }
          goro::sleep(1ms);  // as a handler's client would take its 503 and come back
        }
        wg.done();
      });
    }
    goro::sleep(300ms);
    const int before = ok.load();
    EXPECT_GT(before, 0);
    // Down for 0.5 s. (TestServer::restart waits for the server: in goro::blocking.)
    const bool back = goro::blocking([&] { return server_.restart(0.5); });
    ASSERT_TRUE(back);
    const int at_restart = ok.load();
    // Calls work again within the back-off, and keep working.
    const auto t0 = std::chrono::steady_clock::now();
    while (ok.load() < at_restart + 200 && ms_since(t0) < 5000) goro::sleep(10ms);
    std::map<std::string, int> after_recovery;
    {
      std::lock_guard lock(mu);
      after_recovery = failures;
    }
    goro::sleep(300ms);
    stop.store(true);
    wg.wait();
    EXPECT_GE(ok.load(), at_restart + 200) << "the pool did not recover within 5 s";
    {
      std::lock_guard lock(mu);
      EXPECT_TRUE(unclear.empty()) << unclear.size() << " unclear, first: " << unclear.front();
      int total = 0;
      for (const auto& [kind, n] : failures) total += n;
      EXPECT_GT(total, 0) << "no call failed across a restart";
      EXPECT_EQ(failures, after_recovery) << "calls failed after the pool had recovered";
      for (const auto& [kind, n] : failures) std::printf("  %d failed: %s\n", n, kind.c_str());
    }
    std::printf("  %d calls succeeded; slowest call %lld ms\n", ok.load(), slowest_ms.load());
    EXPECT_LT(slowest_ms.load(), 5000);  // nothing hung until its deadline
    EXPECT_LE(most_open.load(), 8);
    const PoolStats s = db.stats();
    EXPECT_LE(s.open, 8);
    EXPECT_GT(s.discarded, 0u);
    // The server sees no more of our connections than the pool holds.
    auto sessions = db.query(Context(),
                             "SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                             "'client backend' AND usename = 'goro'");
    ASSERT_TRUE(sessions) << sessions.error().what();
    EXPECT_LE(*(*sessions)[0].get<long long>(0), 8);
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, PgFault, ::testing::Values(1, 2, 4, 8), testing::procs_name);

// ---------------------------------------------------------------------------------------
// A fake PostgreSQL on a Unix socket: it reads the startup packet, then answers as
// `script` says. Statements get past the handshake only where the script lets them.

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}
std::string be16(std::uint16_t v) { return {static_cast<char>(v >> 8), static_cast<char>(v)}; }
// A protocol message: its type, its length, its body.
std::string msg(char type, const std::string& body) {
  return std::string(1, type) + be32(static_cast<std::uint32_t>(body.size() + 4)) + body;
}
const std::string kAuthOk = msg('R', be32(0));
const std::string kReady = msg('Z', "I");

// A handshake libpq accepts, then whatever the statement gets.
std::string accepted() { return kAuthOk + msg('S', std::string("TimeZone\0UTC\0", 13)) + kReady; }

// One column of type int4, named "n".
std::string row_description() {
  return msg('T', be16(1) + std::string("n\0", 2) + be32(0) + be16(0) + be32(23) + be16(4) +
                      be32(0xffffffff) + be16(0));
}

struct Garbage {
  const char* name;
  std::string on_connect;    // sent after the startup packet; the connection closes after
                             // it unless the handshake was accepted
  std::string on_statement;  // sent for the first statement after SET TIME ZONE
  bool close_after = true;   // close the connection after on_statement
};

std::vector<Garbage> garbage() {
  return {
      {"not PostgreSQL at all", "HTTP/1.1 400 Bad Request\r\n\r\n", ""},
      {"closes at once", "", ""},
      {"an authentication method no one has", msg('R', be32(99)), ""},
      {"a huge authentication request", std::string("R") + be32(0x7fffffff), ""},
      {"an error without its fields' end", msg('E', std::string("SFATAL\0C28000\0Mno", 17)), ""},
      {"a message type that does not exist", accepted(), msg('y', "") + kReady},
      {"a row with more columns than described", accepted(),
       msg('1', "") + msg('2', "") + row_description() +
           msg('D', be16(3) + be32(1) + "1" + be32(1) + "2" + be32(1) + "3") +
           msg('C', std::string("SELECT 1\0", 9)) + kReady},
      {"a column longer than its row", accepted(),
       msg('1', "") + msg('2', "") + row_description() + msg('D', be16(1) + be32(1000) + "12") +
           msg('C', std::string("SELECT 1\0", 9)) + kReady},
      {"a message cut off, then the end", accepted(), std::string("T") + be32(100) + "abc"},
      {"a ready-for-query of no known state", accepted(), msg('1', "") + msg('Z', "?"), false},
      {"silence", accepted(), "", false},
  };
}

class FakePostgres {
 public:
  explicit FakePostgres(const Garbage& g) : g_(g) {
    char dir[] = "/tmp/goro-fake-pg-XXXXXX";
    dir_ = ::mkdtemp(dir) != nullptr ? dir : "/tmp";
    auto ln = net::listen("unix", dir_ + "/.s.PGSQL.5432");
    if (!ln) return;
    ln_ = std::move(*ln);
    done_.add(1);
    goro::go([this] {
      for (;;) {
        auto c = ln_.accept();
        if (!c) break;
        auto conn = std::make_shared<net::Conn>(std::move(*c));
        {
          std::lock_guard lock(mu_);
          conns_.push_back(conn);
        }
        done_.add(1);
        goro::go([this, conn] {
          serve(*conn);
          (void)conn->close();
          done_.done();
        });
      }
      done_.done();
    });
  }
  ~FakePostgres() {
    (void)ln_.close();
    {
      std::lock_guard lock(mu_);
      for (auto& c : conns_) (void)c->close();
    }
    done_.wait();
    ::rmdir(dir_.c_str());
  }
  std::string conninfo() const {
    return "host=" + dir_ + " port=5432 user=goro dbname=fake connect_timeout=5";
  }

 private:
  // Reads one length-prefixed packet (the startup one has no type byte).
  static bool read_packet(net::Conn& c, std::string& body, bool typed, char* type) {
    char head[5];
    const std::size_t n = typed ? 5 : 4;
    auto got = c.read_full(head, n);
    if (!got || *got != n) return false;
    if (typed) *type = head[0];
    const char* len = typed ? head + 1 : head;
    const std::uint32_t length = (static_cast<std::uint32_t>(static_cast<std::uint8_t>(len[0])) << 24) |
                                 (static_cast<std::uint32_t>(static_cast<std::uint8_t>(len[1])) << 16) |
                                 (static_cast<std::uint32_t>(static_cast<std::uint8_t>(len[2])) << 8) |
                                 static_cast<std::uint8_t>(len[3]);
    if (length < 4 || length > (1 << 20)) return false;
    body.assign(length - 4, '\0');
    if (length == 4) return true;
    auto rest = c.read_full(body.data(), body.size());
    return rest && *rest == body.size();
  }
  static void send(net::Conn& c, const std::string& bytes) {
    if (!bytes.empty()) (void)c.write(bytes.data(), bytes.size());
  }
  void serve(net::Conn& c) {
    std::string body;
    if (!read_packet(c, body, false, nullptr) || body.size() < 4) return;
    // A CancelRequest (PQcancel): ends the connections it could name, here all others.
    if (body.compare(0, 4, be32(80877102)) == 0) {
      std::lock_guard lock(mu_);
      for (auto& other : conns_) {
        if (other.get() != &c) (void)other->close();
      }
      return;
    }
    send(c, g_.on_connect);
    if (g_.on_connect != accepted()) return;
    bool prepared = false;
    for (char type = 0; read_packet(c, body, true, &type);) {
      if (type == 'Q') {  // SET TIME ZONE 'UTC'
        send(c, msg('C', std::string("SET\0", 4)) + kReady);
      } else if (type == 'S' && !prepared) {  // Parse, Sync: PQsendPrepare
        prepared = true;
        send(c, msg('1', "") + kReady);
      } else if (type == 'S') {  // Bind, Describe, Execute, Sync
        send(c, g_.on_statement);
        if (g_.close_after) return;
      }
    }
  }

  Garbage g_;
  std::string dir_;
  net::Listener ln_;
  goro::WaitGroup done_;
  goro::Mutex mu_;
  std::vector<std::shared_ptr<net::Conn>> conns_;  // (mu_) every one accepted
};

TEST_P(PgFault, GarbageFromTheServerIsAnErrorNotACrashOrAHang) {
  run([&] {
    goro::test::LeakCheck leaks("fake server");
    for (const Garbage& g : garbage()) {
      FakePostgres fake(g);
      Pool db(Options{.conninfo = fake.conninfo(), .max_open = 2});
      auto [ctx, cancel] = goro::with_timeout(Context(), 1500ms);
      const auto t0 = std::chrono::steady_clock::now();
      auto r = db.query(ctx, "SELECT 1");
      cancel();
      const long long took = ms_since(t0);
      ASSERT_FALSE(r) << g.name << ": a result from garbage";
      const Error& e = r.error();
      if (std::string_view(g.name) == "silence") {
        // Nothing wrong was said: the Context ends the call, and the cancel it sends
        // ends the connection.
        EXPECT_EQ(e, context_errc::deadline_exceeded) << e.what();
      } else {
        EXPECT_TRUE(e == std::errc::connection_refused || e == std::errc::connection_reset ||
                    e == std::errc::io_error || e == errc::protocol_error)
            << g.name << ": " << e.code().message() << ": " << e.what();
        EXPECT_LT(took, 1000) << g.name;
      }
      EXPECT_EQ(e.what().rfind("pg: ", 0), 0u) << g.name << ": " << e.what();
      EXPECT_LT(took, 3000) << g.name;
      // Whatever it was, the connection is not kept.
      EXPECT_EQ(db.stats().idle, 0) << g.name;
      std::printf("  %-40s %4lld ms  %s\n", g.name, took, e.what().c_str());
    }
  });
}

}  // namespace
}  // namespace goro::pg
