// goro::Mutex: a mutual-exclusion lock whose waiters park (the OS thread runs other
// goroutines meanwhile), like Go's sync.Mutex. Hold it across blocking goro calls
// freely; a std::mutex must not be (it would block the thread).
//
// It meets the standard Lockable requirements, so std::lock_guard, std::unique_lock
// and std::scoped_lock work. It is not recursive, and it is not owned by a goroutine:
// one goroutine may lock it and another unlock it, as in Go.
//
// Fairness (Go's two modes): normally a goroutine that finds the mutex unlocked takes
// it, even if others are parked waiting ("barging"), which is fast because the running
// goroutine keeps going. A waiter that has waited more than 1 ms switches the mutex to
// starvation mode, where unlock() hands ownership straight to the oldest waiter and
// newcomers queue behind it; the mode ends when a waiter that waited less than 1 ms, or
// the last waiter, acquires it. So no goroutine waits forever while others re-lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <system_error>

#include <goro/scheduler/detail/waitq.hpp>

namespace goro {

class Context;

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Acquires the mutex; blocks (parks) while another holder has it.
  void lock() {
    std::int32_t expected = 0;
    // acquire: the critical section must see everything the previous holder wrote.
    if (state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return;
    lock_slow(nullptr);
  }

  // Acquires the mutex unless ctx is cancelled first: returns {} holding the mutex, or
  // ctx.err() without it (at once if ctx already is cancelled). A waiter that gives up
  // leaves the queue; the others keep their places.
  std::error_code lock(const Context& ctx);

  // Acquires the mutex if that can happen now; never blocks. Returns whether it did.
  // Like Go's TryLock it does not barge past a mutex in starvation mode.
  bool try_lock() noexcept {
    std::int32_t old = state_.load(std::memory_order_relaxed);
    while ((old & (locked | starving)) == 0) {
      // acquire: as in lock().
      if (state_.compare_exchange_weak(old, old | locked, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return true;
    }
    return false;
  }

  // Releases the mutex and lets a waiter have it. Never blocks (in starvation mode it
  // yields, so the goroutine it handed the mutex to runs soon). Unlocking a mutex that
  // is not locked is a fatal error (the process aborts with a message).
  void unlock() {
    // release: publishes the critical section to the next holder.
    const std::int32_t now = state_.fetch_sub(locked, std::memory_order_release) - locked;
    if (now != 0) unlock_slow(now);
  }

 private:
  // state_ bits, as in Go: locked, a waiter has been woken and is trying to lock
  // (unlock need not wake another), starvation mode; the rest counts parked waiters.
  static constexpr std::int32_t locked = 1;
  static constexpr std::int32_t woken = 2;
  static constexpr std::int32_t starving = 4;
  static constexpr int waiter_shift = 3;

  // Returns false when ctx (may be null: no context) was cancelled first.
  bool lock_slow(const Context* ctx);
  void unlock_slow(std::int32_t now);
  // Normal mode, from state old: if there are waiters and nobody holds the mutex or is
  // woken already, wakes one (claiming `woken` for it).
  void wake_waiter(std::int32_t old);
  // Gives up the duty of the waiter unlock woke (the `woken` bit): passes it on.
  void drop_woken();

  std::atomic<std::int32_t> state_{0};
  detail::Semaphore sema_;  // where waiters park; a token is a wake-up (or, in
                            // starvation mode, the ownership being handed over)
};

}  // namespace goro
