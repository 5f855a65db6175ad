// Wait queues for goro's synchronisation primitives (internal; see detail/runtime.hpp).
//
// A Waiter is one parked G on one queue, like Go's sudog: it lives on the waiting G's
// stack, is linked into the queue of the object it waits on while the object's
// detail::Lock is held, and the G parks with a commit that releases that lock. A waker
// takes the same lock, unlinks the Waiter, fills in the result fields, releases the
// lock and only then calls ready(w->g) (after ready the Waiter may vanish at any time,
// so the waker copies w->g out first).
#pragma once

#include <cstdint>

#include <goro/scheduler/detail/runtime.hpp>

namespace goro {
class Context;
}

namespace goro::detail {

struct SelectState;

// One waiting G. Unless noted, every field is guarded by the lock of the queue the
// Waiter is on (or is private to its G while it is on none).
struct Waiter {
  G* g = nullptr;
  Waiter* prev = nullptr;
  Waiter* next = nullptr;
  bool queued = false;  // linked into a WaitQueue
  // The result: written by the waker before ready(g); read by the G after park returns
  // (ready() publishes it). Channels: true when a value moved, false when woken by close.
  bool success = false;
  // Channels: the value to send (a T to move from), or raw storage for a received T.
  void* elem = nullptr;
  // Channels: the select this Waiter belongs to, or nullptr for a plain send/recv.
  SelectState* select = nullptr;
  // Cond: the ticket this G waits for.
  std::uint32_t ticket = 0;
  // Channels: links the Waiters a close() collected, to be readied after unlocking.
  Waiter* wake_next = nullptr;
};

// Intrusive doubly-linked FIFO of Waiters. Not thread-safe: every call is made with
// the owner's lock held.
class WaitQueue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  Waiter* front() const noexcept { return head_; }

  void push_back(Waiter* w) noexcept {
    w->prev = tail_;
    w->next = nullptr;
    if (tail_ != nullptr)
      tail_->next = w;
    else
      head_ = w;
    tail_ = w;
    w->queued = true;
  }

  void push_front(Waiter* w) noexcept {
    w->prev = nullptr;
    w->next = head_;
    if (head_ != nullptr)
      head_->prev = w;
    else
      tail_ = w;
    head_ = w;
    w->queued = true;
  }

  // Unlinks w. Precondition: w->queued, on this queue.
  void remove(Waiter* w) noexcept {
    if (w->prev != nullptr)
      w->prev->next = w->next;
    else
      head_ = w->next;
    if (w->next != nullptr)
      w->next->prev = w->prev;
    else
      tail_ = w->prev;
    w->prev = w->next = nullptr;
    w->queued = false;
  }

  // Unlinks and returns the oldest Waiter, or nullptr.
  Waiter* pop_front() noexcept {
    Waiter* w = head_;
    if (w != nullptr) remove(w);
    return w;
  }

 private:
  Waiter* head_ = nullptr;
  Waiter* tail_ = nullptr;
};

// A ParkCommit that releases the detail::Lock passed as arg.
bool unlock_commit(G* g, void* lock);

// Parks the calling G for good (a nil channel, an empty select); never returns.
[[noreturn]] void park_forever(WaitReason reason);

// Prints "fatal error: <message>" to stderr and aborts, like a Go runtime throw.
[[noreturn]] void sync_fatal(const char* message) noexcept;

// A counting semaphore that parks, with direct hand-off: release() gives its token to
// the oldest waiter (or the front one, see lifo) if there is one, else banks it. The
// building block of Mutex and WaitGroup (Go's runtime_Semacquire / Semrelease).
class Semaphore {
 public:
  // Takes a token, parking until one is released. lifo: queue at the front (a waiter
  // that was woken, lost the race, and waits again keeps its place). Blocks.
  void acquire(bool lifo, WaitReason reason);
  // Like acquire, but gives up when ctx is cancelled first: returns false, with no token
  // taken and the caller off the queue. Returns true with a token otherwise.
  bool acquire(bool lifo, WaitReason reason, const Context& ctx);
  // Gives a token to a waiter (readied) or banks it. Never blocks.
  void release();

 private:
  Lock lock_;
  std::uint32_t count_ = 0;  // banked tokens; guarded by lock_
  WaitQueue waiters_;        // guarded by lock_; nonempty only while count_ == 0
};

}  // namespace goro::detail
