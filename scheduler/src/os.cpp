// The OS primitives of os.hpp and detail/runtime.hpp: the clock, futex-based notes and
// locks, and the fatal-error exit.

#include "os.hpp"

#include <goro/scheduler/detail/runtime.hpp>

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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

bool thread_blocked_in_kernel(int tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "tid (comm) S ...": the command may hold spaces and parentheses; the state follows
  // the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr || close_paren[1] != ' ') return false;
  const char state = close_paren[2];
  return state == 'S' || state == 'D';
}

bool membarrier_register() {
  const long cmds = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

void process_barrier() { ::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); }

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
