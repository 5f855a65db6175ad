// timers: N goroutines (10,000 by default) each sleep 10 ms in a loop, all at once, as a
// server's waiting handlers do. Each sleep's lateness is how much longer than 10 ms it
// took from the call to the goroutine running again. After a warm-up of 0.5 s (the
// sleepers start spread over one period), every sleep that ends in the next 2 s is
// recorded; the figures are the p50, p99 and maximum lateness in microseconds, and
// the sleeps completed per second (ideal: N / 10 ms).
// Twin of go/timers.go.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "bench_common.hpp"

namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr auto kPeriod = milliseconds(10);
constexpr auto kWarmup = milliseconds(500);
constexpr auto kMeasured = milliseconds(2000);

double percentile(std::vector<std::int64_t>& v, double q) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return static_cast<double>(v[k]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = bench::arg_count(argc, argv, 10000);
  return goro::run([n]() -> int {
    const auto start = bench::Clock::now();
    const auto from = start + kWarmup;
    const auto until = from + kMeasured;
    std::vector<std::vector<std::int64_t>> late(static_cast<std::size_t>(n));
    goro::WaitGroup wg;
    wg.add(static_cast<int>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      auto* mine = &late[static_cast<std::size_t>(i)];
      mine->reserve(static_cast<std::size_t>(kMeasured / kPeriod) + 8);
      const auto offset = nanoseconds(kPeriod) * i / n;
      goro::go([mine, offset, from, until, &wg] {
        goro::sleep(offset);  // spread the sleepers over one period
        for (;;) {
          const auto t0 = bench::Clock::now();
          if (t0 >= until) break;
          goro::sleep(kPeriod);
          const auto t1 = bench::Clock::now();
          if (t1 >= from && t1 < until)
            mine->push_back(std::chrono::duration_cast<nanoseconds>(t1 - t0 - kPeriod).count());
        }
        wg.done();
      });
    }
    wg.wait();
    std::vector<std::int64_t> all;
    for (auto& v : late) all.insert(all.end(), v.begin(), v.end());
    const double count = static_cast<double>(all.size());
    const double p50 = percentile(all, 0.50) / 1e3;
    const double p99 = percentile(all, 0.99) / 1e3;
    const double max =
        all.empty() ? 0 : static_cast<double>(*std::max_element(all.begin(), all.end())) / 1e3;
    const int procs = goro::maxprocs();
    const double seconds = std::chrono::duration<double>(kMeasured).count();
    std::printf("RESULT name=timer_late_p50 procs=%d unit=us value=%.1f n=%lld sleeps=%.0f\n",
                procs, p50, static_cast<long long>(n), count);
    std::printf("RESULT name=timer_late_p99 procs=%d unit=us value=%.1f n=%lld\n", procs, p99,
                static_cast<long long>(n));
    std::printf("RESULT name=timer_late_max procs=%d unit=us value=%.1f n=%lld\n", procs, max,
                static_cast<long long>(n));
    std::printf("RESULT name=timer_sleeps procs=%d unit=per_s value=%.0f n=%lld ideal=%.0f\n",
                procs, count / seconds, static_cast<long long>(n),
                static_cast<double>(n) / std::chrono::duration<double>(kPeriod).count());
    return 0;
  });
}
