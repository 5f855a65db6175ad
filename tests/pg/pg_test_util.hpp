// What the goro::pg tests share: the fixture that runs a test body on a runtime of
// GetParam() Ps against the binary's PostgreSQL, which each test binary makes once in
// its the_server() (scripts/test-servers.sh, through tests/clibs' TestServer).
#pragma once

#include <goro/pg/pg.hpp>

#include <chrono>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>

#include "clibs_test_util.hpp"

namespace goro::pg::testing {

// The binary's server, defined by one of its files.
clibs::testing::TestServer& the_server();

class PgPool : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { GORO_REQUIRE_SERVER(server_); }
  Options options(int max_open = 10) const {
    return Options{.conninfo = server_.address(), .max_open = max_open};
  }
  void run(std::function<void()> body) {
    goro::Config config;
    config.maxprocs = GetParam();
    goro::run(std::move(body), config);
  }
  // A table name of this test and P count, so runs at different P counts do not meet.
  std::string table(const char* base) const {
    return std::string(base) + "_" + std::to_string(GetParam());
  }
  clibs::testing::TestServer& server_ = the_server();
};

inline long long ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}

inline std::string procs_name(const ::testing::TestParamInfo<int>& p) {
  return std::to_string(p.param) + "P";
}

}  // namespace goro::pg::testing
