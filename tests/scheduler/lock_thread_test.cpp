// lock_os_thread: a wired goroutine stays on its thread across parks, yields, blocking
// calls and preemption; its thread runs no other goroutine meanwhile; the lock nests;
// and a goroutine that returns wired ends its thread.

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

// The kernel's id of the calling thread. Not pthread_self(): glibc declares it const,
// so the compiler may reuse a value read before a park, on another thread.
long tid() { return syscall(SYS_gettid); }

class LockThread : public WithProcs {};

TEST_P(LockThread, WiredGoroutineStaysOnItsThreadAndItsThreadRunsNoOther) {
  run([] {
    std::atomic<bool> wired_done{false};
    std::atomic<long> wired_tid{0};
    std::atomic<int> moved{0};
    std::atomic<int> intruders{0};
    std::atomic<long> others_ran{0};
    goro::WaitGroup wg;
    goro::Chan<int> ping, pong;

    wg.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      wired_tid = tid();
      for (int i = 0; i < 300; ++i) {
        switch (i % 4) {
          case 0: goro::sleep(100us); break;
          case 1: goro::yield(); break;
          case 2:
            ping.send(i);
            pong.recv();
            break;
          case 3: goro::blocking([] { usleep(50); }); break;
        }
        if (tid() != wired_tid.load()) moved.fetch_add(1);
      }
      wired_done = true;
      goro::unlock_os_thread();
      wg.done();
    });
    // The wired goroutine's partner, and goroutines that run everywhere meanwhile.
    wg.add(1);
    goro::go([&] {
      for (int i = 0; i < 75; ++i) {
        ping.recv();
        pong.send(i);
      }
      wg.done();
    });
    const int others = 4 * GetParam();
    for (int k = 0; k < others; ++k) {
      wg.add(1);
      goro::go([&] {
        while (!wired_done.load()) {
          const long w = wired_tid.load();
          if (w != 0 && tid() == w && !wired_done.load()) intruders.fetch_add(1);
          others_ran.fetch_add(1);
          if (others_ran.load() % 3 == 0) {
            goro::sleep(50us);
          } else {
            goro::yield();
          }
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(moved.load(), 0) << "the wired goroutine ran on another thread";
    EXPECT_EQ(intruders.load(), 0) << "another goroutine ran on the wired thread";
    EXPECT_GT(others_ran.load(), 0);
  });
}

TEST_P(LockThread, LockNestsAndUnlockLetsTheThreadServeOthers) {
  run([] {
    goro::WaitGroup wg;
    std::atomic<int> moved{0};
    wg.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      {
        goro::OsThreadLock inner;  // depth 2
      }
      // Still wired after the inner unlock.
      const long t = tid();
      for (int i = 0; i < 100; ++i) {
        goro::sleep(50us);
        if (tid() != t) moved.fetch_add(1);
      }
      goro::unlock_os_thread();
      goro::unlock_os_thread();  // one too many: ignored
      wg.done();
    });
    wg.wait();
    EXPECT_EQ(moved.load(), 0);
    // After the unlock every thread serves everyone: goroutines keep finishing.
    std::atomic<int> done{0};
    for (int i = 0; i < 200; ++i) {
      wg.add(1);
      goro::go([&] {
        goro::yield();
        done.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(done.load(), 200);
  });
}

TEST_P(LockThread, GoroutineReturningWiredEndsItsThread) {
  run([] {
    std::atomic<long> t{0};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      goro::sleep(1ms);  // so the thread has also waited wired once
      t = tid();
      wg.done();
    });
    wg.wait();
    const std::string task = "/proc/self/task/" + std::to_string(t.load());
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (std::filesystem::exists(task) && std::chrono::steady_clock::now() < until)
      goro::sleep(1ms);
    EXPECT_FALSE(std::filesystem::exists(task)) << "the wired goroutine's thread lives on";
    // The runtime goes on without it.
    std::atomic<int> done{0};
    for (int i = 0; i < 100; ++i) {
      wg.add(1);
      goro::go([&] {
        goro::sleep(100us);
        done.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(done.load(), 100);
  });
}

TEST_P(LockThread, ManyWiredGoroutinesPingPong) {
  // Every exchange between two wired goroutines crosses threads: each waits on its own.
  run([] {
    constexpr int kPairs = 4;
    constexpr int kRounds = 200;
    goro::WaitGroup wg;
    std::atomic<int> moved{0};
    for (int p = 0; p < kPairs; ++p) {
      auto a = std::make_shared<goro::Chan<int>>();
      auto b = std::make_shared<goro::Chan<int>>();
      for (int side = 0; side < 2; ++side) {
        wg.add(1);
        goro::go([&, a, b, side] {
          goro::OsThreadLock lock;
          const long t = tid();
          for (int i = 0; i < kRounds; ++i) {
            if (side == 0) {
              a->send(i);
              b->recv();
            } else {
              a->recv();
              b->send(i);
            }
          }
          if (tid() != t) moved.fetch_add(1);
          wg.done();
        });
      }
    }
    wg.wait();
    EXPECT_EQ(moved.load(), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, LockThread, ::testing::Values(1, 2, 4, 8), goro_test::procs_name);

}  // namespace
