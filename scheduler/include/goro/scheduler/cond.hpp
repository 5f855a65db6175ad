// goro::Cond: a condition variable for goroutines, like Go's sync.Cond (or
// std::condition_variable_any), used with a goro::Mutex. Waiting parks the goroutine.
//
//   goro::Mutex mu;
//   goro::Cond cond;
//   std::unique_lock lock(mu);
//   cond.wait(lock, [&] { return !queue.empty(); });
//
// wait() may be given the Mutex itself or any lock over it (std::unique_lock<Mutex>):
// anything with lock() and unlock(), held by the caller. A signal reaches only
// goroutines that started waiting before it (wait takes a ticket while the caller
// still holds the mutex), so no wake-up is lost between unlocking and parking, and
// signal() wakes the longest-waiting goroutine. There are no spurious wake-ups, but as
// with any condition variable, re-check the condition after waking (the predicate
// overload does).
#pragma once

#include <cstdint>

#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/detail/waitq.hpp>

namespace goro {

class Cond {
 public:
  Cond() = default;
  Cond(const Cond&) = delete;
  Cond& operator=(const Cond&) = delete;

  // Atomically unlocks `lock`, parks until signalled, then re-locks it before
  // returning. Blocks. Precondition: the caller holds `lock`.
  template <class Lockable>
  void wait(Lockable& lock) {
    const std::uint32_t ticket = take_ticket();
    lock.unlock();
    wait_for_ticket(ticket);
    lock.lock();
  }

  // Waits until pred() is true; pred is evaluated with `lock` held. Blocks.
  template <class Lockable, class Predicate>
  void wait(Lockable& lock, Predicate pred) {
    while (!pred()) wait(lock);
  }

  // Wakes the goroutine that has waited longest, if any. Never blocks.
  void signal();

  // Wakes every waiting goroutine. Never blocks.
  void broadcast();

 private:
  std::uint32_t take_ticket();
  void wait_for_ticket(std::uint32_t ticket);

  // Tickets (Go's notifyList): wait() takes `next_ticket_`; a signal notifies
  // `notify_ticket_` and advances it. Ticket t is notified once notify_ticket_ is past it.
  detail::Lock lock_;
  std::uint32_t next_ticket_ = 0;    // guarded by lock_
  std::uint32_t notify_ticket_ = 0;  // guarded by lock_
  detail::WaitQueue waiters_;        // guarded by lock_; not in ticket order
};

}  // namespace goro
