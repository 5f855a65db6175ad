// goro::Mutex: mutual exclusion under contention, try_lock, standard lock adaptors,
// parking instead of blocking the thread, starvation mode, and the fatal misuse.

#include <goro/scheduler/mutex.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::seconds_since;
using goro_test::WithProcs;

class MutexTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(MutexTest);

TEST_P(MutexTest, MutualExclusionUnderContention) {
  run([] {
    constexpr int workers = 16;
    constexpr int iterations = 200000;
    goro::Mutex mu;
    long counter = 0;  // plain: only the mutex protects it
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    goro::WaitGroup wg;
    for (int w = 0; w < workers; ++w) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < iterations; ++i) {
          std::lock_guard<goro::Mutex> guard(mu);
          if (inside.fetch_add(1, std::memory_order_relaxed) != 0)
            overlaps.fetch_add(1, std::memory_order_relaxed);
          ++counter;
          // Now and then hold the lock across a park, so waiters pile up.
          if (i % 10000 == 0) goro::yield();
          inside.fetch_sub(1, std::memory_order_relaxed);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(counter, static_cast<long>(workers) * iterations);
    EXPECT_EQ(overlaps.load(), 0);
  });
}

TEST_P(MutexTest, TryLock) {
  run([] {
    goro::Mutex mu;
    EXPECT_TRUE(mu.try_lock());
    EXPECT_FALSE(mu.try_lock());
    goro::Chan<bool> other(1);
    goro::go([&mu, other]() mutable { other.send(mu.try_lock()); });
    EXPECT_EQ(other.recv(), false);
    mu.unlock();
    EXPECT_TRUE(mu.try_lock());
    mu.unlock();
  });
}

TEST_P(MutexTest, WorksWithStandardLockTypes) {
  run([] {
    goro::Mutex a;
    goro::Mutex b;
    {
      std::unique_lock<goro::Mutex> lock(a);
      EXPECT_TRUE(lock.owns_lock());
      lock.unlock();
      EXPECT_TRUE(lock.try_lock());
    }
    {
      std::scoped_lock both(a, b);
      EXPECT_FALSE(a.try_lock());
      EXPECT_FALSE(b.try_lock());
    }
    EXPECT_TRUE(a.try_lock());
    a.unlock();
  });
}

// A goroutine waiting for the mutex parks: the other goroutines keep running on the
// same thread, even with a single P.
TEST_P(MutexTest, WaitingParksInsteadOfBlockingTheThread) {
  run([] {
    goro::Mutex mu;
    std::atomic<bool> waiter_got_it{false};
    std::atomic<int> progress{0};
    mu.lock();
    goro::WaitGroup wg;
    wg.add(2);
    goro::go([&] {
      mu.lock();
      waiter_got_it.store(true);
      mu.unlock();
      wg.done();
    });
    goro::go([&] {
      for (int i = 0; i < 10; ++i) {
        progress.fetch_add(1);
        goro::sleep(1ms);
      }
      wg.done();
    });
    const auto start = std::chrono::steady_clock::now();
    while (progress.load() < 10 && seconds_since(start) < 10) goro::sleep(1ms);
    EXPECT_EQ(progress.load(), 10);
    EXPECT_FALSE(waiter_got_it.load());
    mu.unlock();
    wg.wait();
    EXPECT_TRUE(waiter_got_it.load());
  });
}

// Go's TestMutexFairness: a goroutine that keeps re-locking (and holds the mutex most of
// the time) cannot keep another from getting it; starvation mode hands it over.
TEST_P(MutexTest, RelockingGoroutineCannotStarveAWaiter) {
  run([] {
    goro::Mutex mu;
    std::atomic<bool> stop{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        mu.lock();
        goro::sleep(100us);
        mu.unlock();
      }
      wg.done();
    });
    goro::Chan<double> took(1);
    goro::go([&mu, took]() mutable {
      double worst = 0;
      for (int i = 0; i < 10; ++i) {
        goro::sleep(100us);
        const auto start = std::chrono::steady_clock::now();
        mu.lock();
        worst = std::max(worst, seconds_since(start));
        mu.unlock();
      }
      took.send(worst);
    });
    std::optional<double> worst;
    const int fired = goro::select(goro::recv_case(took, worst), goro::timeout_case(10s));
    stop.store(true);
    wg.wait();
    ASSERT_EQ(fired, 0) << "the waiter could not get the mutex within 10 s";
    EXPECT_LT(*worst, 2.0) << "slowest acquisition, seconds";
  });
}

// The same with a holder that spins instead of parking inside the critical section.
TEST_P(MutexTest, BusyRelockingGoroutineCannotStarveAWaiter) {
  run([] {
    goro::Mutex mu;
    std::atomic<bool> stop{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        std::lock_guard<goro::Mutex> guard(mu);
        const auto start = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - start < 20us) {
        }
      }
      wg.done();
    });
    goro::sleep(1ms);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
      mu.lock();
      mu.unlock();
    }
    const double took = seconds_since(start);
    stop.store(true);
    wg.wait();
    EXPECT_LT(took, 5.0);
  });
}

TEST(MutexDeathTest, UnlockOfUnlockedMutexAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  goro::Mutex mu;
  EXPECT_DEATH(mu.unlock(), "fatal error: sync: unlock of unlocked mutex");
}

}  // namespace
