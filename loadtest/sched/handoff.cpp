// handoff: 32 goroutines each repeatedly make a 10 ms blocking call
// (goro::blocking(nanosleep 10 ms)) while one CPU-bound goroutine runs a plain loop —
// no runtime calls, only the vDSO clock — for 1 s. With working hand-off the CPU
// goroutine keeps (almost) the whole P and the sleepers still complete ~100 calls
// each per second. Reports three lines:
//   handoff_cpu        loop iterations per second of the CPU goroutine (millions)
//   handoff_cpu_share  the same as a percentage of the rate it achieves alone
//   handoff_calls      10 ms calls completed by all sleepers during that second
// Twin of go/handoff.go.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "bench_common.hpp"

namespace {

constexpr int kSleepers = 32;

std::atomic<std::uint64_t> sink{0};

// Runs a plain loop for d and returns the number of iterations. The empty asm keeps
// the compiler from folding the loop, so the body costs what Go's does (a multiply
// and an add per iteration).
std::int64_t spin(std::chrono::nanoseconds d) {
  const auto deadline = bench::Clock::now() + d;
  std::int64_t iters = 0;
  std::uint64_t x = 1;
  for (;;) {
    for (int i = 0; i < 4096; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      asm volatile("" : "+r"(x));
    }
    iters += 4096;
    if (bench::Clock::now() >= deadline) break;
  }
  sink.store(x, std::memory_order_relaxed);
  return iters;
}

}  // namespace

int main() {
  return goro::run([]() -> int {
    // The loop's rate alone is taken before and after the loaded second, so a drift
    // in the machine's load during the run cancels out of the share.
    constexpr auto solo_dur = std::chrono::milliseconds(250);
    constexpr auto load_dur = std::chrono::milliseconds(1000);
    auto spin_alone = [solo_dur] {
      std::int64_t iters = 0;
      goro::WaitGroup wg;
      wg.add(1);
      goro::go([&] {
        iters = spin(solo_dur);
        wg.done();
      });
      wg.wait();
      return iters;
    };

    std::int64_t solo = spin_alone();

    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> calls{0};
    goro::WaitGroup wg;
    wg.add(kSleepers + 1);
    for (int i = 0; i < kSleepers; ++i) {
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          goro::blocking([] {
            timespec ts{0, 10 * 1000 * 1000};
            return nanosleep(&ts, nullptr);
          });
          calls.fetch_add(1, std::memory_order_relaxed);
        }
        wg.done();
      });
    }
    std::int64_t iters = 0;
    std::int64_t window_calls = 0;
    goro::go([&] {
      const std::int64_t c0 = calls.load(std::memory_order_relaxed);
      iters = spin(load_dur);
      window_calls = calls.load(std::memory_order_relaxed) - c0;
      stop.store(true, std::memory_order_relaxed);
      wg.done();
    });
    wg.wait();
    solo += spin_alone();
    const double solo_rate =
        static_cast<double>(solo) / (2 * std::chrono::duration<double>(solo_dur).count());
    const double rate =
        static_cast<double>(iters) / std::chrono::duration<double>(load_dur).count();
    const int procs = goro::maxprocs();
    std::printf(
        "RESULT name=handoff_cpu procs=%d unit=Miter_per_s value=%.1f solo_miter_per_s=%.1f\n",
        procs, rate / 1e6, solo_rate / 1e6);
    std::printf("RESULT name=handoff_cpu_share procs=%d unit=pct_of_solo value=%.1f\n", procs,
                100 * rate / solo_rate);
    std::printf("RESULT name=handoff_calls procs=%d unit=calls_in_1s value=%lld ideal=%d\n", procs,
                static_cast<long long>(window_calls), kSleepers * 100);
    return 0;
  });
}
