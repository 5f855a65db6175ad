// spawn: start N goroutines that each do a trivial piece of work, join them with a
// WaitGroup. Reports wall-clock nanoseconds per goroutine (spawn + run + join).
// Twin of go/spawn.go.
#include <atomic>
#include <cstdint>
#include <cstdio>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  const std::int64_t n = bench::arg_count(argc, argv, 1000000);
  return goro::run([n]() -> int {
    std::atomic<std::int64_t> sum{0};
    goro::WaitGroup wg;
    const auto start = bench::Clock::now();
    wg.add(static_cast<int>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      goro::go([&sum, &wg, i] {
        sum.fetch_add(i, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
    const double ns = bench::elapsed_ns(start);
    if (sum.load() != n * (n - 1) / 2) {
      std::fprintf(stderr, "spawn: wrong sum %lld\n", static_cast<long long>(sum.load()));
      return 1;
    }
    std::printf("RESULT name=spawn procs=%d unit=ns_per_g value=%.1f n=%lld total_ms=%.1f\n",
                goro::maxprocs(), ns / static_cast<double>(n), static_cast<long long>(n), ns / 1e6);
    return 0;
  });
}
