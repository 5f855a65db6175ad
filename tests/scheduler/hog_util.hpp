// A hog for the preemption tests (sysmon_test, preempt_latency_test): a loop of user
// code that never calls the runtime.
#pragma once

#include <goro/scheduler/detail/runtime.hpp>

#include <time.h>

#include <cstdint>

namespace goro_test {

inline std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Burns `ns` of its thread's CPU time (not wall time: on a loaded machine a wall-clock
// hog would do less work, and its victims' gaps would shrink with it), with a
// wall-clock cap of 10x that.
inline void hog_cpu(std::int64_t ns) {
  volatile std::uint64_t n = 0;
  const std::int64_t cpu_end = thread_cpu_ns() + ns,
                     wall_end = goro::detail::nanotime() + 10 * ns;
  while (thread_cpu_ns() < cpu_end && goro::detail::nanotime() < wall_end)
    for (int k = 0; k < 1000; ++k) n = n + 1;
}

}  // namespace goro_test
