// goro::Once: one run however many goroutines call, callers wait for it to finish, and
// a throwing function leaves the Once not done.

#include <goro/scheduler/once.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

class OnceTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(OnceTest);

TEST_P(OnceTest, ConcurrentCallersRunItOnceAndWaitForIt) {
  run([] {
    constexpr int callers = 32;
    goro::Once once;
    std::atomic<int> runs{0};
    int value = 0;  // written by the function, read after call() returns
    std::atomic<int> saw_value{0};
    goro::WaitGroup wg;
    for (int i = 0; i < callers; ++i) {
      wg.add(1);
      goro::go([&] {
        once.call([&] {
          runs.fetch_add(1);
          goro::sleep(20ms);  // the others must park until this returns
          value = 42;
        });
        if (value == 42) saw_value.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(saw_value.load(), callers);
    EXPECT_TRUE(once.done());
  });
}

TEST_P(OnceTest, ThrowingFunctionLeavesItNotDone) {
  run([] {
    goro::Once once;
    EXPECT_THROW(once.call([] { throw std::runtime_error("boom"); }), std::runtime_error);
    EXPECT_FALSE(once.done());
    int runs = 0;
    once.call([&] { ++runs; });
    once.call([&] { ++runs; });
    EXPECT_EQ(runs, 1);
    EXPECT_TRUE(once.done());
  });
}

TEST_P(OnceTest, ManyOncesRacedByManyCallers) {
  run([] {
    constexpr int rounds = 20000;
    constexpr int callers = 8;
    int failures = 0;
    for (int round = 0; round < rounds; ++round) {
      goro::Once once;
      std::atomic<int> runs{0};
      int value = 0;
      std::atomic<int> saw_value{0};
      goro::WaitGroup wg;
      wg.add(callers);
      for (int i = 0; i < callers; ++i) {
        goro::go([&] {
          once.call([&] {
            runs.fetch_add(1);
            value = 7;
          });
          if (value == 7) saw_value.fetch_add(1);
          wg.done();
        });
      }
      wg.wait();
      if (runs.load() != 1 || saw_value.load() != callers) ++failures;
    }
    EXPECT_EQ(failures, 0);
  });
}

}  // namespace
