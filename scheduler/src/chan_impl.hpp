// The type-erased channel behind goro::Chan<T> (Go's hchan), shared by chan.cpp and
// select.cpp. See goro/scheduler/chan.hpp for the semantics.
//
// Locking: every field below `lock` is guarded by it; `ops` and `cap` are immutable.
// Invariants while the lock is free:
//  - recvq nonempty => the buffer is empty (count == 0) and nothing is in sendq;
//  - sendq nonempty => the buffer is full (count == cap) and nothing is in recvq;
//  - closed => sendq is empty (close wakes every sender, and none enqueue after).
// A queue may also hold stale Waiters of a select that already fired elsewhere; they
// are skipped (and unlinked) by dequeue() and do not count for the invariants.
#pragma once

#include <cstddef>
#include <cstdint>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/detail/waitq.hpp>

namespace goro::detail {

// What the Gs of one select share: the first waker to flip `done` from 0 to 1 owns the
// select and records its Waiter (nullptr: the timeout) in `fired`; the others leave it.
struct SelectState {
  // 0 while the select is waiting; 1 once a waker (or the timer) won it.
  std::atomic<std::uint32_t> done{0};
  Waiter* fired = nullptr;  // written by the winner before ready(g)
  G* g = nullptr;
};

struct ChanBase {
  ChanBase(std::size_t capacity, const ElemOps* elem_ops);
  ~ChanBase();
  ChanBase(const ChanBase&) = delete;
  ChanBase& operator=(const ChanBase&) = delete;

  void* slot(std::size_t i) noexcept { return buf + i * ops->size; }

  const ElemOps* const ops;
  const std::size_t cap;
  unsigned char* const buf;  // cap slots of ops->size bytes; nullptr when cap == 0

  Lock lock;
  std::size_t count = 0;       // values in buf
  std::size_t recv_index = 0;  // slot of the oldest value
  std::size_t send_index = 0;  // slot the next buffered send fills
  bool closed = false;
  WaitQueue recvq;  // blocked receivers, oldest first
  WaitQueue sendq;  // blocked senders, oldest first
};

// The helpers below are called with c->lock held (inside a RuntimeScope).

// Unlinks and returns the oldest Waiter of q that may be woken: a plain one, or one
// whose select this call wins. Stale select Waiters met on the way are unlinked.
Waiter* dequeue(WaitQueue& q) noexcept;

// Hands the T at elem to the receiver r (dequeued from c->recvq).
void send_direct(ChanBase* c, Waiter* r, void* elem) noexcept;

// Takes a value for dst from the sender s (dequeued from c->sendq): straight from s if
// c is unbuffered, else the oldest buffered value, s's value taking its slot.
void recv_direct(ChanBase* c, Waiter* s, void* dst) noexcept;

// Moves the T at elem into the buffer. Precondition: c->count < c->cap.
void buffer_put(ChanBase* c, void* elem) noexcept;

// Moves the oldest buffered value to dst. Precondition: c->count > 0.
void buffer_take(ChanBase* c, void* dst) noexcept;

[[noreturn]] void throw_send_on_closed();

}  // namespace goro::detail
