// FdMutex: the reference count and reader/writer serialisation of one socket, after
// Go's internal/poll.fdMutex. Internal to goro::net.
//
// One 64-bit state word:
//   bit 0        closed         set once by incref_and_close
//   bit 1        read lock      held by the one goroutine reading (or accepting)
//   bit 2        write lock     held by the one goroutine writing
//   bits 3..22   references     every operation in progress, lock holders included
//   bits 23..42  read waiters   goroutines parked in rsema_ for the read lock
//   bits 43..62  write waiters  goroutines parked in wsema_ for the write lock
// The descriptor may be closed (and its number reused) only when the state is exactly
// "closed, no references": the call that gets there (decref, rwunlock) returns true and
// its caller destroys the descriptor.
//
// Contract: every method may be called from any goroutine concurrently with any other;
// rwlock may park. The fast paths (inline) are one CAS.
#pragma once

#include <atomic>
#include <cstdint>

#include <goro/scheduler/detail/waitq.hpp>

namespace goro::net::detail {

class FdMutex {
 public:
  // Adds a reference (for operations that do not need the read or write lock:
  // setsockopt, shutdown, deadlines). False if closed.
  bool incref() noexcept;
  // Marks closed, adds a reference for the closer and wakes every lock waiter (they
  // then fail). False if already closed.
  bool incref_and_close() noexcept;
  // Drops a reference. True if this was the last one of a closed descriptor.
  bool decref() noexcept;
  // Whether incref_and_close has run.
  bool closed() const noexcept { return (state_.load(std::memory_order_acquire) & kClosed) != 0; }
  // Takes the read (read == true) or write lock plus a reference, parking while another
  // goroutine holds it. False if closed (before or while waiting).
  bool rwlock(bool read) noexcept {
    // Inline fast path, the lock free and the descriptor open: one CAS.
    const std::uint64_t bit = read ? kReadLock : kWriteLock;
    std::uint64_t old = state_.load(std::memory_order_relaxed);
    if ((old & (kClosed | bit)) == 0 && ((old + kRef) & kRefMask) != 0 &&
        state_.compare_exchange_strong(old, (old | bit) + kRef, std::memory_order_acq_rel,
                                       std::memory_order_relaxed))
      return true;
    return rwlock_slow(read);
  }
  // Releases the lock and its reference. True if this was the last reference of a
  // closed descriptor.
  bool rwunlock(bool read) noexcept {
    // Inline fast path, nobody waiting and the descriptor open: one CAS.
    const std::uint64_t bit = read ? kReadLock : kWriteLock;
    const std::uint64_t waiters = read ? kReadMask : kWriteMask;
    std::uint64_t old = state_.load(std::memory_order_relaxed);
    if ((old & (kClosed | waiters)) == 0 && (old & bit) != 0 && (old & kRefMask) != 0 &&
        state_.compare_exchange_strong(old, (old & ~bit) - kRef, std::memory_order_acq_rel,
                                       std::memory_order_relaxed))
      return false;
    return rwunlock_slow(read);
  }

 private:
  static constexpr std::uint64_t kClosed = 1ull << 0;
  static constexpr std::uint64_t kReadLock = 1ull << 1;
  static constexpr std::uint64_t kWriteLock = 1ull << 2;
  static constexpr std::uint64_t kRef = 1ull << 3;
  static constexpr std::uint64_t kRefMask = ((1ull << 20) - 1) << 3;
  static constexpr std::uint64_t kReadWait = 1ull << 23;
  static constexpr std::uint64_t kReadMask = ((1ull << 20) - 1) << 23;
  static constexpr std::uint64_t kWriteWait = 1ull << 43;
  static constexpr std::uint64_t kWriteMask = ((1ull << 20) - 1) << 43;

  bool rwlock_slow(bool read) noexcept;
  bool rwunlock_slow(bool read) noexcept;

  std::atomic<std::uint64_t> state_{0};
  goro::detail::Semaphore rsema_;  // where read-lock waiters park
  goro::detail::Semaphore wsema_;  // where write-lock waiters park
};

}  // namespace goro::net::detail
