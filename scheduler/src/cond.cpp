// goro::Cond: Go's notifyList. Tickets make wait() immune to the window between
// unlocking the user's mutex and parking: a signal in that window advances
// notify_ticket_ past the ticket, and wait_for_ticket() then returns at once.
// Tickets wrap around; comparisons use the signed difference.

#include <goro/scheduler/cond.hpp>

namespace goro {
namespace {

// a < b, modulo 2^32.
bool ticket_before(std::uint32_t a, std::uint32_t b) noexcept {
  return static_cast<std::int32_t>(a - b) < 0;
}

}  // namespace

std::uint32_t Cond::take_ticket() {
  detail::RuntimeScope scope;
  lock_.lock();
  const std::uint32_t ticket = next_ticket_++;
  lock_.unlock();
  return ticket;
}

void Cond::wait_for_ticket(std::uint32_t ticket) {
  detail::RuntimeScope scope;
  lock_.lock();
  if (ticket_before(ticket, notify_ticket_)) {  // signalled before we got here
    lock_.unlock();
    return;
  }
  detail::Waiter w;
  w.g = detail::current_g();
  w.ticket = ticket;
  waiters_.push_back(&w);
  detail::park(detail::unlock_commit, &lock_, detail::WaitReason::cond);
}

void Cond::signal() {
  detail::RuntimeScope scope;
  lock_.lock();
  if (notify_ticket_ == next_ticket_) {  // nobody waits
    lock_.unlock();
    return;
  }
  const std::uint32_t ticket = notify_ticket_++;
  // The holder of `ticket` may not have queued yet; then it sees notify_ticket_ past its
  // ticket and does not park.
  for (detail::Waiter* w = waiters_.front(); w != nullptr; w = w->next) {
    if (w->ticket == ticket) {
      waiters_.remove(w);
      detail::G* g = w->g;
      lock_.unlock();
      detail::ready(g);
      return;
    }
  }
  lock_.unlock();
}

void Cond::broadcast() {
  detail::RuntimeScope scope;
  lock_.lock();
  notify_ticket_ = next_ticket_;
  detail::WaitQueue all = waiters_;
  waiters_ = detail::WaitQueue();
  lock_.unlock();
  // Off the queue, the Waiters are ours to walk; read next before ready() frees each.
  for (detail::Waiter* w = all.front(); w != nullptr;) {
    detail::Waiter* next = w->next;
    detail::ready(w->g);
    w = next;
  }
}

}  // namespace goro
