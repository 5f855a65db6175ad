// goro's scheduler: the M:N model of Go's runtime, in C++20.
//
// Vocabulary (as in Go's proc.go)
//   G  a goroutine: a stack, saved registers and a status. Its struct lives at the top
//      of its own stack (stack.hpp), so a G and its stack are recycled together.
//   M  an OS thread. Each M runs the scheduler on its own thread stack ("g0") and
//      switches to a G to run it; the G switches back to g0 to park, yield or exit.
//   P  a processor: the right to run Gs, with a local run queue. There are exactly
//      GOMAXPROCS Ps; an M must hold a P to run a G. Ms are created on demand (for
//      spinning and syscall hand-off) and parked when idle.
//
// Finding work (find_runnable), in order:
//   0. this P's due timers (first, as Go does: a P whose local queue never drains
//      would otherwise never fire them), as many as fill its ring to half, at least one;
//   1. when a timer is pending (the clock was read for step 0) and nobody has polled
//      the network for 200 us, the netpoller without blocking, its Gs queued behind
//      the work already there (fairness: timers firing one after another would keep
//      the queue full, and every request that arrived meanwhile waiting, until the
//      last of them ran); every 61st schedule tick of a P, one G from the global queue
//      (fairness: a P whose local queue never empties still serves the global queue);
//   2. the P's runnext slot, then its local ring;
//   3. the global queue: a batch of min(len/GOMAXPROCS + 1, len, 128) moves to the ring;
//   4. stealing, if this M is already spinning or fewer than half of the busy Ps have
//      spinning Ms: 4 passes over the other Ps in random order (random start, stride
//      coprime with GOMAXPROCS), taking half of a victim's ring; on the last pass also
//      the victim's runnext and the expired timers of other Ps;
//   5. the global queue once more;
//   6. the netpoller, without blocking;
//   then the M gives up its P and, if no other M is already blocked there, blocks in
//   epoll_wait with the earliest timer as timeout; otherwise it parks on its note.
//
// Run queues. A fixed ring of 256 per P, pushed by the owner only and popped by the
// owner and thieves with a CAS on head (runq.hpp). A G made runnable by a running G
// goes to runnext and inherits the time slice (schedtick is not advanced), so a
// ping-pong pair stays on one P. When the ring is full, half of it (128) plus the new
// G move to the global queue in one batch.
//
// Spinning, and the protocol that loses no wake-up. An M looking for work holds a P and
// is "spinning" (counted in sched.nmspinning). When a G becomes runnable (ready, go,
// netpoll, timers) and there is an idle P and no spinning M, wakep() starts exactly one
// spinning M. A spinning M that finds work stops spinning and, if it was the last one,
// calls wakep() so that the remaining work is not left to a single thread. The race
// that matters: a spinner gives up (decrements nmspinning) while a producer readies a G
// and sees nmspinning != 0, so the producer does not wake anybody. Both sides use
// sequentially consistent atomics (the StoreLoad barrier): the producer writes the run
// queue, then reads nmspinning; the spinner decrements nmspinning, then re-reads every
// run queue. At least one of them sees the other's write, so either the producer wakes
// an M or the spinner finds the G. The same argument covers timers (checked after the
// decrement) and the global queue (rechecked under sched.lock before the P is
// released).
//
// Parking. A G that must wait calls park(commit, arg): it switches to g0 first, and g0
// runs commit (which publishes the G to its wakers, typically by unlocking a channel).
// Publishing only after leaving the stack means no other M can resume the G while this
// M still runs on it.
//
// Syscalls and preemption (syscall.cpp, signals.cpp and sysmon.cpp have the details). enter_syscall
// marks the P "syscall" without releasing it; sysmon hands such a P to another M after a tick. A G
// that runs 10 ms without a scheduling point is asked to yield at its next safe point (any
// RuntimeScope), and if it never reaches one, the preemption signal moves its P into syscall state
// so that sysmon hands the P off — the hog keeps its thread, its P's other Gs keep running
// elsewhere.
//
// Rejected: ucontext (a syscall per switch for the signal mask); a mutex-protected
// local queue (the owner's push/pop would pay for thieves); asynchronous preemption by
// switching stacks inside a signal handler (C++ code interrupted inside malloc or a
// thread-local cache cannot be resumed on another thread safely).
//
// Locks, outermost first: sched.lock, a P's timer lock, sched.gfree_lock. None of them
// is held across a context switch except a park commit's own lock, released on g0.
//
// Where the rest lives: the structures and their states (sched.hpp), the run queues
// (runq.hpp, queues.hpp), the switch (switch.hpp), threads (thread.cpp), the
// goroutine's life (goroutine.cpp), parking and waking (park.cpp), syscalls and
// RuntimeScope (syscall.cpp), signals (signals.cpp), sysmon (sysmon.cpp), timers
// (timer.cpp), the netpoller (netpoll.cpp), startup and shutdown (startup.cpp).

#include "schedule.hpp"

#include <algorithm>

#include "goroutine.hpp"
#include "netpoll.hpp"
#include "queues.hpp"
#include "switch.hpp"
#include "thread.hpp"
#include "timer.hpp"
#include "trace.hpp"

namespace goro::detail {
namespace {

// A G the netpoller returned was parked on a poll descriptor: waiting -> runnable.
void set_runnable_from_netpoll(G* g) {
  if (!leave_waiting(g, GStatus::runnable))
    fatal("netpoll readied a goroutine that was not waiting");
}

// Steals half of victim's queue into pp's and returns one G to run. pp's owner only.
G* runqsteal(P* pp, P* victim, bool steal_runnext) {
  std::uint32_t taken = 0;
  G* g = runqsteal(
      pp->runq, victim->runq, steal_runnext,
      [victim] { return victim->status.load(std::memory_order_relaxed) == PStatus::running; },
      &taken);
  if (g != nullptr) {
    pp->stats.steals.fetch_add(1, std::memory_order_relaxed);
    pp->stats.stolen_gs.fetch_add(taken, std::memory_order_relaxed);
  }
  return g;
}

G* steal_work(M* m, P* pp, bool* inherit, std::int64_t& now) {
  const std::uint32_t procs = static_cast<std::uint32_t>(sched.gomaxprocs);
  for (int pass = 0; pass < 4; ++pass) {
    const bool last = pass == 3;
    std::uint32_t pos = fastrand(m) % procs;
    std::uint32_t stride = sched.coprimes[fastrand(m) % sched.coprimes.size()];
    for (std::uint32_t i = 0; i < procs; ++i, pos = (pos + stride) % procs) {
      if (sched.exiting.load(std::memory_order_relaxed)) return nullptr;
      P* victim = sched.all_p[pos];
      if (victim == pp) continue;
      if (last) {
        std::int64_t t0 = victim->timers.timer0.load(std::memory_order_acquire);
        if (t0 != 0) {
          if (now == 0) now = nanotime();
          if (t0 <= now) {
            run_timers(victim, now);
            if (G* g = runqget(pp, inherit)) return g;
          }
        }
      }
      if (G* g = runqsteal(pp, victim, last)) {
        *inherit = false;
        trace_event(TraceKind::steal, g->id.load(std::memory_order_relaxed),
                    static_cast<std::uint64_t>(victim->id));
        return g;
      }
    }
  }
  return nullptr;
}

// Makes m a spinning M if fewer than half of the busy Ps have one. The check and the
// increment are one CAS, so concurrent Ms cannot overshoot the bound together.
bool try_become_spinning(M* m) {
  const int busy = sched.gomaxprocs - sched.npidle.load(std::memory_order_seq_cst);
  std::int32_t n = sched.nmspinning.load(std::memory_order_seq_cst);
  while (2 * n < busy) {
    if (sched.nmspinning.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst)) {
      m->spinning = true;
      return true;
    }
  }
  return false;
}

}  // namespace

// Puts a list of Gs made runnable by the netpoller on pp's queue (or the global queue
// when pp is null) and wakes Ms for them.
void inject_list(P* pp, G* list, int n) {
  if (list == nullptr) return;
  for (G* g = list; g; g = g->link) set_runnable_from_netpoll(g);
  if (pp == nullptr) {
    sched.lock.lock();
    while (list) {
      G* next = list->link;
      globrunqput(list);
      list = next;
    }
    sched.lock.unlock();
    for (int i = 0; i < n && sched.npidle.load(std::memory_order_relaxed) > 0; ++i)
      startm(nullptr, false);
    return;
  }
  while (list) {
    G* next = list->link;
    runqput(pp, list, false);
    list = next;
  }
  for (int i = 0; i < n; ++i) wakep();
}

namespace {

// How long the network may go unpolled while a P has work (find_runnable, step 1).
// Shorter costs an empty epoll_wait (about a microsecond) more often; longer delays a
// request that arrives during a burst of work by as much.
constexpr std::int64_t kPollFairness = 200'000;

// Whether nobody has polled the network for kPollFairness while something waits on
// it. lastpoll == 0: an M is blocked in the netpoller and takes the events itself.
bool network_stale(std::int64_t now) {
  const std::int64_t last = sched.lastpoll.load(std::memory_order_relaxed);
  return last != 0 && now - last >= kPollFairness && netpoll_anything_waiting();
}

// Polls the network without waiting and queues what it returns at the tail of pp's
// ring. Claims the poll by moving lastpoll forward, so two Ps do not both poll for the
// same interval.
void poll_behind_work(P* pp, std::int64_t now) {
  std::int64_t last = sched.lastpoll.load(std::memory_order_relaxed);
  if (last == 0 || !sched.lastpoll.compare_exchange_strong(last, now, std::memory_order_relaxed))
    return;
  int n = 0;
  G* list = netpoll(0, &n);
  if (list == nullptr) return;
  trace_event(TraceKind::netpoll, list->id.load(std::memory_order_relaxed),
              static_cast<std::uint64_t>(n));
  inject_list(pp, list, n);
}

G* find_runnable(M* m, bool* inherit) {
top:
  if (sched.exiting.load(std::memory_order_relaxed)) return nullptr;
  P* pp = m->p;
  std::int64_t now = 0;
  *inherit = false;

  // 0. This P's due timers first, as Go does: a P whose local queue never drains (a
  // goroutine that keeps yielding) would otherwise never fire them. Costs a clock read
  // only when a timer is pending.
  // Only as many as fill the ring to half (at least one): a thousand sleeps that end
  // together wait in the heap, in deadline order, rather than in an overflowing queue
  // ahead of the network (step 1).
  if (std::int64_t t0 = pp->timers.timer0.load(std::memory_order_acquire); t0 != 0) {
    now = nanotime();
    if (t0 <= now) {
      const int room = static_cast<int>(kRunQueueSize / 2) - static_cast<int>(pp->runq.size());
      run_timers(pp, now, std::max(1, room));
    }
  }

  // 1. Fairness for the network: while timers keep the queue full (a thousand waiting
  // handlers whose sleeps end one after another), the queue would not drain until the
  // last of them ran, and a request that arrived meanwhile would wait for all of them.
  // So when the clock was read for step 0 and nobody has polled for kPollFairness,
  // poll without waiting and queue what arrived behind the work already here.
  // Not while the ring is more than half full: what the poll brings would overflow to
  // the global queue. Gs waiting in the global queue (an overflow) are older than what
  // the poll would bring: they go first, a batch into the ring (which has room for it).
  if (now != 0 && pp->runq.size() <= kRunQueueSize / 2 && network_stale(now)) {
    if (sched.runq_size.load(std::memory_order_relaxed) > 0) {
      sched.lock.lock();
      G* g = globrunqget(pp, 0);
      sched.lock.unlock();
      if (g) return g;
    } else {
      poll_behind_work(pp, now);
    }
  }
  // 1b. Fairness for the global queue: a P whose local queue never drains still serves it.
  if (pp->schedtick % 61 == 0 && sched.runq_size.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* g = globrunqget(pp, 1);
    sched.lock.unlock();
    if (g) {
      pp->stats.global_fair.fetch_add(1, std::memory_order_relaxed);
      return g;
    }
  }
  // 2. runnext, then the local ring.
  if (G* g = runqget(pp, inherit)) return g;
  // 3. The global queue, in a batch.
  if (sched.runq_size.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* g = globrunqget(pp, 0);
    sched.lock.unlock();
    if (g) return g;
  }
  // 4. Steal, with a bounded number of spinning Ms.
  if (m->spinning || try_become_spinning(m)) {
    if (G* g = steal_work(m, pp, inherit, now)) return g;
  }
  // 5. The global queue once more.
  if (sched.runq_size.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* g = globrunqget(pp, 0);
    sched.lock.unlock();
    if (g) return g;
  }
  // 6. The netpoller, without blocking.
  if (std::int64_t last = sched.lastpoll.load(std::memory_order_relaxed);
      netpoll_anything_waiting() && last != 0) {
    int n = 0;
    G* list = netpoll(0, &n);
    // Tell sysmon the network is being polled: a server busy enough never to block in
    // epoll_wait would otherwise look starved to it every 10 ms, and sysmon would poll
    // too, hand the events to the global queue and wake Ms for them.
    sched.lastpoll.compare_exchange_strong(last, nanotime(), std::memory_order_relaxed);
    if (list) {
      G* g = list;
      inject_list(pp, list->link, n - 1);
      set_runnable_from_netpoll(g);
      trace_event(TraceKind::netpoll, g->id.load(std::memory_order_relaxed),
                  static_cast<std::uint64_t>(n));
      return g;
    }
  }

  // Nothing to do: give up the P.
  sched.lock.lock();
  if (sched.exiting.load(std::memory_order_relaxed)) {
    sched.lock.unlock();
    return nullptr;
  }
  if (sched.runq_size.load(std::memory_order_relaxed) != 0) {
    G* g = globrunqget(pp, 0);
    sched.lock.unlock();
    return g;
  }
  releasep(m);
  pidleput(pp);
  sched.lock.unlock();

  const bool was_spinning = m->spinning;
  if (m->spinning) {
    m->spinning = false;
    if (sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) <= 0)
      fatal("find_runnable: negative nmspinning");
    // The StoreLoad dance (see the top of this file): having published that we stop
    // spinning, look at every run queue again.
    for (P* p2 : sched.all_p) {
      if (!p2->runq.empty()) {
        sched.lock.lock();
        P* got = pidleget();
        sched.lock.unlock();
        if (got) {
          acquirep(m, got);
          try_become_spinning(m);
          goto top;
        }
        break;
      }
    }
  }
  // Timers of every P (idle Ps keep theirs): the blocking poll must wake for them.
  std::int64_t poll_until = earliest_timer();

  if ((netpoll_anything_waiting() || poll_until != 0) &&
      sched.lastpoll.exchange(0, std::memory_order_seq_cst) != 0) {
    // Look at the timers again now that lastpoll == 0 is published: a timer added in
    // between either is seen here or sees us polling and breaks the poll.
    poll_until = earliest_timer();
    sched.poll_until.store(poll_until, std::memory_order_seq_cst);
    std::int64_t delay = -1;
    if (poll_until != 0) delay = std::max<std::int64_t>(0, poll_until - nanotime());
    // Recheck the global queue after publishing poll_until: a G readied meanwhile by a
    // thread without a P either woke an M or will break this poll.
    if (sched.runq_size.load(std::memory_order_seq_cst) != 0) delay = 0;
    int n = 0;
    G* list = netpoll(delay, &n);
    if (list)
      trace_event(TraceKind::netpoll, list->id.load(std::memory_order_relaxed),
                  static_cast<std::uint64_t>(n));
    sched.poll_until.store(0, std::memory_order_seq_cst);
    sched.lastpoll.store(nanotime(), std::memory_order_seq_cst);
    sched.lock.lock();
    P* got = sched.exiting.load(std::memory_order_relaxed) ? nullptr : pidleget();
    sched.lock.unlock();
    if (got == nullptr) {
      inject_list(nullptr, list, n);
    } else {
      acquirep(m, got);
      if (list) {
        G* g = list;
        inject_list(got, list->link, n - 1);
        set_runnable_from_netpoll(g);
        return g;
      }
      if (was_spinning) try_become_spinning(m);
      goto top;
    }
  } else if (poll_until != 0) {
    // Another M is blocked in the netpoller: make sure it wakes up in time.
    std::int64_t until = sched.poll_until.load(std::memory_order_seq_cst);
    if (until == 0 || until > poll_until) netpoll_break();
  }
  stopm(m);
  if (m->p == nullptr) return nullptr;  // exiting
  goto top;
}

// Runs g on m until it switches back, then does what it asked for.
void execute(M* m, G* g, bool inherit) {
  for (;;) {
    P* pp = m->p;
    if (!inherit) {
      pp->schedtick++;
      pp->schedtick_pub.store(pp->schedtick, std::memory_order_relaxed);
    }
    bump(pp->stats.runs);
    m->curg.store(g, std::memory_order_release);  // sysmon reads it (acquire)
    g->m = m;
    g->status.store(GStatus::running, std::memory_order_relaxed);
    trace_event(TraceKind::g_start, g->id.load(std::memory_order_relaxed),
                static_cast<std::uint64_t>(pp->id), g->name[0] ? g->name : nullptr);
    switch_to_g(m, g);
    g = m->curg.load(std::memory_order_relaxed);  // another G, if g yielded directly
    pp = m->p;
    m->curg.store(nullptr, std::memory_order_relaxed);
    trace_event(TraceKind::g_stop, g->id.load(std::memory_order_relaxed),
                static_cast<std::uint64_t>(m->switch_reason) |
                    (static_cast<std::uint64_t>(g->wait_reason) << 8));
    switch (m->switch_reason) {
      case SwitchReason::park: {
        g->status.store(GStatus::waiting, std::memory_order_seq_cst);
        ParkCommit commit = m->park_commit;
        m->park_commit = nullptr;
        if (commit && !commit(g, m->park_arg)) {
          leave_waiting(g, GStatus::running);
          inherit = true;
          continue;  // the wait was cancelled: resume g at once
        }
        return;
      }
      case SwitchReason::yield:
        // To the local ring's tail, not the global queue as Go's Gosched: cheaper,
        // keeps the G's cache, and the 1-in-61 check still serves the global queue.
        g->status.store(GStatus::runnable, std::memory_order_relaxed);
        runqput(m->p, g, false);
        return;
      case SwitchReason::preempt:
        g->status.store(GStatus::runnable, std::memory_order_relaxed);
        sched.lock.lock();
        globrunqput(g);
        sched.lock.unlock();
        wakep();  // an idle P may take it (Go's goschedImpl does the same)
        return;
      case SwitchReason::syscall_no_p: {
        // Back from a blocking call without a P. Look for an idle P and queue g under
        // one hold of the lock: a P released between two separate steps would sit idle
        // next to a runnable g, with every M asleep (a lost wake-up).
        sched.lock.lock();
        P* idle = sched.exiting.load(std::memory_order_relaxed) ? nullptr : pidleget();
        if (idle == nullptr) {
          g->status.store(GStatus::runnable, std::memory_order_relaxed);
          globrunqput(g);
        }
        sched.lock.unlock();
        if (idle == nullptr) return;
        acquirep(m, idle);
        inherit = true;
        continue;
      }
      case SwitchReason::exit:
        sched.live_gs.fetch_sub(1, std::memory_order_relaxed);
        if (g->lockedm != nullptr) {
          // It returned still wired to this thread, whose state it may have changed
          // (as Go does): the thread exits instead of running other goroutines.
          g->lockedm = nullptr;
          g->lock_depth = 0;
          m->lockedg = nullptr;
          m->retiring = true;
          if (P* pp = m->p) {
            gfput(pp, g);
            releasep(m);
            handoffp(pp);
          }
          return;
        }
        if (m->p) gfput(m->p, g);
        return;
    }
  }
}

}  // namespace

void schedule_loop(M* m) {
  for (;;) {
    if (sched.exiting.load(std::memory_order_relaxed) || m->retiring) return;
    if (m->lockedg != nullptr) {
      // Wired to a goroutine that parked or yielded: run nothing else until it is
      // handed back with a P.
      if (!stop_locked_m(m)) return;
      execute(m, m->lockedg, false);
      continue;
    }
    if (m->p == nullptr) {
      stopm(m);
      continue;
    }
    bool inherit = false;
    G* g = find_runnable(m, &inherit);
    if (g == nullptr) continue;
    if (m->spinning) {
      m->spinning = false;
      // The last spinner found work: start another so the rest is not left waiting.
      if (sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) == 1) wakep();
    }
    if (g->lockedm != nullptr && g->lockedm != m) {
      start_locked_m(m, g);
      continue;
    }
    execute(m, g, inherit);
  }
}

}  // namespace goro::detail
