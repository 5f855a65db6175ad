// yield: two goroutines each call goro::yield() N times. Reports wall-clock
// nanoseconds per yield over all 2N yields. With one P every yield is a switch to the
// other goroutine; with more Ps the two may run in parallel, so the figure is then
// the aggregate cost of a yield that finds nothing else to run on its P.
// Twin of go/yield.go.
#include <cstdint>
#include <cstdio>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  const std::int64_t n = bench::arg_count(argc, argv, 1000000);
  return goro::run([n]() -> int {
    goro::WaitGroup wg;
    const auto start = bench::Clock::now();
    wg.add(2);
    for (int k = 0; k < 2; ++k) {
      goro::go([&wg, n] {
        for (std::int64_t i = 0; i < n; ++i) goro::yield();
        wg.done();
      });
    }
    wg.wait();
    const double ns = bench::elapsed_ns(start);
    std::printf("RESULT name=yield procs=%d unit=ns_per_yield value=%.1f n=%lld total_ms=%.1f\n",
                goro::maxprocs(), ns / static_cast<double>(2 * n), static_cast<long long>(n),
                ns / 1e6);
    return 0;
  });
}
