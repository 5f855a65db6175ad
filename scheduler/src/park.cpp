// Parking and waking goroutines: park (Go's gopark) and ready (goready), and the two
// ways a goroutine gives up its CPU on purpose, yield and sleep.
//
// The parking protocol (detail/runtime.hpp): a G publishes itself to its waker only
// after it has left its stack. park switches away first (to g0, or straight to the next
// local G), and the park commit runs there; a G that would be resumed while its old M
// still ran on its stack cannot exist.

#include <goro/scheduler/runtime.hpp>

#include <sched.h>
#include <time.h>

#include <thread>

#include "queues.hpp"
#include "switch.hpp"
#include "thread.hpp"
#include "trace.hpp"

namespace goro::detail {

G* current_g() noexcept {
  M* m = this_m();
  return m ? m->curg.load(std::memory_order_relaxed) : nullptr;
}

std::uint64_t g_id(const G* g) noexcept { return g ? g->id.load(std::memory_order_relaxed) : 0; }

std::int64_t coarse_nanotime() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void park(ParkCommit commit, void* arg, WaitReason reason) {
  G* g = current_g();
  if (g == nullptr) fatal("park called outside a goroutine");
  check_no_thread_local_scope(g, "park");
  M* m = g->m;
  m->park_commit = commit;
  m->park_arg = arg;
  g->wait_reason = reason;
  g->wait_since = coarse_nanotime();
  // Callers hold a RuntimeScope (see detail/runtime.hpp); without one the direct path
  // could race with the preemption signal.
  if (g->in_runtime > 0 && switch_direct(g, m, &m->parked)) return;
  switch_to_g0(g, SwitchReason::park);
}

void ready(G* g) {
  if (!leave_waiting(g, GStatus::runnable)) fatal("ready of a goroutine that is not waiting");
  trace_event(TraceKind::g_ready, g->id.load(std::memory_order_relaxed), 0);
  RuntimeScope scope;
  // Next in line, as Go's goready: the readied G runs before the rest of the queue,
  // also when a timer readies it from the scheduler stack (else a pair of goroutines
  // trading runnext would keep a woken sleeper waiting behind them).
  put_runnable_and_wake(g);
}

}  // namespace goro::detail

namespace goro {

using namespace detail;

void yield() {
  M* m = this_m();
  G* g = m ? m->curg.load(std::memory_order_relaxed) : nullptr;
  if (g == nullptr) {
    sched_yield();
    return;
  }
  check_no_thread_local_scope(g, "yield");
  // We cannot queue ourselves before leaving our stack (a thief could resume us while
  // we still run on it): the G we switch to does it (after_resume). Inside
  // goro::blocking there is no P to switch on: the scope below takes one first.
  if (g->in_runtime == 0 && g->status.load(std::memory_order_relaxed) != GStatus::syscall) {
    g->in_runtime = 1;  // from here on the preemption signal leaves our P alone
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g->preempt.store(false, std::memory_order_relaxed);  // yielding is what it asks
    bool done = switch_direct(g, m, &m->yielded);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g->in_runtime = 0;
    if (done) return;
  }
  RuntimeScope scope;
  switch_to_g0(g, SwitchReason::yield);
}

namespace {
void sleep_fire(Timer* t) { ready(static_cast<G*>(t->arg)); }
bool sleep_commit(G*, void* arg) {
  timer_start(static_cast<Timer*>(arg));
  return true;
}
}  // namespace

void sleep(std::chrono::nanoseconds d) {
  G* g = current_g();
  if (g == nullptr) {
    std::this_thread::sleep_for(d);
    return;
  }
  RuntimeScope scope;
  if (d.count() <= 0) {
    switch_to_g0(g, SwitchReason::yield);
    return;
  }
  Timer t;
  t.when = nanotime_after(d.count());
  t.fire = sleep_fire;
  t.arg = g;
  park(sleep_commit, &t, WaitReason::sleep);
}

}  // namespace goro
