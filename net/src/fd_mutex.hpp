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
// rwlock may park. Fast paths are one CAS.
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
  // Takes the read (read == true) or write lock plus a reference, parking while another
  // goroutine holds it. False if closed (before or while waiting).
  bool rwlock(bool read) noexcept;
  // Releases the lock and its reference. True if this was the last reference of a
  // closed descriptor.
  bool rwunlock(bool read) noexcept;

 private:
  std::atomic<std::uint64_t> state_{0};
  goro::detail::Semaphore rsema_;  // where read-lock waiters park
  goro::detail::Semaphore wsema_;  // where write-lock waiters park
};

}  // namespace goro::net::detail
