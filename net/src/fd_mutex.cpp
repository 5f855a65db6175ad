#include "fd_mutex.hpp"

#include <cstdio>
#include <cstdlib>

namespace goro::net::detail {
namespace {

[[noreturn]] void fatal(const char* what) {
  std::fprintf(stderr, "goro::net: %s\n", what);
  std::abort();
}

constexpr const char* kOverflow =
    "too many concurrent operations on a single file or socket (max 1048575)";

}  // namespace

// All CASes are acq_rel: a successful lock or reference acquires what the previous
// holder released, and decref's "last reference" decision must see every earlier use.

bool FdMutex::incref() noexcept {
  std::uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (old & kClosed) return false;
    std::uint64_t next = old + kRef;
    if ((next & kRefMask) == 0) fatal(kOverflow);
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed))
      return true;
  }
}

bool FdMutex::incref_and_close() noexcept {
  std::uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (old & kClosed) return false;
    std::uint64_t next = (old | kClosed) + kRef;
    if ((next & kRefMask) == 0) fatal(kOverflow);
    next &= ~(kReadMask | kWriteMask);  // the waiters are woken below and fail
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed))
      break;
  }
  for (std::uint64_t w = old & kReadMask; w != 0; w -= kReadWait) rsema_.release();
  for (std::uint64_t w = old & kWriteMask; w != 0; w -= kWriteWait) wsema_.release();
  return true;
}

bool FdMutex::decref() noexcept {
  std::uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if ((old & kRefMask) == 0) fatal("inconsistent FdMutex (decref)");
    std::uint64_t next = old - kRef;
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed))
      return (next & (kClosed | kRefMask)) == kClosed;
  }
}

bool FdMutex::rwlock_slow(bool read) noexcept {
  const std::uint64_t bit = read ? kReadLock : kWriteLock;
  const std::uint64_t wait = read ? kReadWait : kWriteWait;
  const std::uint64_t mask = read ? kReadMask : kWriteMask;
  goro::detail::Semaphore& sema = read ? rsema_ : wsema_;
  std::uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (old & kClosed) return false;
    std::uint64_t next;
    if ((old & bit) == 0) {
      next = (old | bit) + kRef;
      if ((next & kRefMask) == 0) fatal(kOverflow);
    } else {
      next = old + wait;
      if ((next & mask) == 0) fatal(kOverflow);
    }
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
      if ((old & bit) == 0) return true;
      sema.acquire(false, goro::detail::WaitReason::mutex);  // the releaser removed our wait count
      old = state_.load(std::memory_order_relaxed);
    }
  }
}

bool FdMutex::rwunlock_slow(bool read) noexcept {
  const std::uint64_t bit = read ? kReadLock : kWriteLock;
  const std::uint64_t wait = read ? kReadWait : kWriteWait;
  const std::uint64_t mask = read ? kReadMask : kWriteMask;
  goro::detail::Semaphore& sema = read ? rsema_ : wsema_;
  std::uint64_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    if ((old & bit) == 0 || (old & kRefMask) == 0) fatal("inconsistent FdMutex (rwunlock)");
    std::uint64_t next = (old & ~bit) - kRef;
    if (old & mask) next -= wait;  // wake one waiter
    if (state_.compare_exchange_weak(old, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
      if (old & mask) sema.release();
      return (next & (kClosed | kRefMask)) == kClosed;
    }
  }
}

}  // namespace goro::net::detail
