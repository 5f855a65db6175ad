// What the runtime needs from the operating system and the CPU, below the scheduler:
// a fatal-error exit, a one-shot sleep/wake-up on a futex (Note), and a cheap random
// number generator. The clock (nanotime) and the runtime Lock are declared in
// detail/runtime.hpp, because goro's headers use them; they are defined in os.cpp.
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::detail {

// Prints "goro: fatal error: <msg>" on stderr and aborts the process.
[[noreturn]] void fatal(const char* msg);

// Whether the thread tid of this process sleeps in the kernel now (its state in
// /proc/self/task/<tid>/stat is S or D): in a system call, not running user code.
// False when it cannot tell.
bool thread_blocked_in_kernel(int tid);

// A full memory barrier on every running thread of the process (membarrier(2),
// private expedited), for asymmetric fences: the fast side orders its store and load
// with a compiler barrier only. membarrier_register() once first; false when the
// kernel (or a seccomp filter) refuses, and then process_barrier() must not be relied on.
bool membarrier_register();
void process_barrier();

// A one-shot sleep/wake-up on a futex (Go's note). One thread sleeps, any thread wakes.
struct Note {
  std::atomic<std::uint32_t> key{0};
  void sleep();                     // until wakeup(); then clears the note
  bool sleep_for(std::int64_t ns);  // false on timeout; clears the note
  void wakeup();
};

// xorshift64*: a fast, statistically decent generator for scheduling decisions (victim
// order, select's poll order). state must never be 0. Not for anything secret.
inline std::uint32_t next_random(std::uint64_t& state) noexcept {
  std::uint64_t x = state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  state = x;
  return static_cast<std::uint32_t>((x * 0x2545F4914F6CDD1DULL) >> 32);
}

// Uniform in [0, n), from one next_random() value.
inline std::uint32_t random_below(std::uint32_t random, std::uint32_t n) noexcept {
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(random) * n) >> 32);
}

}  // namespace goro::detail
