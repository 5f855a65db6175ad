// Shared helpers for the tests of goro's synchronisation primitives: every test body
// runs inside goro::run with 1, 2, 4 and 8 Ps (the test parameter).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>

namespace goro_test {

// A test fixture whose parameter is the number of Ps.
class WithProcs : public ::testing::TestWithParam<int> {
 protected:
  // Runs fn as the main goroutine of a runtime with GetParam() Ps.
  void run(std::function<void()> fn) {
    goro::run(std::move(fn), goro::Config{.maxprocs = GetParam()});
  }
};

inline std::string procs_name(const ::testing::TestParamInfo<int>& info) {
  return "P" + std::to_string(info.param);
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace goro_test

#define GORO_INSTANTIATE_PROCS(Suite) \
  INSTANTIATE_TEST_SUITE_P(Procs, Suite, ::testing::Values(1, 2, 4, 8), goro_test::procs_name)
