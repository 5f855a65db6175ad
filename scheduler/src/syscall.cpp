// The syscall protocol, and RuntimeScope.
//
// A goroutine about to make a call that may block in the kernel (goro::blocking)
// leaves its P in syscall state without giving it up: a short call takes it back with
// one CAS. sysmon hands the P to another M if the call lasts a whole tick while there
// is work (sysmon.cpp); the goroutine then takes any idle P when its call returns, or,
// with none, is queued globally while its M parks.
//
// RuntimeScope marks runtime code running on a goroutine: the preemption signal leaves
// such a goroutine's P alone, and the outermost scope is a safe point, where a pending
// preemption is honoured, a P the signal detached is taken back, and a goroutine inside
// goro::blocking leaves the syscall state for the runtime call it makes.

#include "syscall.hpp"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include "queues.hpp"
#include "signals.hpp"
#include "switch.hpp"
#include "thread.hpp"
#include "trace.hpp"

namespace goro::detail {

// RuntimeScope: see detail/runtime.hpp. The outermost scope is a safe point.
RuntimeScope::RuntimeScope() noexcept : g_(current_g()) {
  if (g_ == nullptr) return;
  check_no_thread_local_scope(g_, "a runtime call");
  if (g_->in_runtime++ != 0) return;
  // The preemption signal handler runs on this thread and reads in_runtime: the
  // increment must be in place before we look at the P. sysmon, which may detach a
  // thread it finds in the kernel, reads it too, after a barrier on every running
  // thread that orders this store before the load below (detach_blocked).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  M* m = g_->m;
  if (int detached = m->preempt_detached.load(std::memory_order_acquire); detached != 0) {
    // sysmon is deciding whether to take our P (it found this thread in the kernel, and
    // the in_runtime store above, ordered by its process-wide barrier, makes it back
    // off): wait for the decision.
    while (detached == kDetachPending) {
      sched_yield();
      detached = m->preempt_detached.load(std::memory_order_acquire);
    }
    if (detached == kDetached) {
      // Our P was left for sysmon; get a P back before touching one.
      return_inside(m);
      m->preempt_detached.store(0, std::memory_order_relaxed);
      hog_priority_restore(m);
      exit_syscall_after_preempt();
    }
  }
  if (g_->status.load(std::memory_order_relaxed) == GStatus::syscall) {
    // A runtime call from inside goro::blocking (a channel, a lock, a sleep, the
    // network): it may park or touch a P, and this thread gave its P up. Leave the
    // syscall state for the call, as if the blocking function had returned, and go
    // back into it when the call is done. Nothing of the runtime is held here: this is
    // the outermost scope.
    exit_syscall();
    reenter_syscall_ = true;
  }
  if (g_->preempt.load(std::memory_order_relaxed)) {
    g_->preempt.store(false, std::memory_order_relaxed);
    switch_to_g0(g_, SwitchReason::preempt);
  }
}

RuntimeScope::~RuntimeScope() {
  if (g_ == nullptr) return;
  if (reenter_syscall_) enter_syscall(false);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_->in_runtime--;
}

void enter_syscall(bool hand_off_now) {
  M* m = this_m();
  G* g = m->curg;
  check_no_thread_local_scope(g, "a blocking call");
  P* pp = m->p;
  trace_event(TraceKind::syscall_enter, g->id.load(std::memory_order_relaxed),
              static_cast<std::uint64_t>(pp->id));
  g->status.store(GStatus::syscall, std::memory_order_relaxed);
  leave_p_in_syscall(m, pp);
  sched.nmsys.fetch_add(1, std::memory_order_relaxed);
  if (hand_off_now) {
    PStatus expected = PStatus::syscall;
    if (pp->status.compare_exchange_strong(expected, PStatus::idle, std::memory_order_seq_cst)) {
      m->oldp = nullptr;
      pp->syscalltick.fetch_add(1, std::memory_order_relaxed);
      handoffp(pp);
    }
  } else if (sched.sysmon_wait) {
    // sysmon sleeps while the runtime is idle; it must watch this call, closely.
    sched.sysmon_kick.store(true, std::memory_order_release);
    sched.lock.lock();
    if (sched.sysmon_wait) sysmon_wake();
    sched.lock.unlock();
  } else if (sched.sysmon_delay.load(std::memory_order_relaxed) > 1'000'000 &&
             !sched.sysmon_kick.exchange(true, std::memory_order_acq_rel)) {
    // sysmon has backed off (up to 10 ms): the P of this call would wait that long to
    // be handed off. Kick it back to its shortest delay (once per back-off).
    sched.sysmon_note.wakeup();
  }
  go_outside(m);
}

void return_inside(M* m) noexcept {
  MWhere expected = MWhere::outside;
  if (m->where.compare_exchange_strong(expected, MWhere::inside, std::memory_order_seq_cst) ||
      expected != MWhere::abandoned) {
    return;
  }
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  for (;;) pause();
}

bool exit_syscall() {
  M* m = this_m();
  return_inside(m);
  G* g = m->curg;
  sched.nmsys.fetch_sub(1, std::memory_order_relaxed);
  P* oldp = m->oldp;
  m->oldp = nullptr;
  // Fast path: our P was not retaken. Not once the run is ending: main has returned, and
  // this goroutine must not run on (the path below parks the thread, which then leaves).
  if (oldp && !sched.exiting.load(std::memory_order_relaxed)) {
    PStatus expected = PStatus::syscall;
    if (oldp->status.compare_exchange_strong(expected, PStatus::running,
                                             std::memory_order_seq_cst)) {
      m->p = oldp;
      oldp->m = m;
      oldp->syscalltick.fetch_add(1, std::memory_order_relaxed);
      g->status.store(GStatus::running, std::memory_order_relaxed);
      trace_event(TraceKind::syscall_exit, g->id.load(std::memory_order_relaxed), 0);
      return true;
    }
  }
  // Any idle P.
  sched.lock.lock();
  P* pp = sched.exiting.load(std::memory_order_relaxed) ? nullptr : pidleget();
  sched.lock.unlock();
  if (pp) {
    acquirep(m, pp);
    g->status.store(GStatus::running, std::memory_order_relaxed);
    trace_event(TraceKind::syscall_exit, g->id.load(std::memory_order_relaxed), 1);
    return false;
  }
  // None: queue the G globally and park this M (it picks up work when woken).
  trace_event(TraceKind::syscall_exit, g->id.load(std::memory_order_relaxed), 2);
  g->in_runtime++;
  switch_to_g0(g, SwitchReason::syscall_no_p);
  g->in_runtime--;
  return false;
}

void exit_syscall_after_preempt() {
  sched.nmsys.fetch_add(1, std::memory_order_relaxed);  // balanced by exit_syscall
  M* m = this_m();
  if (m->oldp) m->oldp->detached_by_signal.store(false, std::memory_order_release);
  (void)exit_syscall();
}

namespace {
// A call handed off at once that returned sooner than this would have kept its P: its
// site goes back to waiting for the monitor. About the cost of the hand-off itself (an
// M woken, and one parked when the call returns to no free P).
constexpr std::int64_t kShortBlockingCall = 50'000;
}  // namespace

SyscallScope::SyscallScope(bool hand_off_now) noexcept { enter(hand_off_now); }

SyscallScope::SyscallScope(BlockingSite* site) noexcept {
  const bool hand_off = site->hand_off.load(std::memory_order_relaxed);
  enter(hand_off);
  if (!active_) return;
  site_ = site;
  if (hand_off) start_ = nanotime();
}

void SyscallScope::enter(bool hand_off_now) noexcept {
  G* g = current_g();
  if (g == nullptr) return;  // not on a goroutine: nothing to hand off
  // goro::blocking inside goro::blocking: already in the syscall state.
  if (g->status.load(std::memory_order_relaxed) == GStatus::syscall) return;
  RuntimeScope scope;  // safe point, and no preemption signal in between
  enter_syscall(hand_off_now);
  active_ = true;
}

SyscallScope::~SyscallScope() {
  if (!active_) return;
  // The call's own time, before exit_syscall, which may wait for a P.
  const std::int64_t took = start_ != 0 ? nanotime() - start_ : 0;
  G* g = current_g();
  g->in_runtime++;
  const bool kept = exit_syscall();
  g->in_runtime--;
  if (site_ == nullptr) return;
  if (start_ != 0) {
    if (took < kShortBlockingCall) site_->hand_off.store(false, std::memory_order_relaxed);
  } else if (!kept) {
    site_->hand_off.store(true, std::memory_order_relaxed);
  }
}

}  // namespace goro::detail
