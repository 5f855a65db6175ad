// The queues of Gs, Ps and Ms the scheduler keeps: a P's local run queue as the
// scheduler uses it (runq.hpp holds the ring itself; here it spills into the global
// queue and counts), the global run queue, and the idle P and M lists.
//
// The global queue and the idle lists are guarded by sched.lock: callers of the
// functions marked (lock) hold it. runq_size and npidle can also be read without it.
#pragma once

#include <algorithm>

#include "sched.hpp"
#include "sysmon.hpp"
#include "thread.hpp"

namespace goro::detail {

// Puts g at the tail of the global run queue. (lock) Out of line, as every function
// here that is off the local fast path: inlined, it would cost its callers registers.
void globrunqput(G* g);

// Moves a batch that spilled from pp's full ring to the global queue (takes the lock).
void globrunqput_spill(P* pp, G** batch, std::uint32_t n);

// Puts g on pp's local queue, into runnext when `next`; a full ring spills half of
// itself into the global queue. pp's owner only.
inline void runqput(P* pp, G* g, bool next) {
  runqput(pp->runq, g, next, [pp](G** batch, std::uint32_t n) { globrunqput_spill(pp, batch, n); });
}

// Queues g, already runnable, where the caller runs: next on this M's P (runnext, as
// Go's goready and newproc do), or on the global queue from a thread without a P; then
// wakes an idle P for it. For a new G (start_g) and a readied one (ready).
inline void put_runnable_and_wake(G* g) {
  M* m = this_m();
  if (m && m->p) {
    runqput(m->p, g, true);
  } else {
    sched.lock.lock();
    globrunqput(g);
    sched.lock.unlock();
  }
  wakep();
}

// Takes a G from pp's local queue (runq.hpp's runqget). pp's owner only.
inline G* runqget(P* pp, bool* inherit, std::uint32_t* left = nullptr) {
  G* g = runqget(pp->runq, inherit, left);
  if (g != nullptr && *inherit) bump(pp->stats.runnext_runs);
  return g;
}

// One G from the head of the global queue, or nullptr. (lock)
inline G* global_runq_pop() {
  if (sched.runq.empty()) return nullptr;
  G* g = sched.runq.pop();
  sched.runq_size.fetch_sub(1, std::memory_order_relaxed);
  return g;
}

// Takes min(len/GOMAXPROCS + 1, len, 128) Gs (at most `max` when max > 0): returns the
// first and puts the rest on pp's ring, which the caller has found empty. (lock)
inline G* globrunqget(P* pp, int max) {
  int size = sched.runq_size.load(std::memory_order_relaxed);
  if (size == 0) return nullptr;
  int n = std::min(size, size / sched.gomaxprocs + 1);
  if (max > 0 && n > max) n = max;
  n = std::min<int>(n, kRunQueueSize / 2);
  G* g = global_runq_pop();
  if (n > 1) {
    pp->stats.global_batches.fetch_add(1, std::memory_order_relaxed);
    pp->stats.global_batch_gs.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  }
  for (int i = 1; i < n; ++i) runqput(pp, global_runq_pop(), false);
  return g;
}

// Puts pp on the idle list. (lock)
inline void pidleput(P* pp) {
  pp->status.store(PStatus::idle, std::memory_order_seq_cst);
  pp->m = nullptr;
  pp->link = sched.pidle;
  sched.pidle = pp;
  sched.npidle.fetch_add(1, std::memory_order_seq_cst);
}

// Takes an idle P, or nullptr. A P getting busy wakes sysmon from its deep sleep. (lock)
inline P* pidleget() {
  P* pp = sched.pidle;
  if (pp == nullptr) return nullptr;
  sched.pidle = pp->link;
  sched.npidle.fetch_sub(1, std::memory_order_seq_cst);
  if (sched.sysmon_wait) sysmon_wake();
  return pp;
}

// Puts m on the idle list. (lock)
inline void mput(M* m) {
  m->link = sched.midle;
  sched.midle = m;
  sched.nmidle++;
}

// Whether m is on the idle list; takes it off. (lock)
inline bool midle_contains(const M* m) {
  for (const M* it = sched.midle; it != nullptr; it = it->link)
    if (it == m) return true;
  return false;
}
inline void midle_remove(M* m) {
  for (M** at = &sched.midle; *at != nullptr; at = &(*at)->link) {
    if (*at == m) {
      *at = m->link;
      sched.nmidle--;
      return;
    }
  }
}

// Takes an idle M, or nullptr. (lock)
inline M* mget() {
  M* m = sched.midle;
  if (m) {
    sched.midle = m->link;
    sched.nmidle--;
  }
  return m;
}

// m takes pp, which it owns from now on (pp came from pidleget, startm or a syscall).
inline void acquirep(M* m, P* pp) {
  m->p = pp;
  pp->m = m;
  pp->status.store(PStatus::running, std::memory_order_seq_cst);
}

// m gives up its P (the caller decides where the P goes).
inline void releasep(M* m) {
  m->p->m = nullptr;
  m->p = nullptr;
}

}  // namespace goro::detail
