// goro::ThreadLocal: a goroutine that parks and resumes on another thread reads that
// thread's value, not the one it read before the park; a goroutine that tries to park
// inside a scope ends the process with a message that says so.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/thread_local.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

long this_thread_id() { return syscall(SYS_gettid); }

// Each thread's value starts as the id of the thread that made it.
goro::ThreadLocal made_on = [] { return this_thread_id(); };

class ThreadLocalOnGoroutines : public WithProcs {};
GORO_INSTANTIATE_PROCS(ThreadLocalOnGoroutines);

// 64 goroutines in pairs pass a token back and forth (on several Ps a readied goroutine
// often resumes on another thread) and read the value before and after every exchange:
// each read is the reading thread's own.
TEST_P(ThreadLocalOnGoroutines, ValueAfterAParkIsTheNewThreads) {
  std::atomic<int> wrong{0}, moved{0};
  auto run_once = [&] {
    run([&] {
      goro::WaitGroup wg;
      for (int pair = 0; pair < 32; ++pair) {
        goro::Chan<int> ping, pong;
        for (int side = 0; side < 2; ++side) {
          wg.add(1);
          goro::go([side, ping, pong, &wg, &wrong, &moved] {
            for (int round = 0; round < 50; ++round) {
              const long before = *made_on.use();
              if (before != this_thread_id()) wrong.fetch_add(1);
              if (side == 0) {
                ping.send(round);
                pong.recv();
              } else {
                ping.recv();
                pong.send(round);
              }
              if (round % 10 == 0) goro::sleep(20us);
              const long after = *made_on.use();
              if (after != this_thread_id()) wrong.fetch_add(1);
              if (after != before) moved.fetch_add(1);
            }
            wg.done();
          });
        }
      }
      wg.wait();
    });
  };
  run_once();
  // Whether a goroutine changes threads is the scheduler's choice: try again, a bounded
  // number of times, until one did.
  for (int attempt = 1; attempt < 50 && GetParam() > 1 && moved.load() == 0; ++attempt) run_once();
  EXPECT_EQ(wrong.load(), 0);
  if (GetParam() > 1) {
    EXPECT_GT(moved.load(), 0) << "no goroutine changed threads: nothing tested";
  }
}

// Off a goroutine use() is the calling thread's: two threads do not share it.
TEST(ThreadLocalOffGoroutine, PlainThreadsHaveTheirOwn) {
  static goro::ThreadLocal counter = [] { return 0; };
  int seen_a = 0, seen_b = 0;
  std::thread a([&] {
    for (int i = 0; i < 10; ++i) ++*counter.use();
    std::this_thread::sleep_for(10ms);
    seen_a = *counter.use();
  });
  std::thread b([&] {
    ++*counter.use();
    std::this_thread::sleep_for(10ms);
    seen_b = *counter.use();
  });
  a.join();
  b.join();
  EXPECT_EQ(seen_a, 10);
  EXPECT_EQ(seen_b, 1);
}

goro::ThreadLocal scratch = [] { return 0; };

// Parking, or any runtime call, with a scope open would leave the thread's state to the
// next goroutine on the thread mid-edit: the runtime refuses, loudly.
TEST(ThreadLocalDeathTest, ParkingInsideAScopeIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(goro::run([] {
                 auto s = scratch.use();
                 goro::sleep(1ms);
               }),
               "goroutine [0-9]+: a runtime call inside a goro::ThreadLocal scope");
  EXPECT_DEATH(goro::run([] {
                 goro::Chan<int> ch(1);
                 auto s = scratch.use();
                 ch.send(1);
               }),
               "inside a goro::ThreadLocal scope");
  // A Context ending is a runtime call too: what a destructor inside a scope may do.
  EXPECT_DEATH(goro::run([] {
                 auto [ctx, cancel] = goro::with_cancel(goro::background());
                 auto s = scratch.use();
                 cancel();
               }),
               "inside a goro::ThreadLocal scope");
}

// A scope closed before the park leaves nothing behind: the park that would be fatal
// inside it (above) goes through. (What the value reads after the park depends on the
// thread the goroutine resumed on, so the test does not look at it.)
TEST(ThreadLocalScope, ClosedScopeAllowsParking) {
  bool finished = false;
  goro::run([&] {
    {
      auto s = scratch.use();
      ++*s;
    }
    goro::sleep(1ms);
    goro::Chan<int> ch(1);
    ch.send(1);
    finished = ch.recv().value_or(0) == 1;
  });
  EXPECT_TRUE(finished);
}

}  // namespace
