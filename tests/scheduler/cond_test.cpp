// goro::Cond: signal wakes one waiter (the oldest), broadcast wakes all, and a
// producer/consumer queue built on it loses no wake-up.

#include <goro/scheduler/cond.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <vector>

#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::seconds_since;
using goro_test::WithProcs;

class CondTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(CondTest);

// Waits (with a deadline) until `value` reaches `want`.
bool eventually(const std::atomic<int>& value, int want) {
  const auto start = std::chrono::steady_clock::now();
  while (value.load() < want) {
    if (seconds_since(start) > 10) return false;
    goro::sleep(1ms);
  }
  return true;
}

TEST_P(CondTest, SignalWakesOneWaiterAtATime) {
  run([] {
    constexpr int n = 4;
    goro::Mutex mu;
    goro::Cond cond;
    int parked = 0;  // guarded by mu
    std::atomic<int> woken{0};
    goro::WaitGroup wg;
    for (int i = 0; i < n; ++i) {
      wg.add(1);
      goro::go([&] {
        std::unique_lock lock(mu);
        ++parked;
        cond.wait(lock);
        woken.fetch_add(1);
        wg.done();
      });
    }
    for (;;) {  // until every waiter is inside wait()
      std::unique_lock lock(mu);
      if (parked == n) break;
      lock.unlock();
      goro::sleep(1ms);
    }
    for (int k = 1; k <= n; ++k) {
      cond.signal();
      ASSERT_TRUE(eventually(woken, k));
      goro::sleep(10ms);
      EXPECT_EQ(woken.load(), k) << "signal woke more than one waiter";
    }
    wg.wait();
    cond.signal();  // nobody waits: a no-op
  });
}

TEST_P(CondTest, SignalWakesTheOldestWaiter) {
  run([] {
    goro::Mutex mu;
    goro::Cond cond;
    std::vector<int> order;  // guarded by mu
    goro::WaitGroup wg;
    for (int i = 0; i < 3; ++i) {
      wg.add(1);
      bool started = false;  // guarded by mu: waiter i is inside wait()
      goro::go([&, i] {
        std::unique_lock lock(mu);
        started = true;
        cond.wait(lock);
        order.push_back(i);
        wg.done();
      });
      for (;;) {
        std::unique_lock lock(mu);
        if (started) break;
        lock.unlock();
        goro::sleep(1ms);
      }
    }
    for (int i = 0; i < 3; ++i) {
      cond.signal();
      goro::sleep(5ms);
    }
    wg.wait();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  });
}

TEST_P(CondTest, BroadcastWakesEveryWaiter) {
  run([] {
    constexpr int n = 32;
    goro::Mutex mu;
    goro::Cond cond;
    bool go_ahead = false;  // guarded by mu
    std::atomic<int> woken{0};
    goro::WaitGroup wg;
    for (int i = 0; i < n; ++i) {
      wg.add(1);
      goro::go([&] {
        std::unique_lock lock(mu);
        cond.wait(lock, [&] { return go_ahead; });
        woken.fetch_add(1);
        wg.done();
      });
    }
    goro::sleep(20ms);
    EXPECT_EQ(woken.load(), 0);
    {
      std::lock_guard guard(mu);
      go_ahead = true;
    }
    cond.broadcast();
    wg.wait();
    EXPECT_EQ(woken.load(), n);
  });
}

TEST_P(CondTest, ProducerConsumerQueueLosesNoWakeup) {
  run([] {
    constexpr int producers = 4;
    constexpr int consumers = 4;
    constexpr int per_producer = 50000;
    goro::Mutex mu;
    goro::Cond not_empty;
    goro::Cond not_full;
    std::deque<int> queue;  // guarded by mu; at most 8 items
    bool closed = false;    // guarded by mu
    std::atomic<long> sum{0};
    goro::WaitGroup producing;
    goro::WaitGroup consuming;
    for (int p = 0; p < producers; ++p) {
      producing.add(1);
      goro::go([&, p] {
        for (int i = 0; i < per_producer; ++i) {
          std::unique_lock lock(mu);
          not_full.wait(lock, [&] { return queue.size() < 8; });
          queue.push_back(p * per_producer + i);
          not_empty.signal();
        }
        producing.done();
      });
    }
    for (int c = 0; c < consumers; ++c) {
      consuming.add(1);
      goro::go([&] {
        for (;;) {
          std::unique_lock lock(mu);
          not_empty.wait(lock, [&] { return !queue.empty() || closed; });
          if (queue.empty()) break;
          sum.fetch_add(queue.front(), std::memory_order_relaxed);
          queue.pop_front();
          not_full.signal();
        }
        consuming.done();
      });
    }
    producing.wait();
    {
      std::lock_guard guard(mu);
      closed = true;
    }
    not_empty.broadcast();
    consuming.wait();
    const long n = producers * per_producer;
    EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  });
}

TEST_P(CondTest, WaitAcceptsTheMutexItself) {
  run([] {
    goro::Mutex mu;
    goro::Cond cond;
    bool ready = false;  // guarded by mu
    goro::go([&] {
      goro::sleep(5ms);
      mu.lock();
      ready = true;
      mu.unlock();
      cond.broadcast();
    });
    mu.lock();
    cond.wait(mu, [&] { return ready; });
    EXPECT_TRUE(ready);
    mu.unlock();
  });
}

}  // namespace
