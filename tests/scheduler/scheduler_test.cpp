// The scheduler's mechanisms, each shown happening: runnext locality, the 1-in-61
// global check, batch takes from the global queue, ring overflow, stealing, bounded
// spinning, an idle runtime at ~0% CPU, no lost wake-ups, timers, stack overflow
// detection, uncaught exceptions, a million parked goroutines, schedtrace, maxprocs.

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/detail/introspect.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sync_test_util.hpp"

using namespace std::chrono_literals;
using goro_test::WithProcs;

namespace {

#if defined(GORO_ASAN) || defined(GORO_TSAN)
constexpr int kScale = 10;  // sanitizers are 5-20x slower; keep tests within bounds
#else
constexpr int kScale = 1;
#endif

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void spin_for(std::chrono::nanoseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

std::uint64_t sum_stat(std::uint64_t goro::detail::ProcStats::*field) {
  std::uint64_t n = 0;
  for (const auto& s : goro::detail::proc_stats()) n += s.*field;
  return n;
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

}  // namespace

class Scheduler : public WithProcs {};
GORO_INSTANTIATE_PROCS(Scheduler);

// run() returns main's result, and goroutine ids are distinct and positive.
TEST_P(Scheduler, RunReturnsMainResultAndIdsAreUnique) {
  int rc = goro::run(
      [] {
        EXPECT_EQ(goro::goid(), 1u);
        goro::Chan<std::uint64_t> ids(100);
        for (int i = 0; i < 100; ++i) goro::go([ids]() mutable { ids.send(goro::goid()); });
        std::set<std::uint64_t> seen;
        for (int i = 0; i < 100; ++i) seen.insert(*ids.recv());
        EXPECT_EQ(seen.size(), 100u);
        EXPECT_EQ(seen.count(1), 0u);
        return 42;
      },
      goro::Config{.maxprocs = GetParam()});
  EXPECT_EQ(rc, 42);
  EXPECT_EQ(goro::goid(), 0u);  // not on a goroutine
}

// goro::run can run again after it returned (every test binary does; so may a program
// that runs the runtime in phases). The stacks of an earlier run, its main goroutine's
// among them, were once left poisoned in ASan builds, and the next run's first stack
// at the same address failed there.
TEST_P(Scheduler, NumGoroutineCountsTheLivingOnes) {
  goro::run(
      [] {
        EXPECT_EQ(goro::num_goroutine(), 1);  // main
        goro::Chan<int> release;
        goro::WaitGroup done;
        for (int i = 0; i < 100; ++i) {
          done.add(1);
          goro::go([release, &done] {
            release.recv();
            done.done();
          });
        }
        EXPECT_EQ(goro::num_goroutine(), 101);
        release.close();
        done.wait();
        // done() runs just before each goroutine returns: wait for the last to exit.
        for (int i = 0; i < 1000 && goro::num_goroutine() != 1; ++i)
          goro::sleep(std::chrono::milliseconds(1));
        EXPECT_EQ(goro::num_goroutine(), 1);
      },
      goro::Config{.maxprocs = GetParam()});
}

TEST_P(Scheduler, StatsCountGoroutinesByState) {
  goro::run(
      [] {
        goro::Chan<int> release;
        goro::WaitGroup done;
        for (int i = 0; i < 50; ++i) {
          done.add(1);
          goro::go([release, &done] {
            release.recv();
            done.done();
          });
        }
        goro::sleep(std::chrono::milliseconds(20));
        goro::RuntimeStats s = goro::stats();
        EXPECT_EQ(s.procs, GetParam());
        EXPECT_GE(s.waiting, 50);
        EXPECT_GE(s.running, 1);  // this one
        EXPECT_EQ(s.goroutines, s.running + s.runnable + s.waiting + s.syscall);
        EXPECT_EQ(s.goroutines, goro::num_goroutine());
        EXPECT_GE(s.threads, 1);
        EXPECT_GT(s.goroutine_runs, 50u);
        release.close();
        done.wait();
      },
      goro::Config{.maxprocs = GetParam()});
  EXPECT_EQ(goro::stats().goroutines, 0) << "all zero once run returned";
}

// Starts n goroutines that each touch Touched bytes of their stack, then park until
// release is closed; parked counts them touching, done counts them leaving.
template <std::size_t Touched>
void start_stack_touchers(int n, goro::Chan<int> release, goro::WaitGroup& parked,
                          goro::WaitGroup& done) {
  for (int i = 0; i < n; ++i) {
    parked.add(1);
    done.add(1);
    goro::go([release, &parked, &done] {
      volatile char frame[Touched];
      for (std::size_t at = 0; at < Touched; at += 512) frame[at] = 1;
      parked.done();
      release.recv();
      done.done();
      (void)frame[0];
    });
  }
}

// Goroutines that touch 32 KiB of their stacks and park: the committed stack memory
// grows by at least that much each, and the reserved by a stack each.
TEST_P(Scheduler, StatsCountStackMemory) {
  constexpr int kGoroutines = 64;
  constexpr std::size_t kTouched = 32 * 1024;
  goro::run(
      [] {
        const goro::RuntimeStats before = goro::stats();
        goro::Chan<int> release;
        goro::WaitGroup parked, done;
        start_stack_touchers<kTouched>(kGoroutines, release, parked, done);
        parked.wait();
        const goro::RuntimeStats s = goro::stats();
        EXPECT_GE(s.stack_committed_bytes, before.stack_committed_bytes + kGoroutines * kTouched);
        EXPECT_GE(s.stack_reserved_bytes, before.stack_reserved_bytes + kGoroutines * kTouched);
        EXPECT_LE(s.stack_committed_bytes, s.stack_reserved_bytes);
        release.close();
        done.wait();
      },
      goro::Config{.maxprocs = GetParam()});
}

// Thousands of goroutines that touched 32 KiB of stack each exit at once (as keep-alive
// connections going idle do). Their stacks stay cached for the next spawns, until
// return_freed_memory_soon: 250 ms later the free lists keep a few hundred stacks and
// the rest go back to the kernel.
TEST_P(Scheduler, ExitedGoroutinesGiveTheirStacksBackWhenAsked) {
  constexpr int kGoroutines = 4000;
  constexpr std::size_t kTouched = 32 * 1024;
  // What the free lists may keep: 63 per P and 64 more, each with what it touched.
  const std::size_t kept = static_cast<std::size_t>(64 * GetParam() + 64) * (kTouched + 16 * 1024);
  std::size_t before = 0, peak = 0, exited = 0, after = 0;
  goro::run(
      [&] {
        before = goro::stats().stack_committed_bytes;
        goro::Chan<int> release;
        goro::WaitGroup parked, done;
        start_stack_touchers<kTouched>(kGoroutines, release, parked, done);
        parked.wait();
        peak = goro::stats().stack_committed_bytes;
        release.close();
        done.wait();
        goro::sleep(std::chrono::milliseconds(20));  // the last ones finish exiting
        exited = goro::stats().stack_committed_bytes;
        goro::return_freed_memory_soon();
        goro::sleep(std::chrono::milliseconds(1000));
        // Released in batches between yields: slower under the sanitizers.
        for (int i = 0; i < 50; ++i) {
          after = goro::stats().stack_committed_bytes;
          if (after <= before + kept) break;
          goro::sleep(std::chrono::milliseconds(100));
        }
      },
      goro::Config{.maxprocs = GetParam()});
  std::printf("[figure] stack memory committed: %zu KiB before, %zu KiB with %d goroutines, "
              "%zu KiB once they exited, %zu KiB after return_freed_memory_soon "
              "(%d P)\n",
              before >> 10, peak >> 10, kGoroutines, exited >> 10, after >> 10, GetParam());
  EXPECT_GE(peak, before + kGoroutines * kTouched);
  EXPECT_GE(exited, before + kGoroutines * kTouched) << "exited goroutines' stacks stay cached";
  EXPECT_LE(after, before + kept);
}

TEST_P(Scheduler, RunsAgainInTheSameProcess) {
  for (int round = 0; round < 4; ++round) {
    std::atomic<int> sum{0};
    int rc = goro::run(
        [&] {
          goro::WaitGroup wg;
          for (int i = 1; i <= 64; ++i) {
            wg.add(1);
            goro::go([&sum, &wg, i] {
              char scratch[256];
              std::memset(scratch, i, sizeof scratch);
              goro::yield();
              sum.fetch_add(scratch[i % sizeof scratch]);
              wg.done();
            });
          }
          {
            char local[128];  // a scope that ends before main does
            std::memset(local, 0, sizeof local);
            goro::yield();
            sum.fetch_add(local[0]);
          }
          wg.wait();
          return round;
        },
        goro::Config{.maxprocs = GetParam()});
    EXPECT_EQ(rc, round);
    EXPECT_EQ(sum.load(), 64 * 65 / 2) << "round " << round;
  }
}

// A ping-pong pair readies each other into runnext: it stays on one P and inherits
// the time slice instead of bouncing between Ps.
TEST_P(Scheduler, RunnextKeepsPingPongPairOnOneP) {
  run([] {
    const int rounds = 20000 / kScale;
    goro::Chan<int> ping, pong;
    std::atomic<int> same_p{0};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&, ping, pong]() mutable {
      for (int i = 0; i < rounds; ++i) {
        int p = goro::detail::current_p();
        ping.send(p);
        pong.recv();
      }
      wg.done();
    });
    auto before = sum_stat(&goro::detail::ProcStats::runnext_runs);
    for (int i = 0; i < rounds; ++i) {
      int their_p = *ping.recv();
      if (their_p == goro::detail::current_p()) same_p++;
      pong.send(0);
    }
    wg.wait();
    auto runnext = sum_stat(&goro::detail::ProcStats::runnext_runs) - before;
    // Each round trip wakes the partner twice; nearly all of them via runnext.
    EXPECT_GE(runnext, static_cast<std::uint64_t>(rounds) * 2 * 8 / 10);
    EXPECT_GE(same_p.load(), rounds * 8 / 10);
  });
}

// With 1 P whose local queue never drains (workers keep yielding to its tail), a G on
// the global queue still runs within about 61 schedules, not after the workers. The
// workers yield until that G has run (or a cap far beyond 61 schedules, or 5 s, is
// reached), so an outsider thread that the OS starts late cannot find them finished.
TEST(SchedulerFairness, GlobalQueueServedEvery61Ticks) {
  goro::run(
      [] {
        const int workers = 100;
        const long cap = 2'000'000 / kScale;  // schedules
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        std::atomic<long> schedules{0};
        std::atomic<long> injected_at{-1}, ran_at{-1};
        goro::WaitGroup wg;
        wg.add(workers);
        for (int w = 0; w < workers; ++w) {
          goro::go([&] {
            while (ran_at.load() < 0 && schedules.load() < cap) {
              if ((schedules.fetch_add(1) & 1023) == 0 &&
                  std::chrono::steady_clock::now() > deadline)
                break;
              goro::yield();
            }
            wg.done();
          });
        }
        // go() from a thread that is not running a goroutine lands on the global queue.
        std::thread outsider([&] {
          while (schedules.load() < 5000 / kScale) std::this_thread::yield();
          goro::go([&] { ran_at = schedules.load(); });
          injected_at = schedules.load();  // after go(): creating the G takes a while
        });
        wg.wait();
        outsider.join();
        // Sleep, not yield: with the local queue empty the P takes the global G anyway.
        while (ran_at.load() < 0) goro::sleep(std::chrono::milliseconds(1));
        EXPECT_LT(ran_at.load(), cap) << "the global G waited for the local queue to drain";
        EXPECT_LT(std::chrono::steady_clock::now(), deadline) << "the global G waited 5 s";
        EXPECT_LE(ran_at.load() - injected_at.load(), 3 * 61) << "not served by the 1-in-61 check";
        EXPECT_GE(sum_stat(&goro::detail::ProcStats::global_fair), 1u);
      },
      goro::Config{.maxprocs = 1});
}

// Gs readied from outside the runtime wait on the global queue; an idle P takes them in
// a batch of min(len/GOMAXPROCS + 1, len, 128) instead of one lock round trip each.
TEST_P(Scheduler, GlobalQueueIsTakenInBatches) {
  run([] {
    const int n = 1000;
    std::atomic<int> ran{0};
    goro::Chan<int> done;
    std::thread outsider([&] {
      for (int i = 0; i < n; ++i)
        goro::go([&, done]() mutable {
          if (ran.fetch_add(1) + 1 == n) done.send(1);
        });
    });
    outsider.join();
    done.recv();
    auto batches = sum_stat(&goro::detail::ProcStats::global_batches);
    auto moved = sum_stat(&goro::detail::ProcStats::global_batch_gs);
    EXPECT_GE(batches, 1u);
    EXPECT_LE(moved, batches * 128);  // never more than 128 in one batch
    EXPECT_GE(moved, batches * 2);    // a batch is more than one G
  });
}

// Spawning more than 256 Gs without yielding overflows the ring: half of it moves to
// the global queue in one batch, and every G still runs.
TEST(SchedulerOverflow, FullRingMovesHalfToGlobalQueue) {
  goro::run(
      [] {
        const int n = 1000;
        std::atomic<int> ran{0};
        for (int i = 0; i < n; ++i) goro::go([&] { ran++; });
        // Sysmon preempts the spawner after 10 ms (sanitizer builds, a loaded machine),
        // after which the queued Gs run; 257 spawns in a row still overflow the ring.
        if (kScale == 1) {
          EXPECT_GE(sum_stat(&goro::detail::ProcStats::overflows), 1u);
        }
        EXPECT_LE(goro::detail::local_runq_size(), 257u);
        while (ran.load() < n) goro::yield();
      },
      goro::Config{.maxprocs = 1});
}

// Gs spawned on one busy P are stolen and run by the idle ones.
TEST_P(Scheduler, IdlePsStealFromABusyOne) {
  if (GetParam() == 1) GTEST_SKIP() << "stealing needs a second P";
  run([] {
    const int n = 64;
    std::vector<int> where(n, -1);
    goro::WaitGroup wg;
    wg.add(n);
    for (int i = 0; i < n; ++i)
      goro::go([&, i] {
        spin_for(2ms);
        where[i] = goro::detail::current_p();
        wg.done();
      });
    wg.wait();
    std::set<int> ps(where.begin(), where.end());
    EXPECT_GE(ps.size(), 2u) << "all Gs ran on the spawning P";
    EXPECT_GE(sum_stat(&goro::detail::ProcStats::steals), 1u);
  });
}

// While Gs keep waking each other, spinning Ms stay bounded by half the busy Ps
// (at least one may spin), and once everything is idle the runtime burns ~0% CPU.
TEST_P(Scheduler, SpinningIsBoundedAndIdleCostsNothing) {
  run([] {
    const int procs = GetParam();
    std::atomic<bool> stop{false};
    std::atomic<int> max_spinning{0};
    goro::WaitGroup wg;
    const int pairs = 4;
    wg.add(pairs);
    for (int p = 0; p < pairs; ++p) {
      goro::go([&] {
        goro::Chan<int> a, b;
        goro::go([a, b]() mutable {
          while (a.recv()) b.send(0);
        });
        while (!stop.load()) {
          a.send(1);
          b.recv();
          goro::sleep(std::chrono::microseconds(50));
        }
        a.close();
        wg.done();
      });
    }
    auto end = std::chrono::steady_clock::now() + 300ms;
    while (std::chrono::steady_clock::now() < end) {
      int s = goro::detail::spinning_ms();
      if (s > max_spinning.load()) max_spinning = s;
      goro::yield();
    }
    stop = true;
    wg.wait();
    EXPECT_LE(max_spinning.load(), std::max(1, procs / 2));

    goro::sleep(100ms);  // let the Ms settle
    double cpu0 = cpu_seconds();
    goro::sleep(1s);
    double used = cpu_seconds() - cpu0;
    EXPECT_LT(used, 0.02) << "an idle runtime used " << used * 100 << "% of a core";
  });
}

// 10^6 cross-P wake-ups with random timing: every one arrives (no lost wake-up would
// show as a hang, caught by the deadline below).
TEST_P(Scheduler, NoLostWakeups) {
  run([] {
    const int pairs = 8;
    const int per_pair = 1'000'000 / pairs / kScale / 2;
    std::atomic<long> completed{0};
    goro::WaitGroup wg;
    wg.add(pairs);
    for (int p = 0; p < pairs; ++p) {
      goro::go([&, p] {
        goro::Chan<int> to, from;
        goro::go([to, from, p]() mutable {
          std::minstd_rand rng(static_cast<unsigned>(p) * 7919u + 1);
          for (;;) {
            auto v = to.recv();
            if (!v) return;
            if (rng() % 16 == 0) spin_for(std::chrono::nanoseconds(rng() % 2000));
            if (rng() % 512 == 0) goro::sleep(std::chrono::microseconds(rng() % 50));
            if (rng() % 8 == 0) goro::yield();
            from.send(*v + 1);
          }
        });
        std::minstd_rand rng(static_cast<unsigned>(p) + 17);
        for (int i = 0; i < per_pair; ++i) {
          to.send(i);
          EXPECT_EQ(*from.recv(), i + 1);
          if (rng() % 64 == 0) goro::yield();
          completed += 2;
        }
        to.close();
        wg.done();
      });
    }
    auto start = std::chrono::steady_clock::now();
    wg.wait();
    EXPECT_EQ(completed.load(), 2L * pairs * per_pair);
    EXPECT_LT(goro_test::seconds_since(start), 20.0);
  });
}

// Timers fire in deadline order, never early, and not much late.
TEST_P(Scheduler, TimersFireInOrderAndOnTime) {
  run([] {
    const int n = 40;
    std::vector<int> order(n);
    std::atomic<int> next_slot{0};
    std::vector<double> lateness_ms(n);
    goro::WaitGroup wg;
    wg.add(n);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int> idx(n);
    for (int i = 0; i < n; ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), std::minstd_rand(5));
    for (int i : idx) {
      goro::go([&, i] {
        auto want = std::chrono::milliseconds(20 * kScale + 3 * i);
        goro::sleep(want - (std::chrono::steady_clock::now() - t0));
        auto got = std::chrono::steady_clock::now() - t0;
        lateness_ms[i] = std::chrono::duration<double, std::milli>(got - want).count();
        order[static_cast<std::size_t>(next_slot.fetch_add(1))] = i;
        wg.done();
      });
    }
    wg.wait();
    for (int i = 0; i < n; ++i) EXPECT_GE(lateness_ms[i], 0.0) << "timer " << i << " fired early";
    std::vector<double> sorted = lateness_ms;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_LT(sorted[n / 2], 2.0 * kScale) << "median lateness";
    EXPECT_LT(sorted[n - 1], 30.0 * kScale) << "worst lateness";
    // Deadlines are 3 ms apart: the wake-up order is the deadline order, except for
    // timers that were due together because the thread ran late (a loaded machine);
    // those are readied in one batch and may run in either order, as in Go. Timer j
    // running before timer i < j counts only if i was less late than the 3 * (j - i) ms
    // between their deadlines, so j was not yet due when i was.
    int inversions = 0;
    for (int k = 1; k < n; ++k) {
      const int j = order[k - 1], i = order[k];
      if (i < j && lateness_ms[i] < 3.0 * (j - i)) ++inversions;
    }
    EXPECT_LE(inversions, kScale == 1 ? 0 : 3);
  });
}

// A goroutine that keeps yielding never leaves its P's local queue empty; timers on
// that P must fire anyway.
TEST(SchedulerTimers, FireBehindAGoroutineThatKeepsYielding) {
  goro::run(
      [] {
        std::atomic<bool> stop{false}, hog_done{false};
        goro::go([&] {
          while (!stop.load()) {
            spin_for(2ms);
            goro::yield();
          }
          hog_done = true;
        });
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 30; ++i) goro::sleep(1ms);
        double took = goro_test::seconds_since(t0);
        stop = true;
        while (!hog_done.load()) goro::sleep(1ms);
        // 30 sleeps of 1 ms behind 2 ms slices: about 90 ms; starved timers would hang.
        EXPECT_LT(took, 1.0 * kScale);
      },
      goro::Config{.maxprocs = 1});
}

// errno is read and written through functions the compiler cannot inline: glibc
// declares __errno_location const, so within one function the compiler may reuse the
// address of the thread where the goroutine ran before a goro call (runtime.hpp).
__attribute__((noinline)) int read_errno() {
  asm volatile("" ::: "memory");
  return errno;
}
__attribute__((noinline)) void write_errno(int v) {
  asm volatile("" ::: "memory");
  errno = v;
}

// errno belongs to the goroutine: it survives a park that moves it to another thread,
// and other goroutines running meanwhile do not see or clobber it.
TEST_P(Scheduler, ErrnoIsKeptPerGoroutine) {
  run([] {
    const int n = 16;
    std::atomic<int> wrong{0};
    goro::WaitGroup wg;
    wg.add(n);
    for (int i = 0; i < n; ++i)
      goro::go([&, i] {
        for (int round = 0; round < 200; ++round) {
          write_errno(1000 + i);
          if (round % 3 == 0)
            goro::sleep(std::chrono::microseconds(50));
          else
            goro::yield();
          if (read_errno() != 1000 + i) wrong++;
        }
        wg.done();
      });
    wg.wait();
    EXPECT_EQ(wrong.load(), 0);
  });
}

// sleep(0) and negative durations just yield.
TEST_P(Scheduler, SleepZeroYields) {
  run([] {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) goro::sleep(0ns);
    goro::sleep(-5ms);
    EXPECT_LT(goro_test::seconds_since(t0), 0.5);
  });
}

// go() with options: a larger stack holds a frame the default one could not.
TEST_P(Scheduler, GoWithLargerStack) {
  run([] {
    goro::WaitGroup wg;
    wg.add(1);
    std::atomic<long> sum{0};
    goro::go(goro::GoOptions{.stack_size = 4 << 20, .name = "big"}, [&] {
      volatile char big[1 << 20];
      for (std::size_t i = 0; i < sizeof big; i += 4096)
        big[i] = static_cast<char>(i / 4096 % 100 + 1);
      long s = 0;
      for (std::size_t i = 0; i < sizeof big; i += 4096) s += big[i];
      sum = s;
      wg.done();
    });
    wg.wait();
    EXPECT_NE(sum.load(), 0);
  });
}

// A million goroutines parked at once, on the kernel's default vm.max_map_count.
TEST(SchedulerScale, MillionParkedGoroutines) {
  goro::run(
      [] {
        const int n = 1'000'000 / (kScale * kScale);
        goro::Chan<int> release;
        std::atomic<int> parked{0}, finished{0};
        long rss0 = rss_kib();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i)
          goro::go([&, release]() mutable {
            parked++;
            release.recv();
            finished++;
          });
        while (parked.load() < n) goro::sleep(1ms);
        goro::sleep(10ms);
        long rss1 = rss_kib();
        std::printf(
            "[ info ] %d parked goroutines: RSS +%ld MiB, %.2f KiB per goroutine, spawned in %.2f "
            "s\n",
            n, (rss1 - rss0) / 1024, static_cast<double>(rss1 - rss0) / n,
            goro_test::seconds_since(t0));
        release.close();
        while (finished.load() < n) goro::sleep(1ms);
        EXPECT_EQ(finished.load(), n);
      },
      goro::Config{});
}

// Overflow of a guarded stack faults on its guard page and is reported.
TEST(SchedulerDeathTest, StackOverflowIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        goro::run([] {
          goro::WaitGroup wg;
          wg.add(1);
          goro::go(goro::GoOptions{.stack_size = 64 * 1024}, [&] {
            struct Recurse {
              // Unbounded unless the stack is: `limit` is never reached.
              static int down(int n, int limit) {
                volatile char pad[512];
                pad[0] = static_cast<char>(n);
                if (n == limit) return 0;
                return down(n + 1, limit) + pad[0];
              }
            };
            Recurse::down(0, -1);
            wg.done();
          });
          wg.wait();
        });
      },
      "goroutine [0-9]+: stack overflow");
}

// A goroutine needs a running runtime: before goro::run, or after it returned (when
// its stacks are unmapped), goro::go says so instead of losing it or crashing.
TEST(SchedulerDeathTest, GoOutsideRunIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(goro::go([] {}), "goro::go called while no goro::run is running");
  EXPECT_DEATH(
      {
        goro::run([] { goro::go([] {}); });
        goro::go([] {});
      },
      "goro::go called while no goro::run is running");
}

// Two goroutines handing the P back and forth through runnext must not delay a
// sleeper's wake-up: timers are looked at every few switches, and the woken G goes
// next in line (it waited about 10 ms, for sysmon, before).
TEST(Timers, SleeperWakesOnTimeBesidePingPong) {
  std::vector<double> late;
  goro::run(
      [&] {
        goro::Chan<int> ping, pong;
        std::atomic<bool> stop{false};
        goro::WaitGroup wg;
        wg.add(2);
        goro::go([&] {
          while (!stop) {
            ping.send(1);
            (void)pong.recv();
          }
          ping.close();
          wg.done();
        });
        goro::go([&] {
          while (ping.recv()) pong.send(1);
          wg.done();
        });
        for (int i = 0; i < 40; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          goro::sleep(1ms);
          late.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count() -
              1.0);
        }
        stop = true;
        wg.wait();
      },
      goro::Config{.maxprocs = 1});
  std::sort(late.begin(), late.end());
  std::printf(
      "[figure] sleep(1ms) beside a ping-pong pair on 1 P: median %.3f ms late, max %.3f ms\n",
      late[late.size() / 2], late.back());
  EXPECT_LT(late[late.size() / 2], 3.0);
}

// A duration too long to add to the clock means "never", as in Go, not "already past".
TEST(Timers, ForeverDoesNotFireAtOnce) {
  goro::run([] {
    std::atomic<bool> woke{false};
    goro::go([&] {
      goro::sleep(std::chrono::nanoseconds::max());
      woke = true;
    });
    goro::Chan<int> ch(1);
    goro::go([ch]() mutable {
      goro::sleep(50ms);
      ch.send(7);
    });
    int which =
        goro::select(goro::recv_case(ch), goro::timeout_case(std::chrono::nanoseconds::max()));
    EXPECT_EQ(which, 0) << "the endless timeout fired";
    goro::sleep(50ms);
    EXPECT_FALSE(woke.load());
  });
}

#if !defined(GORO_ASAN)
// An arena stack (beyond the guard-page budget) that overflows into its red zone is
// caught by the canary check before its stack is reused.
TEST(SchedulerDeathTest, ArenaStackOverflowCaughtAtSwitch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        setenv("GORO_STACK_GUARDS", "0", 1);
        goro::run([] {
          goro::WaitGroup wg;
          wg.add(1);
          goro::go([&] {
            // Write 4 KiB below the bottom of this 256 KiB stack, then return and yield.
            struct Deep {
              static void fill(std::size_t n) {
                char* p = static_cast<char*>(__builtin_alloca(n));
                std::memset(p, 0x5a, n);
                asm volatile("" : : "r"(p) : "memory");
              }
            };
            Deep::fill(256 * 1024 + 2048);
            goro::yield();
            wg.done();
          });
          wg.wait();
        });
      },
      "goroutine [0-9]+: stack overflow");
}
#endif

// An exception escaping a goroutine is fatal, like a Go panic, and says what it was.
TEST(SchedulerDeathTest, UncaughtExceptionAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        goro::run([] {
          goro::go([] { throw std::runtime_error("boom in a goroutine"); });
          goro::sleep(1s);
        });
      },
      "goroutine [0-9]+: uncaught exception: boom in a goroutine");
}

// GORO_SCHEDTRACE=<ms> prints Go's SCHED line every period.
TEST(SchedulerTrace, SchedtracePrintsGoFormat) {
  char path[] = "/tmp/goro-schedtrace-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("GORO_SCHEDTRACE", "50", 1);
  goro::run([] { goro::sleep(230ms); }, goro::Config{.maxprocs = 2});
  unsetenv("GORO_SCHEDTRACE");
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream f(path);
  std::string line;
  std::regex format(
      R"(SCHED [0-9]+ms: gomaxprocs=2 idleprocs=[0-2] threads=[0-9]+ spinningthreads=[0-9]+ idlethreads=[0-9]+ runqueue=[0-9]+ \[[0-9]+ [0-9]+\])");
  int lines = 0;
  while (std::getline(f, line)) {
    if (line.rfind("SCHED", 0) != 0) continue;
    EXPECT_TRUE(std::regex_match(line, format)) << line;
    lines++;
  }
  unlink(path);
  EXPECT_GE(lines, 3);
}

// GOMAXPROCS: Config wins, then GORO_MAXPROCS (the cgroup's limit: cgroup_test.cpp).
TEST(SchedulerConfig, MaxprocsFromConfigAndEnv) {
  setenv("GORO_MAXPROCS", "3", 1);
  int n = goro::run([] { return goro::maxprocs(); });
  EXPECT_EQ(n, 3);
  n = goro::run([] { return goro::maxprocs(); }, goro::Config{.maxprocs = 5});
  EXPECT_EQ(n, 5);
  unsetenv("GORO_MAXPROCS");
}
