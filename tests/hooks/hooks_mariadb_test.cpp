// MariaDB's client library (Connector/C, libmariadb) through its plain blocking API
// (mysql_real_connect, mysql_query, mysql_store_result) on goroutines, over goro::hooks,
// against a real mariadbd started for this binary (scripts/test-servers.sh) with its
// grant tables on: every connection authenticates as the user goro.
//
// Connector/C makes its socket non-blocking itself and waits in poll (recv with
// MSG_DONTWAIT, then poll until readable): the hooked poll is what parks the goroutine.
#include <mysql.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>

#include "clibs_test_util.hpp"
#include "hooks_lib_util.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using goro::hooks::testing::burst;

// max_connections 220: 200 at once, and the tests' others.
TestServer& mariadb() {
  static TestServer server("mariadb", "220");
  return server;
}

// What the script printed: host=... port=... user=... password=... socket=...
struct Address {
  std::string host, user, password, socket;
  unsigned port = 0;
};

Address address() {
  std::map<std::string, std::string> fields;
  std::istringstream in(mariadb().address());
  for (std::string field; in >> field;) {
    const auto eq = field.find('=');
    if (eq != std::string::npos) fields[field.substr(0, eq)] = field.substr(eq + 1);
  }
  return {fields["host"], fields["user"], fields["password"], fields["socket"],
          static_cast<unsigned>(std::stoul(fields["port"]))};
}

struct MysqlDeleter {
  void operator()(MYSQL* m) const { mysql_close(m); }
};
using Mysql = std::unique_ptr<MYSQL, MysqlDeleter>;

struct ResultDeleter {
  void operator()(MYSQL_RES* r) const { mysql_free_result(r); }
};
using Result = std::unique_ptr<MYSQL_RES, ResultDeleter>;

enum class Via { tcp, unix_socket };

// A connection as the user goro, or one whose mysql_error says why there is none. No
// call on it waits forever: connecting, reading and writing each give up after 20 s
// with an error (the library's own timeouts, which it keeps with poll's timeout).
Mysql connect(Via via, const char* password = nullptr) {
  const Address a = address();
  Mysql m(mysql_init(nullptr));
  const unsigned int seconds = 20;
  mysql_options(m.get(), MYSQL_OPT_CONNECT_TIMEOUT, &seconds);
  mysql_options(m.get(), MYSQL_OPT_READ_TIMEOUT, &seconds);
  mysql_options(m.get(), MYSQL_OPT_WRITE_TIMEOUT, &seconds);
  if (via == Via::tcp) {
    mysql_real_connect(m.get(), a.host.c_str(), a.user.c_str(),
                       password ? password : a.password.c_str(), "mysql", a.port, nullptr, 0);
  } else {
    mysql_real_connect(m.get(), "localhost", a.user.c_str(),
                       password ? password : a.password.c_str(), "mysql", 0, a.socket.c_str(), 0);
  }
  return m;
}

bool connected(MYSQL* m) { return mysql_get_host_info(m) != nullptr && mysql_errno(m) == 0; }

// The first column of the first row of sql's result, or "" with the error in mysql_error.
std::string query_value(MYSQL* m, const std::string& sql) {
  if (mysql_query(m, sql.c_str()) != 0) return "";
  Result r(mysql_store_result(m));
  if (!r) return "";
  MYSQL_ROW row = mysql_fetch_row(r.get());
  if (row == nullptr || row[0] == nullptr) return "";
  return std::string(row[0], mysql_fetch_lengths(r.get())[0]);
}

// mysql_library_init is not thread-safe: once, before any goroutine connects.
class HooksMariadbTest : public ProcsTest {
 protected:
  static void SetUpTestSuite() { mysql_library_init(0, nullptr, nullptr); }
};

TEST_P(HooksMariadbTest, BlockingCallsOnAGoroutine) {
  GORO_REQUIRE_SERVER(mariadb());
  run_with(GetParam(), [] {
    for (Via via : {Via::tcp, Via::unix_socket}) {
      Mysql m = connect(via);
      ASSERT_TRUE(connected(m.get())) << mysql_error(m.get());
      ASSERT_EQ(mysql_query(m.get(), "CREATE TEMPORARY TABLE items (name VARCHAR(20), qty INT)"),
                0)
          << mysql_error(m.get());
      ASSERT_EQ(mysql_query(m.get(), "INSERT INTO items VALUES ('apples', 3), ('pears', 5)"), 0)
          << mysql_error(m.get());
      EXPECT_EQ(mysql_affected_rows(m.get()), 2u);
      EXPECT_EQ(query_value(m.get(), "SELECT SUM(qty) + 34 FROM items"), "42")
          << mysql_error(m.get());
      // 4 MB back: the library reads it a packet at a time, polling in between.
      EXPECT_EQ(query_value(m.get(), "SELECT REPEAT('x', 4 * 1024 * 1024)").size(),
                4u * 1024 * 1024)
          << mysql_error(m.get());
    }
  });
}

// 200 goroutines at one P, each on its own connection running SELECT SLEEP(0.2), finish
// in about one call's time (one at a time: 40 s) on a few threads.
TEST_P(HooksMariadbTest, ConcurrentSlowQueriesParkGoroutinesNotThreads) {
  GORO_REQUIRE_SERVER(mariadb());
  run_with(GetParam(), [] {
    constexpr int kClients = 200;
    std::vector<Mysql> conns(kClients);
    const auto connects = burst(kClients, [&](int i) {
      conns[i] = connect(Via::tcp);
      return connected(conns[i].get());
    });
    goro::hooks::testing::print("libmariadb mysql_real_connect", kClients, connects);
    ASSERT_EQ(connects.succeeded, kClients) << mysql_error(conns[0].get());
    const auto queries = burst(kClients, [&](int i) {
      return query_value(conns[i].get(), "SELECT SLEEP(0.2)") == "0";
    });
    goro::hooks::testing::print("libmariadb mysql_query(SELECT SLEEP(0.2))", kClients, queries);
    EXPECT_EQ(queries.succeeded, kClients);
    EXPECT_GE(queries.ms, 199);
    EXPECT_LT(queries.ms, 3000);
    EXPECT_LE(queries.threads, thread_bound(queries, thread_budget()));
  });
}

// Errors come back as the library reports them: a bad statement's server message and
// number, a wrong password's; the connection and the runtime go on working.
TEST_P(HooksMariadbTest, ErrorsComeBackAsTheLibraryReportsThem) {
  GORO_REQUIRE_SERVER(mariadb());
  run_with(GetParam(), [] {
    Mysql m = connect(Via::tcp);
    ASSERT_TRUE(connected(m.get())) << mysql_error(m.get());
    EXPECT_NE(mysql_query(m.get(), "SELECT * FROM no_such_table"), 0);
    EXPECT_EQ(mysql_errno(m.get()), 1146u);  // ER_NO_SUCH_TABLE
    EXPECT_STREQ(mysql_error(m.get()), "Table 'mysql.no_such_table' doesn't exist");
    EXPECT_NE(mysql_query(m.get(), "SELEC 1"), 0);
    EXPECT_EQ(mysql_errno(m.get()), 1064u);  // ER_PARSE_ERROR
    EXPECT_EQ(query_value(m.get(), "SELECT 6 * 7"), "42") << mysql_error(m.get());

    Mysql refused = connect(Via::tcp, "not-the-password");
    EXPECT_FALSE(connected(refused.get()));
    EXPECT_EQ(mysql_errno(refused.get()), 1045u);  // ER_ACCESS_DENIED_ERROR
    EXPECT_NE(std::string(mysql_error(refused.get())).find("Access denied for user 'goro'"),
              std::string::npos)
        << mysql_error(refused.get());

    std::atomic<bool> ran{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(10ms);
      ran.store(true);
      wg.done();
    });
    wg.wait();
    EXPECT_TRUE(ran.load());
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksMariadbTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
