// pingpong: two goroutines bounce a value over two unbuffered channels N times.
// Reports wall-clock nanoseconds per round trip (two sends + two receives).
// Twin of go/pingpong.go.
#include <cstdint>
#include <cstdio>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  const std::int64_t n = bench::arg_count(argc, argv, 1000000);
  return goro::run([n]() -> int {
    goro::Chan<std::int64_t> ping;
    goro::Chan<std::int64_t> pong;
    goro::WaitGroup echo_done;
    echo_done.add(1);
    goro::go([&] {
      while (auto v = ping.recv()) pong.send(*v + 1);
      echo_done.done();
    });
    const auto start = bench::Clock::now();
    std::int64_t v = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      ping.send(v);
      v = *pong.recv();
    }
    const double ns = bench::elapsed_ns(start);
    ping.close();
    echo_done.wait();
    if (v != n) {
      std::fprintf(stderr, "pingpong: got %lld\n", static_cast<long long>(v));
      return 1;
    }
    std::printf(
        "RESULT name=pingpong procs=%d unit=ns_per_roundtrip value=%.1f n=%lld total_ms=%.1f\n",
        goro::maxprocs(), ns / static_cast<double>(n), static_cast<long long>(n), ns / 1e6);
    return 0;
  });
}
