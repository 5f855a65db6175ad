// Timers: a 4-ary min-heap per P, run by the scheduler (find_runnable, stealing) and
// bounding the netpoller's blocking wait. No timer thread.
//
// Locking: a heap is guarded by its TimerHeap::lock. A timer's `heap` points at the
// heap it was last added to; `index` is its position there, -1 when not in a heap
// (both guarded by that heap's lock). One M at a time runs a heap's expired timers;
// the timer being fired is published in running_timer so timer_stop can wait for it.

#include "timer.hpp"

#include "thread.hpp"
#include "trace.hpp"

#include <sched.h>

namespace goro::detail {
namespace {

constexpr int kArity = 4;

TimerHeap* heap_of(Timer* t) {
  return static_cast<TimerHeap*>(t->heap.load(std::memory_order_acquire));
}

void sift_up(std::vector<Timer*>& h, int i) {
  Timer* t = h[i];
  while (i > 0) {
    int parent = (i - 1) / kArity;
    if (h[parent]->when <= t->when) break;
    h[i] = h[parent];
    h[i]->index = i;
    i = parent;
  }
  h[i] = t;
  t->index = i;
}

void sift_down(std::vector<Timer*>& h, int i) {
  const int n = static_cast<int>(h.size());
  Timer* t = h[i];
  for (;;) {
    int first = i * kArity + 1;
    if (first >= n) break;
    int best = first;
    for (int c = first + 1; c < first + kArity && c < n; ++c)
      if (h[c]->when < h[best]->when) best = c;
    if (h[best]->when >= t->when) break;
    h[i] = h[best];
    h[i]->index = i;
    i = best;
  }
  h[i] = t;
  t->index = i;
}

void remove_at(TimerHeap* th, int i) {
  auto& h = th->heap;
  Timer* last = h.back();
  h.pop_back();
  if (i < static_cast<int>(h.size())) {
    h[i] = last;
    last->index = i;
    sift_down(h, i);
    sift_up(h, last->index);
  }
}

// seq_cst: pairs with the netpoller's exchange of sched.lastpoll (a timer adder reads
// lastpoll after this store; the poller reads timer0 after its exchange).
void update_timer0(TimerHeap* th) {
  th->timer0.store(th->heap.empty() ? 0 : th->heap.front()->when, std::memory_order_seq_cst);
}

}  // namespace

std::int64_t timer_add(Timer* t) {
  M* m = this_m();
  P* pp = (m && m->p) ? m->p : sched.all_p[0];
  TimerHeap* th = &pp->timers;
  if (t->when <= 0) t->when = 1;
  th->lock.lock();
  t->heap.store(th, std::memory_order_release);
  th->heap.push_back(t);
  sift_up(th->heap, static_cast<int>(th->heap.size()) - 1);
  const bool earliest = th->heap.front() == t;
  // Once the lock is released the timer may fire on another thread and its owner may
  // free it (a sleeping goroutine's Timer lives on its stack): touch t no more.
  const std::int64_t when = t->when;
  update_timer0(th);
  th->lock.unlock();
  return earliest ? when : 0;
}

void timer_wake(std::int64_t when) {
  if (when == 0) return;
  // A blocked netpoller must wake up for an earlier deadline; with none, an M must
  // get there (the timers of idle Ps are watched only by the M in the netpoller).
  wake_net_poller(when);
  M* m = this_m();
  if (m == nullptr || m->p == nullptr) wakep();
}

void timer_start(Timer* t) { timer_wake(timer_add(t)); }

bool timer_stop_nowait(Timer* t) {
  TimerHeap* th = heap_of(t);
  if (th == nullptr) return false;
  th->lock.lock();
  if (t->index >= 0 && heap_of(t) == th) {
    remove_at(th, t->index);
    t->index = -1;
    update_timer0(th);
    th->lock.unlock();
    return true;
  }
  th->lock.unlock();
  return false;
}

bool timer_stop(Timer* t) {
  if (timer_stop_nowait(t)) return true;
  TimerHeap* th = heap_of(t);
  // Already fired, or firing right now on another thread: wait for fire to return.
  if (th) {
    while (th->running_timer.load(std::memory_order_acquire) == t) sched_yield();
  }
  return false;
}

std::int64_t run_timers(P* pp, std::int64_t now, int max) {
  TimerHeap* th = &pp->timers;
  th->lock.lock();
  if (th->running) {
    std::int64_t next = th->heap.empty() ? 0 : th->heap.front()->when;
    th->lock.unlock();
    return next;
  }
  th->running = true;
  for (int fired = 0; !th->heap.empty() && th->heap.front()->when <= now && fired != max; ++fired) {
    Timer* t = th->heap.front();
    remove_at(th, 0);
    t->index = -1;
    update_timer0(th);
    th->running_timer.store(t, std::memory_order_release);
    // Read under the lock: once it is released the owner may re-arm t (a deadline
    // changed while this fire is pending), writing its fields again.
    void (*fire)(Timer*) = t->fire;
    th->lock.unlock();
    fire(t);  // may free or reuse t's memory once it has readied its goroutine
    th->lock.lock();
    th->running_timer.store(nullptr, std::memory_order_release);
  }
  th->running = false;
  std::int64_t next = th->heap.empty() ? 0 : th->heap.front()->when;
  th->lock.unlock();
  return next;
}

std::int64_t earliest_timer() {
  std::int64_t best = 0;
  for (P* pp : sched.all_p) {
    std::int64_t w = pp->timers.timer0.load(std::memory_order_seq_cst);
    if (w != 0 && (best == 0 || w < best)) best = w;
  }
  return best;
}

}  // namespace goro::detail
