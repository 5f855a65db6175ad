// skynet: the classic benchmark (github.com/atemerev/skynet). One goroutine spawns 10
// children, each spawns 10, ... down to 1,000,000 leaves; each leaf sends its number
// to its parent over an unbuffered channel, each internal node sends the sum of its
// children. Reports the total wall-clock time in milliseconds. Twin of go/skynet.go.
#include <cstdint>
#include <cstdio>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>

#include "bench_common.hpp"

namespace {

// The parent's channel outlives every child: the parent receives all `div` sums
// before it returns.
void skynet(goro::Chan<std::int64_t>* out, std::int64_t num, std::int64_t size, std::int64_t div) {
  if (size == 1) {
    out->send(num);
    return;
  }
  goro::Chan<std::int64_t> results;
  for (std::int64_t i = 0; i < div; ++i) {
    const std::int64_t sub_num = num + i * (size / div);
    goro::go([rc = &results, sub_num, size, div] { skynet(rc, sub_num, size / div, div); });
  }
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < div; ++i) sum += *results.recv();
  out->send(sum);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t size = bench::arg_count(argc, argv, 1000000);
  return goro::run([size]() -> int {
    const auto start = bench::Clock::now();
    goro::Chan<std::int64_t> c;
    goro::go([&c, size] { skynet(&c, 0, size, 10); });
    const std::int64_t sum = *c.recv();
    const double ns = bench::elapsed_ns(start);
    if (sum != size * (size - 1) / 2) {
      std::fprintf(stderr, "skynet: got %lld\n", static_cast<long long>(sum));
      return 1;
    }
    std::printf("RESULT name=skynet procs=%d unit=ms value=%.1f leaves=%lld\n", goro::maxprocs(),
                ns / 1e6, static_cast<long long>(size));
    return 0;
  });
}
