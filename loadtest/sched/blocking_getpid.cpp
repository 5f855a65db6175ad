// blocking_getpid: a short system call made under the runtime's syscall protocol,
// N times: goro::blocking([] { return syscall(SYS_getpid); }). The raw call (glibc's
// getpid() may be cached, so syscall(SYS_getpid)) is timed too, as the kernel floor.
// Reports nanoseconds per call for both (getpid_raw, blocking_getpid). Twin of
// go/blocking_getpid.go.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include <goro/scheduler/runtime.hpp>

#include "bench_common.hpp"

int main(int argc, char** argv) {
  const std::int64_t n = bench::arg_count(argc, argv, 1000000);
  return goro::run([n]() -> int {
    const long pid = static_cast<long>(getpid());

    auto start = bench::Clock::now();
    for (std::int64_t i = 0; i < n; ++i) {
      if (syscall(SYS_getpid) != pid) return 1;
    }
    const double raw_ns = bench::elapsed_ns(start);

    start = bench::Clock::now();
    for (std::int64_t i = 0; i < n; ++i) {
      if (goro::blocking([] { return syscall(SYS_getpid); }) != pid) return 1;
    }
    const double ns = bench::elapsed_ns(start);
    const int procs = goro::maxprocs();
    std::printf("RESULT name=getpid_raw procs=%d unit=ns_per_call value=%.1f n=%lld\n", procs,
                raw_ns / static_cast<double>(n), static_cast<long long>(n));
    std::printf("RESULT name=blocking_getpid procs=%d unit=ns_per_call value=%.1f n=%lld\n", procs,
                ns / static_cast<double>(n), static_cast<long long>(n));
    return 0;
  });
}
