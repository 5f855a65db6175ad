// The OS primitives of os.hpp and detail/runtime.hpp: the clock, futex-based notes and
// locks, and the fatal-error exit.

#include "os.hpp"

#include <goro/scheduler/detail/runtime.hpp>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace goro::detail {
namespace {

int futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const timespec* ts) {
  return static_cast<int>(
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, ts, nullptr, 0));
}

}  // namespace

void fatal(const char* msg) {
  std::fprintf(stderr, "goro: fatal error: %s\n", msg);
  std::abort();
}

std::int64_t nanotime() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void Note::sleep() {
  while (key.load(std::memory_order_acquire) == 0) futex(&key, FUTEX_WAIT_PRIVATE, 0, nullptr);
  key.store(0, std::memory_order_relaxed);
}

bool Note::sleep_for(std::int64_t ns) {
  const std::int64_t deadline = nanotime() + ns;
  while (key.load(std::memory_order_acquire) == 0) {
    std::int64_t left = deadline - nanotime();
    if (left <= 0) return false;
    timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    futex(&key, FUTEX_WAIT_PRIVATE, 0, &ts);
  }
  key.store(0, std::memory_order_relaxed);
  return true;
}

void Note::wakeup() {
  key.store(1, std::memory_order_release);
  futex(&key, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

void Lock::lock_slow() noexcept {
  for (int spin = 0; spin < 64; ++spin) {
    std::uint32_t expected = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  // Mark contended and sleep until the holder's unlock wakes us.
  while (state_.exchange(2, std::memory_order_acquire) != 0)
    futex(&state_, FUTEX_WAIT_PRIVATE, 2, nullptr);
}

void Lock::unlock_slow() noexcept { futex(&state_, FUTEX_WAKE_PRIVATE, 1, nullptr); }

}  // namespace goro::detail
