// rss_parked: start N goroutines that each block receiving from one channel; once all
// are parked, compare the process RSS with the RSS before they were started. Reports
// KiB of resident memory per parked goroutine (rss_parked), then closes the channel
// and reports the time per goroutine until all have woken and finished
// (release_parked).
// Twin of go/rss_parked.go.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  const std::int64_t n = bench::arg_count(argc, argv, 100000);
  return goro::run([n]() -> int {
    goro::Chan<int> release;
    std::atomic<std::int64_t> started{0};
    goro::WaitGroup wg;
    const std::int64_t before = bench::rss_kib();
    wg.add(static_cast<int>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      goro::go([&] {
        started.fetch_add(1, std::memory_order_relaxed);
        (void)release.recv();
        wg.done();
      });
    }
    while (started.load(std::memory_order_relaxed) != n) goro::sleep(std::chrono::milliseconds(1));
    // The last goroutines counted may still be on their way into the receive.
    goro::sleep(std::chrono::milliseconds(50));
    const std::int64_t after = bench::rss_kib();
    const auto t0 = bench::Clock::now();
    release.close();
    wg.wait();
    const double release_ms = bench::elapsed_ns(t0) / 1e6;
    const int procs = goro::maxprocs();
    std::printf(
        "RESULT name=rss_parked procs=%d unit=KiB_per_g value=%.2f n=%lld rss_before_kib=%lld "
        "rss_after_kib=%lld\n",
        procs, static_cast<double>(after - before) / static_cast<double>(n),
        static_cast<long long>(n), static_cast<long long>(before), static_cast<long long>(after));
    std::printf("RESULT name=release_parked procs=%d unit=ns_per_g value=%.1f n=%lld\n", procs,
                release_ms * 1e6 / static_cast<double>(n), static_cast<long long>(n));
    return 0;
  });
}
