// Switching between a thread's scheduler stack (g0) and goroutines, and between two
// goroutines directly. All inline: these are the runtime's hottest paths.
//
// Every switch is the same sequence (switch_context): save the leaving context's errno
// and C++ exception state and install the entering one's; tell ASan which stack we go
// to and TSan which fiber; swap stacks (goro_switch, in switch_<arch>.S). When the
// leaving context is switched back to — on this M, or for a goroutine perhaps on another
// — it finishes the previous G's direct yield or park (after_resume) and takes its errno
// back. The three callers differ only in who leaves and who enters:
//   switch_to_g     g0 -> g          (execute: run a G)
//   switch_to_g0    g -> g0          (park, yield, preempt, exit, no P after a syscall)
//   switch_direct   g -> next G      (the fast path of park and yield)
#pragma once

#include <cstdint>

#include "machine_context.hpp"
#include "queues.hpp"
#include "sched.hpp"
#include "signals.hpp"
#include "trace.hpp"

namespace goro::detail {

// Where a switch goes: the entering context's saved stack pointer, exception state,
// stack bounds (for ASan) and fiber (for TSan).
struct SwitchTarget {
  void* sp;
  const EhState* eh;
  const char* stack_lo;
  std::size_t stack_size;
  void* tsan_fiber;
};

inline SwitchTarget target_of(const G* g) {
#if defined(GORO_TSAN)
  void* fiber = g->tsan_fiber;
#else
  void* fiber = nullptr;
#endif
  return {g->sp, &g->eh, g->stack.lo, g->stack.size(), fiber};
}

inline SwitchTarget target_of_g0(const M* m) {
#if defined(GORO_TSAN)
  void* fiber = m->tsan_fiber;
#else
  void* fiber = nullptr;
#endif
  return {m->g0_sp, &m->g0_eh, m->g0_stack_lo, m->g0_stack_size, fiber};
}

// Runs in a goroutine right after it was switched to: finishes a direct yield or park
// of the previous goroutine on this M (see switch_direct), now that its stack is no
// longer in use.
inline void after_resume(M* m) {
  if (G* prev = m->parked) {
    m->parked = nullptr;
    prev->status.store(GStatus::waiting, std::memory_order_seq_cst);
    ParkCommit commit = m->park_commit;
    m->park_commit = nullptr;
    if (commit && !commit(prev, m->park_arg)) {
      // The wait was cancelled before it was published: run prev next.
      leave_waiting(prev, GStatus::runnable);
      runqput(m->p, prev, true);
    }
  }
  if (G* prev = m->yielded) {
    m->yielded = nullptr;
    prev->status.store(GStatus::runnable, std::memory_order_relaxed);
    if (!runq_push_tail(m->p->runq, prev)) runqput(m->p, prev, false);
  }
}

// The switch sequence (see the top of this file), from the context running on m to
// `to`. The leaving context's stack pointer goes to *save_sp, its errno and exception
// state to *save_errno and *save_eh, and ASan's fake stack to *asan_fake_save (nullptr:
// the leaving context never runs again). errno and the exception state are read and
// written through pointers looked up once per thread: both are thread-local, and the
// compiler may not reuse an address computed before a switch, after which a goroutine
// can be on another thread. Returns when the leaving context is switched back to; by
// then *resumed_m is the M it runs on, and a goroutine (on_goroutine) has run
// after_resume.
inline void switch_context(M* m, void** save_sp, int* save_errno, EhState* save_eh,
                           void** asan_fake_save, const SwitchTarget& to, M* const* resumed_m,
                           bool on_goroutine) {
  *save_errno = *m->errno_slot;
  *save_eh = *m->eh_slot;
  *m->eh_slot = *to.eh;
#if defined(GORO_ASAN)
  __sanitizer_start_switch_fiber(asan_fake_save, to.stack_lo, to.stack_size);
#else
  (void)asan_fake_save;
#endif
#if defined(GORO_TSAN)
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#endif
  goro_switch(save_sp, to.sp);
#if defined(GORO_ASAN)
  __sanitizer_finish_switch_fiber(*asan_fake_save, nullptr, nullptr);
#endif
  M* now = *resumed_m;
  if (on_goroutine) after_resume(now);
  *now->errno_slot = *save_errno;
}

// g0 -> g. Returns when g switches back to g0.
inline void switch_to_g(M* m, G* g) {
  int g0_errno;
#if defined(GORO_ASAN)
  void** fake = &m->asan_fake_stack;
#else
  void** fake = nullptr;
#endif
  switch_context(m, &m->g0_sp, &g0_errno, &m->g0_eh, fake, target_of(g), &m, false);
}

// g -> its M's g0, telling g0 why. Returns when some M runs g again. Not inlined: it
// is the slow path of park and yield, whose fast paths must not pay for its frame.
[[gnu::noinline]] inline void switch_to_g0(G* g, SwitchReason reason) {
  M* m = g->m;
  m->switch_reason = reason;
  char probe;
  if (!stack_ok(g->stack, &probe, g->low_water, reason == SwitchReason::exit))
    report_stack_overflow(g);
#if defined(GORO_ASAN)
  void** fake = reason == SwitchReason::exit ? nullptr : &g->asan_fake_stack;
#else
  void** fake = nullptr;
#endif
  switch_context(m, &g->sp, &g->saved_errno, &g->eh, fake, target_of_g0(m), &g->m, true);
}

// Prefetching for switches. A switch leaves the return-address predictor useless, so
// a goroutine resuming through frames that were evicted since it last ran waits on one
// cache miss per return, one after another. When the local queue is long (a batch from
// the netpoller: each G in it last ran a whole batch ago), the lines a G touches first
// on resuming (its saved registers and the frames above them) are requested together
// just before switching to it, and the G line of the one queued after it, whose saved
// stack pointer the next switch reads. With a short queue the stacks are warm and the
// prefetches cost more than they save, so they are skipped.
inline constexpr int kResumeLines = 16;
inline constexpr std::uint32_t kPrefetchQueue = 8;

// next: the G about to run, just taken from pp's queue with `left` Gs behind it. Only
// hints. The queued G is not dereferenced: a thief may have taken it meanwhile.
inline void prefetch_resume(P* pp, const G* next, std::uint32_t left) {
  if (left < kPrefetchQueue) return;
  const char* sp = static_cast<const char*>(next->sp);
  for (int i = 0; i < kResumeLines; ++i) __builtin_prefetch(sp + i * 64);
  const std::uint32_t h = pp->runq.head.load(std::memory_order_relaxed);
  __builtin_prefetch(pp->runq.ring[h % kRunQueueSize].load(std::memory_order_relaxed));
}

// Fast path of yield and park: picks the next G of the local queue and switches to it
// directly, without a round trip through g0. g is recorded in *handoff_slot (m->parked
// or m->yielded) for the next G to finish (after_resume). Not taken when this schedule
// is the 1-in-61 that must look at the global queue, when a timer is due, when the
// tracer is on (it records every switch on g0), when the preemption signal left the
// M without its P, or when g or the next G is wired to a thread (lock_os_thread). Returns false if the caller must take the slow path.
// Precondition: g->in_runtime > 0.
inline bool switch_direct(G* g, M* m, G** handoff_slot) {
  if (m->preempt_detached.load(std::memory_order_relaxed) != 0 || m->lockedg != nullptr ||
      trace_enabled.load(std::memory_order_relaxed))
    return false;
  P* pp = m->p;
  if (pp->schedtick % 61 == 0 && sched.runq_size.load(std::memory_order_relaxed) != 0) return false;
  // Due timers are run by find_runnable; look every 8th switch (a clock read). Counted
  // apart from schedtick, which a pair of goroutines handing runnext back and forth
  // never advances: timers would wait for sysmon (about 10 ms late) behind them.
  if (std::int64_t t0 = pp->timers.timer0.load(std::memory_order_relaxed);
      t0 != 0 && (++pp->switches & 7) == 0 && t0 <= nanotime())
    return false;
  bool inherit = false;
  std::uint32_t left = 0;
  G* next = runqget(pp, &inherit, &left);
  if (next == nullptr) return false;
  if (next->lockedm != nullptr) {
    // Wired to another M: the scheduling loop hands it over.
    runqput(pp, next, true);
    return false;
  }
  prefetch_resume(pp, next, left);
  if (!inherit) {
    pp->schedtick++;
    pp->schedtick_pub.store(pp->schedtick, std::memory_order_relaxed);
  }
  bump(pp->stats.runs);
  *handoff_slot = g;
  m->curg.store(next, std::memory_order_release);
  next->m = m;
  next->status.store(GStatus::running, std::memory_order_relaxed);
  char probe;
  if (!stack_ok(g->stack, &probe, g->low_water, false)) report_stack_overflow(g);
#if defined(GORO_ASAN)
  void** fake = &g->asan_fake_stack;
#else
  void** fake = nullptr;
#endif
  switch_context(m, &g->sp, &g->saved_errno, &g->eh, fake, target_of(next), &g->m, true);
  return true;
}

}  // namespace goro::detail
