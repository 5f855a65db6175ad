// select: Go's selectgo (runtime/select.go) over the type-erased channels.
//
// 1. Shuffle the non-nil cases into a random poll order (fairness) and sort them by
//    channel address into a lock order (a global order, so two selects never deadlock;
//    a channel named twice is locked once).
// 2. Lock every channel; take the first case in poll order that can proceed now.
// 3. None can: return select_default if there is a default. Else link one Waiter per
//    case into its channel's queue, all pointing at one SelectState, and park; the
//    commit arms the timeout timer (if any) and then unlocks the channels.
// 4. A waker that finds one of our Waiters must win SelectState::done (CAS 0 -> 1)
//    before completing the operation for us; a loser unlinks the Waiter and moves on.
//    The timeout timer competes for the same flag.
// 5. Woken: relock every channel, unlink the Waiters that did not fire, unlock.

#include <goro/scheduler/select.hpp>

#include <algorithm>
#include <functional>

#include "chan_impl.hpp"
#include "os.hpp"

namespace goro::detail {
namespace {

// A per-thread random number (os.hpp's generator). Only called between two safe points
// of one select() (never across a park), so the thread_local is never used after a G
// moves to another thread.
[[gnu::noinline]] std::uint32_t fast_random() noexcept {
  thread_local std::uint64_t state = 0;
  if (state == 0) {
    state = static_cast<std::uint64_t>(nanotime()) ^ reinterpret_cast<std::uintptr_t>(&state);
    state |= 1;
  }
  return next_random(state);
}

// Uniform in [0, n).
std::uint32_t fast_random_below(std::uint32_t n) noexcept { return random_below(fast_random(), n); }

void lock_all(SelectCase* cases, const std::uint16_t* lock_order, int n) noexcept {
  ChanBase* previous = nullptr;
  for (int k = 0; k < n; ++k) {
    ChanBase* c = cases[lock_order[k]].chan;
    if (c != previous) c->lock.lock();
    previous = c;
  }
}

// Unlocks in reverse lock order and reads nothing after the last unlock. In the park
// commit this matters (Go's selunlock): the cases live on the parked G's stack, and once
// the first channel in lock order is unlocked the G may be woken, return from select()
// and reuse that stack; until then a woken G waits on that lock in lock_all().
void unlock_all(SelectCase* cases, const std::uint16_t* lock_order, int n) noexcept {
  for (int k = n - 1; k >= 0; --k) {
    ChanBase* c = cases[lock_order[k]].chan;
    if (k > 0 && c == cases[lock_order[k - 1]].chan) continue;  // unlocked at k - 1
    c->lock.unlock();
  }
}

struct SelectPark {
  SelectCase* cases;
  const std::uint16_t* lock_order;
  int n;
  Timer* timer;  // nullptr: no timeout
};

// Runs on the scheduler stack once the G is off its own. The timer is armed before the
// channels are unlocked: once they are, a waker may resume the G, which then owns (and
// may pop) the stack frame holding the Timer. A timer firing before the unlock is as
// harmless as a waker right after it: the G is already parked.
bool select_commit(G*, void* arg) {
  const SelectPark p = *static_cast<SelectPark*>(arg);
  const std::int64_t wake = p.timer != nullptr ? timer_add(p.timer) : 0;
  unlock_all(p.cases, p.lock_order, p.n);
  timer_wake(wake);  // not under the channel locks: it may start a thread
  return true;
}

// The timeout: runs on a scheduler thread; competes with the channels for `done`
// (acq_rel: as in dequeue()).
void select_timer_fire(Timer* t) {
  auto* state = static_cast<SelectState*>(t->arg);
  std::uint32_t expected = 0;
  if (state->done.compare_exchange_strong(expected, 1, std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
    state->fired = nullptr;
    ready(state->g);
  }
}

}  // namespace

int select(SelectCase* cases, int n, std::uint16_t* order, bool has_default,
           std::int64_t timeout_ns) {
  std::uint16_t* poll_order = order;
  std::uint16_t* lock_order = order + n;
  int active = 0;  // non-nil cases
  for (int i = 0; i < n; ++i) {
    if (cases[i].chan == nullptr) continue;
    // Inside-out Fisher-Yates: a uniformly random permutation of the active cases.
    const std::uint32_t j = fast_random_below(static_cast<std::uint32_t>(active) + 1);
    poll_order[active] = poll_order[j];
    poll_order[j] = static_cast<std::uint16_t>(i);
    ++active;
  }
  if (active == 0) {
    if (has_default) return select_default;
    if (timeout_ns < 0) park_forever(WaitReason::select_no_cases);
  }
  std::copy(poll_order, poll_order + active, lock_order);
  std::sort(lock_order, lock_order + active, [cases](std::uint16_t a, std::uint16_t b) {
    return std::less<ChanBase*>()(cases[a].chan, cases[b].chan);
  });

  RuntimeScope scope;
  lock_all(cases, lock_order, active);

  for (int k = 0; k < active; ++k) {
    const int i = poll_order[k];
    SelectCase& sc = cases[i];
    ChanBase* c = sc.chan;
    if (sc.is_send) {
      if (c->closed) {
        unlock_all(cases, lock_order, active);
        throw_send_on_closed();
      }
      if (Waiter* r = dequeue(c->recvq)) {
        send_direct(c, r, sc.elem);
        G* g = r->g;
        unlock_all(cases, lock_order, active);
        ready(g);
        return i;
      }
      if (c->count < c->cap) {
        buffer_put(c, sc.elem);
        unlock_all(cases, lock_order, active);
        return i;
      }
    } else {
      if (Waiter* s = dequeue(c->sendq)) {
        recv_direct(c, s, sc.elem);
        G* g = s->g;
        unlock_all(cases, lock_order, active);
        ready(g);
        sc.received = true;
        return i;
      }
      if (c->count > 0) {
        buffer_take(c, sc.elem);
        unlock_all(cases, lock_order, active);
        sc.received = true;
        return i;
      }
      if (c->closed) {
        unlock_all(cases, lock_order, active);
        sc.received = false;
        return i;
      }
    }
  }
  if (has_default) {
    unlock_all(cases, lock_order, active);
    return select_default;
  }

  SelectState state;
  state.g = current_g();
  for (int k = 0; k < active; ++k) {
    SelectCase& sc = cases[lock_order[k]];
    Waiter& w = sc.waiter;
    w.g = state.g;
    w.elem = sc.elem;
    w.select = &state;
    w.success = false;
    (sc.is_send ? sc.chan->sendq : sc.chan->recvq).push_back(&w);
  }
  Timer timer;
  SelectPark p{cases, lock_order, active, nullptr};
  if (timeout_ns >= 0) {
    timer.when = nanotime_after(timeout_ns);
    timer.fire = select_timer_fire;
    timer.arg = &state;
    p.timer = &timer;
  }
  park(select_commit, &p, WaitReason::select);

  // The winner wrote `fired` before ready(); park() returning orders it before us.
  // Stop the timer first: the Timer must outlive its fire(), which timer_stop waits for.
  if (p.timer != nullptr) timer_stop(&timer);
  Waiter* fired = state.fired;
  lock_all(cases, lock_order, active);
  for (int k = 0; k < active; ++k) {
    SelectCase& sc = cases[lock_order[k]];
    if (&sc.waiter != fired && sc.waiter.queued)
      (sc.is_send ? sc.chan->sendq : sc.chan->recvq).remove(&sc.waiter);
  }
  unlock_all(cases, lock_order, active);

  if (fired == nullptr) return select_timeout;
  int i = 0;
  while (&cases[i].waiter != fired) ++i;
  if (cases[i].is_send) {
    if (!fired->success) throw_send_on_closed();
  } else {
    cases[i].received = fired->success;
  }
  return i;
}

}  // namespace goro::detail
