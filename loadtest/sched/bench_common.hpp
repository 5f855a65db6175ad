// Helpers shared by the goro side of the scheduler micro-benchmarks: argument
// parsing, wall-clock timing and RSS. Each program prints one "RESULT key=value ..."
// line per figure, in the same format as its Go twin under go/.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace bench {

using Clock = std::chrono::steady_clock;

// argv[1] as a positive count, else the default.
inline std::int64_t arg_count(int argc, char** argv, std::int64_t fallback) {
  if (argc > 1) {
    long long v = std::strtoll(argv[1], nullptr, 10);
    if (v > 0) return v;
  }
  return fallback;
}

inline double elapsed_ns(Clock::time_point since) {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

// Resident set size of this process in KiB (second field of /proc/self/statm).
inline std::int64_t rss_kib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) {
    std::perror("/proc/self/statm");
    std::exit(2);
  }
  long long size = 0;
  long long resident = 0;
  if (std::fscanf(f, "%lld %lld", &size, &resident) != 2) {
    std::fprintf(stderr, "cannot parse /proc/self/statm\n");
    std::exit(2);
  }
  std::fclose(f);
  return resident * sysconf(_SC_PAGESIZE) / 1024;
}

}  // namespace bench
