// goro::WaitGroup: waiting for many goroutines, several waiters, reuse, and the fatal
// negative counter.

#include <goro/scheduler/waitgroup.hpp>

#include <atomic>
#include <chrono>
#include <vector>

#include <goro/scheduler/runtime.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

class WaitGroupTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(WaitGroupTest);

TEST_P(WaitGroupTest, WaitReturnsAfterEveryDone) {
  run([] {
    constexpr int n = 100;
    std::vector<int> finished(n, 0);  // plain ints: wait() must publish them
    goro::WaitGroup wg;
    wg.add(n);
    for (int i = 0; i < n; ++i) {
      goro::go([&, i] {
        goro::sleep(std::chrono::microseconds(100 * (i % 10)));
        finished[i] = 1;
        wg.done();
      });
    }
    wg.wait();
    for (int i = 0; i < n; ++i) EXPECT_EQ(finished[i], 1) << i;
  });
}

TEST_P(WaitGroupTest, WaitOnZeroReturnsAtOnce) {
  run([] {
    goro::WaitGroup wg;
    wg.wait();
    wg.add(2);
    wg.add(-2);
    wg.wait();
  });
}

TEST_P(WaitGroupTest, ReleasesEveryWaiter) {
  run([] {
    constexpr int waiters = 10;
    goro::WaitGroup gate;
    goro::WaitGroup waiting;
    std::atomic<int> released{0};
    gate.add(1);
    waiting.add(waiters);
    for (int i = 0; i < waiters; ++i) {
      goro::go([&] {
        gate.wait();
        released.fetch_add(1);
        waiting.done();
      });
    }
    goro::sleep(20ms);
    EXPECT_EQ(released.load(), 0);
    gate.done();
    waiting.wait();
    EXPECT_EQ(released.load(), waiters);
  });
}

TEST_P(WaitGroupTest, ReusableAcrossRounds) {
  run([] {
    goro::WaitGroup wg;
    std::atomic<int> total{0};
    for (int round = 0; round < 2000; ++round) {
      wg.add(8);
      for (int i = 0; i < 8; ++i) {
        goro::go([&] {
          total.fetch_add(1, std::memory_order_relaxed);
          wg.done();
        });
      }
      wg.wait();
      ASSERT_EQ(total.load(), (round + 1) * 8);
    }
  });
}

TEST(WaitGroupDeathTest, NegativeCounterAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  goro::WaitGroup wg;
  EXPECT_DEATH(wg.done(), "fatal error: sync: negative WaitGroup counter");
}

}  // namespace
