// The syscall protocol (syscall.cpp): a goroutine in a call that may block in the
// kernel leaves its P in syscall state, for sysmon to hand off if the call lasts.
#pragma once

#include "sched.hpp"

namespace goro::detail {

// Leaves pp, which m holds, in syscall state: m keeps it as oldp and may take it back
// (exit_syscall) unless sysmon retakes it first. The state is published last, so
// sysmon never sees a P in syscall state that still names its M. Used by
// enter_syscall and by the preemption signal handler (async-signal safe).
inline void leave_p_in_syscall(M* m, P* pp) {
  m->oldp = pp;
  m->p = nullptr;
  pp->m.store(nullptr, std::memory_order_relaxed);
  pp->status.store(PStatus::syscall, std::memory_order_seq_cst);
}

// The thread, done with the runtime, goes on in user code with no P (enter_syscall, the
// preemption handler): from here run_main may return without it. Async-signal safe.
inline void go_outside(M* m) { m->where.store(MWhere::outside, std::memory_order_seq_cst); }

// Completes a detach that the caller claimed (m->preempt_detached is kDetachPending):
// pp goes to syscall state, marked for sysmon to hand off, the thread goes on outside
// the runtime, and the claim becomes kDetached. Shared by the preemption signal handler
// (async-signal safe) and sysmon's detach of a thread asleep in the kernel.
inline void finish_detach(M* m, P* pp) {
  leave_p_in_syscall(m, pp);
  pp->detached_by_signal.store(true, std::memory_order_release);
  go_outside(m);
  m->preempt_detached.store(kDetached, std::memory_order_release);
}

// The first step of a thread coming back from user code without a P (exit_syscall, a
// detached hog's safe point): marks it inside. If goro::run already returned without
// it, nothing the thread would touch is its own any more: it sleeps until the process
// ends, as a goroutine's thread does when Go's main returns.
void return_inside(M* m) noexcept;

// The calling goroutine enters a blocking call: its P goes to syscall state, or is
// handed off at once (hand_off_now, for calls known to block long).
void enter_syscall(bool hand_off_now);
// The call returned: take the old P back, or an idle one, or queue the goroutine
// globally and park this M until a P is free. Returns whether the old P was still there
// (false: it was handed off, at entry or by the monitor).
bool exit_syscall();
// At a safe point of a goroutine whose P the preemption signal left in syscall state:
// as exit_syscall.
void exit_syscall_after_preempt();

}  // namespace goro::detail
