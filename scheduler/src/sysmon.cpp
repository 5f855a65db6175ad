// sysmon: the monitor thread. It holds no P and runs no goroutine. Each tick it
//  - retakes Ps that sat in a blocking call (goro::blocking) for a whole tick while
//    there is other work, and hands them to another M (handoffp);
//  - asks goroutines that ran 2 ms without a scheduling point, while something waits
//    for their P, to yield, and, when one never reaches a safe point, preempts it with
//    a signal (below); goroutines whose sockets are ready count as waiting, so it looks
//    at the network for such a P if nobody has for 2 ms;
//  - polls the network if nobody has for 10 ms, so network goroutines are not starved
//    by CPU-bound ones;
//  - prints the GORO_SCHEDTRACE line.
// It wakes every 20 us and doubles its sleep after 50 idle ticks (about 1 ms): up to
// 2 ms while some P runs goroutines, so a hog is caught within 4 ms, and up to 10 ms
// otherwise. Once backed off to 10 ms, it sleeps for good while every P is idle
// and nothing is in a blocking call; the first P to become busy again wakes it
// (pidleget).
//
// Preemption of a goroutine that never calls the runtime: sysmon sends SIGURG to its
// thread, and the handler (signals.cpp) leaves the P in syscall state if the goroutine
// is in user code; sysmon then hands the P off at once, so the P's other goroutines run
// on another thread while the hog keeps its own. At its next safe point the hog goes
// through exit_syscall: it gets a P back or is queued globally. While detached, the
// hog's thread runs at nice 19 (signals.cpp), so the kernel gives the threads that hold
// Ps their cores first: the process has one more running thread than GOMAXPROCS, but
// the extra one only takes what they leave. Limits: that needs the right to raise the
// priority back (root, CAP_SYS_NICE or RLIMIT_NICE), without which the hog competes
// at full priority; the hog itself is only descheduled by the kernel, not by goro; a hog that
// holds a std::mutex keeps holding it; and under TSan, signals are delivered only at the
// thread's next libc call, so a pure loop is not preempted there.
//
// A goroutine in a blocking system call made outside goro::blocking (a C library's
// read, a plain usleep) holds its P while it sleeps in the kernel, and the signal would
// cut the call short (EINTR from sleeps and poll, which no SA_RESTART restarts). So
// before signalling, sysmon looks at the thread's state in /proc (at most once a
// millisecond per P, once the goroutine has held its P 1 ms with work waiting): a
// thread asleep in the kernel is detached by sysmon itself, as the handler would, and
// its P handed off as for goro::blocking, with no signal (detach_blocked). The thread
// takes the usual path back at its next safe point. Without membarrier(2), and under
// TSan (which cannot see the barrier's ordering), this is off and the signal is used.
// Limit: a thread the kernel switched out at the very entry of such a call reads as
// running ('R'), as a hog's does, so on a machine short of cores that call can still
// be signalled and cut short.

#include "sysmon.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "netpoll.hpp"
#include "queues.hpp"
#include "os.hpp"
#include "schedule.hpp"
#include "syscall.hpp"
#include "thread.hpp"
#include "timer.hpp"
#include "trace.hpp"

namespace goro::detail {
namespace {

constexpr std::int64_t kMs = 1'000'000;
// A goroutine that has run this long while something waits for its P is preempted. Go
// waits 10 ms; goro preempts only when something waits, and a request stuck behind a
// hog for 10 ms is the latency a server is judged by.
constexpr std::int64_t kPreemptAfter = 2 * kMs;
constexpr std::int64_t kBlockedAfter = kMs;  // and between two looks at one P's thread
constexpr std::int64_t kMinDelay = 20'000;
constexpr std::int64_t kMaxDelay = 10 * kMs;
// The longest tick while some P runs goroutines. A goroutine is first seen at most a
// tick after it started and preempted at the first tick kPreemptAfter later: 2 to 4 ms
// after it started. A busy runtime pays 500 wake-ups a second for it (about 20 us each
// on a 2-core VM, most of it the kernel's context switch).
constexpr std::int64_t kBusyMaxDelay = 2 * kMs;
constexpr std::int64_t kPollStarvation = 10 * kMs;
constexpr std::int64_t kStaleTimer = 10 * kMs;  // a due timer nobody ran for this long

// Polls the network if nobody has for `stale` ns and queues the goroutines it readies
// globally. Returns whether it queued any.
bool poll_if_stale(std::int64_t now, std::int64_t stale) {
  std::int64_t last = sched.lastpoll.load(std::memory_order_seq_cst);
  if (!netpoll_anything_waiting() || last == 0 || last + stale >= now ||
      !sched.lastpoll.compare_exchange_strong(last, now, std::memory_order_seq_cst))
    return false;
  int n = 0;
  G* list = netpoll(0, &n);
  if (list == nullptr) return false;
  trace_event(TraceKind::netpoll, list->id.load(std::memory_order_relaxed),
              static_cast<std::uint64_t>(n));
  inject_list(nullptr, list, n);
  return true;
}

// Hands off a P that the preemption handler moved to syscall state. Returns true if
// it was still in that state.
bool take_detached(P* pp) {
  if (!pp->detached_by_signal.exchange(false, std::memory_order_acq_rel)) return false;
  PStatus expected = PStatus::syscall;
  if (!pp->status.compare_exchange_strong(expected, PStatus::idle, std::memory_order_seq_cst))
    return false;  // the hog reached a safe point first and took its P back
  pp->syscalltick.fetch_add(1, std::memory_order_relaxed);
  sched.preemptions.fetch_add(1, std::memory_order_relaxed);
  handoffp(pp);
  return true;
}

// Whether a thread may be detached by sysmon (detach_blocked): membarrier(2) works.
bool remote_detach_ok = false;

// Detaches pp from its M if the M's thread sleeps in the kernel in a goroutine's user
// code (a blocking call made outside goro::blocking), as the preemption handler would,
// and hands pp off. Returns true if it did.
bool detach_blocked(P* pp) {
#if defined(GORO_TSAN)
  (void)pp;
  return false;
#else
  if (!remote_detach_ok) return false;
  M* m = pp->m.load(std::memory_order_acquire);
  if (m == nullptr) return false;
  G* g = m->curg.load(std::memory_order_acquire);
  const auto in_runtime = [g] { return *static_cast<volatile std::uint32_t*>(&g->in_runtime); };
  if (g == nullptr || in_runtime() != 0 || !thread_blocked_in_kernel(m->tid)) return false;
  // Claim the detach (the handler claims it the same way), then look at in_runtime
  // again after a barrier on every running thread: the thread stores in_runtime before
  // it loads preempt_detached, with only a compiler barrier between, so either it sees
  // the claim (and waits for the outcome in RuntimeScope) or we see it in the runtime.
  int none = 0;
  if (!m->preempt_detached.compare_exchange_strong(none, kDetachPending,
                                                   std::memory_order_seq_cst))
    return false;
  process_barrier();
  if (in_runtime() != 0 || m->curg.load(std::memory_order_acquire) != g ||
      pp->m.load(std::memory_order_acquire) != m ||
      pp->status.load(std::memory_order_seq_cst) != PStatus::running) {
    m->preempt_detached.store(0, std::memory_order_release);
    return false;
  }
  finish_detach(m, pp);
  return take_detached(pp);
#endif
}

// Asks the G running on pp to yield; if it is in user code, detaches pp (see above)
// and hands it off. Returns true if pp was handed off.
bool preemptone(P* pp) {
  M* m = pp->m.load(std::memory_order_acquire);
  if (m == nullptr) return false;
  G* g = m->curg.load(std::memory_order_acquire);
  if (g == nullptr) return false;
  g->preempt.store(true, std::memory_order_relaxed);
  trace_event(TraceKind::preempt, g->id.load(std::memory_order_relaxed),
              static_cast<std::uint64_t>(pp->id));
  if (!sched.async_preempt || pthread_kill(m->thread, SIGURG) != 0) return false;
  // The handler runs within microseconds if the G is in user code.
  const std::int64_t until = nanotime() + kMs;
  while (nanotime() < until) {
    if (pp->status.load(std::memory_order_seq_cst) != PStatus::running) break;
    if (pp->schedtick_pub.load(std::memory_order_relaxed) != pp->seen_schedtick) return false;
    sched_yield();
  }
  return take_detached(pp);
}

// One round over the Ps. Returns how many it took or preempted; *running says whether
// any P was running goroutines.
int retake(std::int64_t now, bool* running) {
  int n = 0;
  *running = false;
  for (P* pp : sched.all_p) {
    PStatus s = pp->status.load(std::memory_order_seq_cst);
    if (s == PStatus::running) {
      *running = true;
      std::uint32_t t = pp->schedtick_pub.load(std::memory_order_relaxed);
      if (pp->seen_schedtick != t) {
        pp->seen_schedtick = t;
        pp->seen_schedwhen = now;
        continue;
      }
      const std::int64_t ran = now - pp->seen_schedwhen;
      if (ran < kBlockedAfter) continue;
      // Taking the P from its goroutine costs a thread wake-up and an extra thread; worth
      // it only when something waits for this P: its queue, the global queue, or one of
      // its timers that is due.
      std::int64_t t0 = pp->timers.timer0.load(std::memory_order_acquire);
      bool waiting = !pp->runq.empty() || sched.runq_size.load(std::memory_order_relaxed) > 0 ||
                     (t0 != 0 && t0 <= now);
      if (waiting && now - pp->seen_blockcheck >= kBlockedAfter) {
        pp->seen_blockcheck = now;
        if (detach_blocked(pp)) {
          n++;
          continue;
        }
      }
      if (ran >= kPreemptAfter) {
        // Goroutines whose sockets became ready wait for this P too, but nobody sees
        // them while its goroutine runs: look, unless someone did a moment ago.
        if (!waiting) waiting = poll_if_stale(now, kPreemptAfter);
        // Either way sysmon stays at its shortest tick for a while: a late handler's
        // detached P is then handed off within microseconds (see below).
        if (waiting) {
          preemptone(pp);
          n++;
        }
        pp->seen_schedwhen = now;  // do not ask again at once
      }
      continue;
    }
    if (s != PStatus::syscall) continue;
    // Detached by a preemption signal whose handler ran after preemptone stopped
    // waiting (the thread was waiting for a CPU): hand it off now, not a tick later.
    if (pp->detached_by_signal.load(std::memory_order_acquire) && take_detached(pp)) {
      n++;
      continue;
    }
    std::uint32_t t = pp->syscalltick.load(std::memory_order_relaxed);
    if (pp->seen_syscalltick != t) {
      pp->seen_syscalltick = t;
      pp->seen_syscallwhen = now;
      continue;
    }
    // In the same syscall for a whole tick. Retake if it has work, or if nobody else
    // could pick up new work, or after 10 ms in any case.
    if (pp->runq.empty() &&
        sched.nmspinning.load(std::memory_order_relaxed) +
                sched.npidle.load(std::memory_order_relaxed) >
            0 &&
        pp->seen_syscallwhen + 10 * kMs > now)
      continue;
    PStatus expected = PStatus::syscall;
    if (pp->status.compare_exchange_strong(expected, PStatus::idle, std::memory_order_seq_cst)) {
      pp->syscalltick.fetch_add(1, std::memory_order_relaxed);
      n++;
      handoffp(pp);
    }
  }
  return n;
}

void schedtrace(std::int64_t now) {
  const std::string line = schedtrace_line(now) + "\n";
  if (write(2, line.data(), line.size()) < 0) {
  }
}

}  // namespace

std::string schedtrace_line(std::int64_t now) {
  sched.lock.lock();
  int threads = sched.mcount.load(std::memory_order_relaxed) + 1;  // + sysmon
  int idle_threads = sched.nmidle;
  int runqueue = sched.runq_size.load(std::memory_order_relaxed);
  sched.lock.unlock();
  std::string line = "SCHED " + std::to_string((now - sched.start_time) / kMs) +
                     "ms: gomaxprocs=" + std::to_string(sched.gomaxprocs) +
                     " idleprocs=" + std::to_string(sched.npidle.load()) +
                     " threads=" + std::to_string(threads) +
                     " spinningthreads=" + std::to_string(sched.nmspinning.load()) +
                     " idlethreads=" + std::to_string(idle_threads) +
                     " runqueue=" + std::to_string(runqueue) + " [";
  for (std::size_t i = 0; i < sched.all_p.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(sched.all_p[i]->runq.size());
  }
  line += "]";
  return line;
}

void sysmon_wake() {
  sched.sysmon_wait = false;
  sched.sysmon_note.wakeup();
}

void sysmon_main() {
  static const bool barrier_ok = membarrier_register();
  remote_detach_ok = barrier_ok;
  // sysmon never runs goroutines; keep the preemption signal away from it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGURG);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  std::int64_t delay = kMinDelay;
  int idle = 0;
  bool running = false;  // some P ran goroutines at the last round
  std::int64_t next_trace = sched.schedtrace_ns > 0 ? sched.start_time + sched.schedtrace_ns : 0;
  while (!sched.exiting.load(std::memory_order_acquire)) {
    // A goroutine entered a blocking call while we slept long (or deeply): watch it
    // from the shortest delay, so its P is handed off after a tick, not after our
    // back-off.
    if (sched.sysmon_kick.exchange(false, std::memory_order_acq_rel)) idle = 0;
    if (idle == 0)
      delay = kMinDelay;
    else if (idle > 50)
      delay = std::min(delay * 2, running ? kBusyMaxDelay : kMaxDelay);
    std::int64_t sleep_for = delay;
    if (next_trace != 0)
      sleep_for = std::min(sleep_for, std::max<std::int64_t>(0, next_trace - nanotime()));
    sched.sysmon_delay.store(sleep_for, std::memory_order_relaxed);
    sched.sysmon_note.sleep_for(sleep_for);
    sched.sysmon_wakeups.fetch_add(1, std::memory_order_relaxed);
    if (sched.exiting.load(std::memory_order_acquire)) break;

    // Everything idle and nothing in a blocking call: sleep until a P gets busy. Only
    // once fully backed off: a server whose only P goes idle between bursts of
    // network events would otherwise pay a futex wake-up (pidleget) at every burst.
    if (next_trace == 0 && delay == kMaxDelay &&
        sched.npidle.load(std::memory_order_seq_cst) == sched.gomaxprocs &&
        sched.nmsys.load(std::memory_order_seq_cst) == 0) {
      sched.lock.lock();
      if (sched.npidle.load(std::memory_order_relaxed) == sched.gomaxprocs &&
          !sched.exiting.load(std::memory_order_relaxed)) {
        sched.sysmon_wait = true;
        sched.lock.unlock();
        sched.sysmon_note.sleep();
        sched.sysmon_wakeups.fetch_add(1, std::memory_order_relaxed);
        // Woken because a P got busy: go on at the backed-off delay, as Go's sysmon
        // does, unless a blocking call asked to be watched closely (sysmon_kick, read
        // at the top of the loop). Starting over at 20 us would cost a server idle but
        // for a slow ticker dozens of wake-ups per tick.
        continue;
      }
      sched.lock.unlock();
    }

    const std::int64_t now = nanotime();
    // The network, if nobody has polled it for a while.
    if (poll_if_stale(now, kPollStarvation)) idle = 0;
    // A timer overdue by more than a tick that nobody has run: its P is idle and the
    // M that should have woken for it did not (Go's sysmon does the same check). Wake
    // the poller, and start a spinning M, which runs every P's due timers when it
    // steals. This happens when the M that was blocked in the netpoller takes a
    // goroutine that never parks (a read loop against a deadline in the past) while
    // the other goroutines sleep on an idle P's timers.
    // (sysmon's back-off is left alone: on an overloaded machine timers run late
    // anyway, and waking Ms every 20 us would only add load.)
    // (now - kStaleTimer, not next + kStaleTimer: a timer set for ever is INT64_MAX.)
    if (std::int64_t next = earliest_timer(); next != 0 && next < now - kStaleTimer) {
      netpoll_break();
      wakep();
    }
    int retaken;
    {
      CurgReaders reading;
      retaken = retake(now, &running);
    }
    if (retaken != 0)
      idle = 0;
    else
      idle++;
    if (next_trace != 0 && now >= next_trace) {
      schedtrace(now);
      next_trace += sched.schedtrace_ns;
      if (next_trace < now) next_trace = now + sched.schedtrace_ns;
    }
  }
}

}  // namespace goro::detail
