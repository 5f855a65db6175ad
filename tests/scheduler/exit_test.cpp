// goro::run returning as Go's main does, whatever the other goroutines are doing. A
// goroutine spinning in user code or sitting in goro::blocking holds the return for at
// most a grace period (100 ms); past it, its thread is abandoned: it goes on with the
// user code it is in (a loop, a blocking call) and stops for good at its next call into
// the runtime, and the next run works as if it had never existed.

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::seconds_since;
using goro_test::WithProcs;

#if defined(GORO_TSAN)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

// Reset by each test; read by goroutines that may outlive their run.
std::atomic<bool> stop_spinning{false};
std::atomic<bool> ran_after{false};
std::atomic<int> started{0};
std::atomic<bool> stretch_ended{false};
std::atomic<bool> main_returning{false};

void spin_until_told() {
  started.fetch_add(1);
  while (!stop_spinning.load(std::memory_order_relaxed)) {
  }
}

class Exit : public WithProcs {
 protected:
  void SetUp() override {
    stop_spinning = false;
    ran_after = false;
    started = 0;
    stretch_ended = false;
    main_returning = false;
  }
  void TearDown() override { stop_spinning = true; }

  // Waits, as a goroutine, until n goroutines have started.
  static void wait_started(int n) {
    while (started.load() < n) goro::sleep(100us);
  }
};

TEST_P(Exit, RunReturnsWhileGoroutinesSpin) {
  if (kTsan) GTEST_SKIP() << "TSan defers signals until the thread's next libc call, so a "
                             "pure loop is never preempted under TSan";
  const int spinners = GetParam() + 1;
  std::chrono::steady_clock::time_point main_returned;
  run([&] {
    for (int i = 0; i < spinners; ++i) {
      goro::go([] {
        spin_until_told();
        goro::yield();  // the runtime: an abandoned thread stops here
        ran_after = true;
      });
    }
    wait_started(spinners);
    main_returned = std::chrono::steady_clock::now();
  });
  const double took = seconds_since(main_returned);
  std::printf("[ measure  ] %d spinning goroutines, %d Ps: run returned %.1f ms after main\n",
              spinners, GetParam(), took * 1e3);
  EXPECT_LT(took, 1.0) << "run waited for the spinning goroutines";
  // The spinners stop spinning now; their goroutines must not run on.
  stop_spinning = true;
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran_after.load()) << "an abandoned goroutine went on after its loop";
}

TEST_P(Exit, RunReturnsWhileGoroutinesBlock) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int blockers = GetParam() + 1;
  std::chrono::steady_clock::time_point main_returned;
  run([&] {
    for (int i = 0; i < blockers; ++i) {
      goro::go([fd = fds[0]] {
        started.fetch_add(1);
        char c;
        goro::blocking([&] { return read(fd, &c, 1); });
        ran_after = true;
      });
    }
    wait_started(blockers);
    goro::sleep(20ms);  // into read()
    main_returned = std::chrono::steady_clock::now();
  });
  const double took = seconds_since(main_returned);
  std::printf("[ measure  ] %d goroutines in goro::blocking, %d Ps: run returned %.1f ms "
              "after main\n",
              blockers, GetParam(), took * 1e3);
  EXPECT_LT(took, 1.0) << "run waited for the blocking calls";
  // The calls return now; the goroutines that made them must not run on.
  char bytes[16] = {};
  ASSERT_EQ(write(fds[1], bytes, static_cast<std::size_t>(blockers)), blockers);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran_after.load()) << "an abandoned goroutine went on after its blocking call";
  // The read ends stay open: closing one races with the read() that returned on an
  // abandoned thread, which nothing orders with this one.
  close(fds[1]);
}

TEST_P(Exit, NextRunWorksBesideAbandonedThreads) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  run([&] {
    goro::go([fd = fds[0]] {
      started.fetch_add(1);
      char c;
      goro::blocking([&] { return read(fd, &c, 1); });
      ran_after = true;
    });
    if (!kTsan) goro::go(spin_until_told);
    wait_started(kTsan ? 1 : 2);
    goro::sleep(20ms);
  });
  // The abandoned threads come back while the next run is busy.
  int sum = 0;
  const int code = goro::run(
      [&] {
        stop_spinning = true;
        char c = 0;
        EXPECT_EQ(write(fds[1], &c, 1), 1);
        goro::WaitGroup wg;
        std::atomic<int> total{0};
        for (int i = 1; i <= 1000; ++i) {
          wg.add(1);
          goro::go([&, i] {
            goro::yield();
            total.fetch_add(i);
            wg.done();
          });
        }
        wg.wait();
        sum = total.load();
        return 7;
      },
      goro::Config{.maxprocs = GetParam()});
  EXPECT_EQ(code, 7);
  EXPECT_EQ(sum, 500500);
  EXPECT_FALSE(ran_after.load());
  close(fds[1]);
}

// A thread briefly outside the runtime when main returns (a connection's writer inside a
// TLS write, a short blocking call) finishes that stretch before run returns: after
// run, the caller's exit frees what such code uses (static destructors, OpenSSL's
// atexit cleanup). The goroutine itself still stops at the runtime, as Go's would.
TEST_P(Exit, ABriefBlockingCallEndsBeforeRunReturns) {
  std::chrono::steady_clock::time_point main_returned;
  run([&] {
    goro::go([] {
      goro::blocking([] {
        started.fetch_add(1);
        // The call outlasts main by 20 ms whatever the machine's load: a fixed sleep
        // could end before a slow main returned, and its goroutine rightly run on.
        while (!main_returning.load()) usleep(100);
        usleep(20'000);
        stretch_ended = true;
      });
      ran_after = true;
    });
    wait_started(1);
    main_returned = std::chrono::steady_clock::now();
    main_returning = true;
  });
  const double took = seconds_since(main_returned);
  EXPECT_TRUE(stretch_ended.load()) << "run returned while a blocking call was running";
  EXPECT_LT(took, 1.0);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran_after.load()) << "the goroutine ran on after main returned";
}

TEST_P(Exit, ABriefStretchOfUserCodeEndsBeforeRunReturns) {
  if (kTsan) GTEST_SKIP() << "TSan defers signals until the thread's next libc call, so a "
                             "pure loop is never preempted under TSan";
  run([&] {
    goro::go([] {
      started.fetch_add(1);
      // User code with no runtime call until 20 ms after main returns: detached from
      // its P by the exit's preemption signal, it must still be let finish.
      while (!main_returning.load()) {
      }
      const auto until = std::chrono::steady_clock::now() + 20ms;
      while (std::chrono::steady_clock::now() < until) {
      }
      stretch_ended = true;
      goro::yield();
      ran_after = true;
    });
    wait_started(1);
    main_returning = true;
  });
  EXPECT_TRUE(stretch_ended.load()) << "run returned while a goroutine was in 20 ms of user code";
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran_after.load()) << "the goroutine ran on after main returned";
}

// The documented way to wait instead: a WaitGroup that main waits on.
TEST_P(Exit, MainThatWaitsSeesItsGoroutinesFinish) {
  std::atomic<int> finished{0};
  run([&] {
    goro::WaitGroup wg;
    for (int i = 0; i < 4; ++i) {
      wg.add(1);
      goro::go([&] {
        goro::blocking([] { usleep(20'000); });
        finished.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_EQ(finished.load(), 4);
}

INSTANTIATE_TEST_SUITE_P(Procs, Exit, ::testing::Values(1, 2, 4, 8), goro_test::procs_name);

}  // namespace
