// A P's local run queue: a fixed ring of 256 Gs plus the runnext slot, and the
// operations on it (Go's runqput, runqget, runqgrab, runqsteal). Header-only: put and
// get are on the path of every switch. It knows Gs only as pointers, so it is tested
// alone (tests/scheduler/runq_test.cpp).
//
// Contract (as Go's runq):
//  - runqput, runq_push_tail, runqget: the owner P only; concurrently with thieves.
//  - runqgrab (and runqsteal, from the thief's side): any thread that owns some other
//    queue, concurrently with the owner's put and get and with other thieves.
// head is advanced by CAS by every consumer (owner and thieves); tail is written only
// by the owner. No lock.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

#include "os.hpp"

namespace goro::detail {

struct G;

inline constexpr std::uint32_t kRunQueueSize = 256;

struct RunQueue {
  // head: consumers CAS it (acq_rel) after reading the slots they take.
  alignas(64) std::atomic<std::uint32_t> head{0};
  // tail: stored by the owner with release after filling a slot, so a thief that
  // loads it with acquire sees the slot's content.
  alignas(64) std::atomic<std::uint32_t> tail{0};
  // runnext: a G readied by the running G; runs next, inheriting the time slice.
  std::atomic<G*> runnext{nullptr};
  // Slots are atomics only so that thieves' speculative reads of a slot the owner is
  // rewriting are not data races; all slot accesses are relaxed and ordered by
  // head/tail.
  std::atomic<G*> ring[kRunQueueSize];

  std::uint32_t size() const {
    std::uint32_t h = head.load(std::memory_order_acquire);
    std::uint32_t t = tail.load(std::memory_order_acquire);
    return t - h;
  }
  bool empty() const {
    // As Go's runqempty: read head, tail, runnext, then check tail again, so a G moving
    // from runnext into the ring in between is not missed.
    for (;;) {
      std::uint32_t h = head.load(std::memory_order_acquire);
      std::uint32_t t = tail.load(std::memory_order_acquire);
      G* next = runnext.load(std::memory_order_acquire);
      if (tail.load(std::memory_order_acquire) == t) return h == t && next == nullptr;
    }
  }
};

// Appends g to q's ring if it has room. Owner only.
inline bool runq_push_tail(RunQueue& q, G* g) {
  std::uint32_t h = q.head.load(std::memory_order_acquire);
  std::uint32_t t = q.tail.load(std::memory_order_relaxed);
  if (t - h >= kRunQueueSize) return false;
  q.ring[t % kRunQueueSize].store(g, std::memory_order_relaxed);
  // Release is enough: a G on our own queue is run by us if nobody steals it, so a
  // wake-up lost to store/load reordering costs parallelism, never progress (as in Go,
  // whose StoreRel here is a plain store on x86).
  q.tail.store(t + 1, std::memory_order_release);
  return true;
}

// The ring is full (h, t as read by the owner): moves its older half plus g out in one
// batch, handing the batch to spill(G** batch, std::uint32_t n) (the global queue).
// Owner only. Fails if a thief took something meanwhile (the caller retries the fast
// path).
template <class Spill>
bool runqputslow(RunQueue& q, G* g, std::uint32_t h, std::uint32_t t, Spill spill) {
  constexpr std::uint32_t n = kRunQueueSize / 2;
  if (t - h != kRunQueueSize) fatal("runqputslow: queue is not full");
  G* batch[n + 1];
  for (std::uint32_t i = 0; i < n; ++i)
    batch[i] = q.ring[(h + i) % kRunQueueSize].load(std::memory_order_relaxed);
  if (!q.head.compare_exchange_strong(h, h + n, std::memory_order_acq_rel,
                                      std::memory_order_relaxed))
    return false;
  batch[n] = g;
  spill(batch, n + 1);
  return true;
}

// Puts g on q; into runnext when `next` (the previous runnext is kicked to the ring's
// tail). When the ring is full, half of it goes to spill (see runqputslow). Owner only.
template <class Spill>
void runqput(RunQueue& q, G* g, bool next, Spill spill) {
  if (next) {
    G* old = q.runnext.exchange(g, std::memory_order_acq_rel);
    if (old == nullptr) return;
    g = old;
  }
  for (;;) {
    if (runq_push_tail(q, g)) return;
    std::uint32_t h = q.head.load(std::memory_order_acquire);
    std::uint32_t t = q.tail.load(std::memory_order_relaxed);
    if (t - h < kRunQueueSize) continue;  // a thief made room meanwhile
    if (runqputslow(q, g, h, t, spill)) return;
  }
}

// Takes a G from q: runnext first (*inherit = true: it inherits the time slice), then
// the ring. *left (if given): how many Gs were still in the ring behind the one
// returned (0 for runnext), as seen at the take. Owner only.
inline G* runqget(RunQueue& q, bool* inherit, std::uint32_t* left = nullptr) {
  G* next = q.runnext.load(std::memory_order_relaxed);
  if (next != nullptr &&
      q.runnext.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel)) {
    *inherit = true;
    if (left) *left = 0;
    return next;
  }
  for (;;) {
    std::uint32_t h = q.head.load(std::memory_order_acquire);
    std::uint32_t t = q.tail.load(std::memory_order_relaxed);
    if (t == h) return nullptr;
    G* g = q.ring[h % kRunQueueSize].load(std::memory_order_relaxed);
    if (q.head.compare_exchange_strong(h, h + 1, std::memory_order_acq_rel)) {
      *inherit = false;
      if (left) *left = t - h - 1;
      return g;
    }
  }
}

// Copies half of victim's ring into batch[batch_head...] (batch is the thief's ring)
// and commits by CAS on victim's head. Returns how many were taken. With
// steal_runnext, an empty ring gives up its runnext G; when victim_running() says the
// victim's owner is running, it waits 3 us first, as Go does: a running victim is
// likely about to schedule its runnext (a ping-pong pair).
template <class IsRunning>
std::uint32_t runqgrab(RunQueue& victim, std::atomic<G*>* batch, std::uint32_t batch_head,
                       bool steal_runnext, IsRunning&& victim_running) {
  for (;;) {
    std::uint32_t h = victim.head.load(std::memory_order_acquire);
    std::uint32_t t = victim.tail.load(std::memory_order_acquire);
    std::uint32_t n = t - h;
    n = n - n / 2;
    if (n == 0) {
      if (steal_runnext) {
        G* next = victim.runnext.load(std::memory_order_acquire);
        if (next != nullptr) {
          if (victim_running()) {
            timespec ts{0, 3000};
            nanosleep(&ts, nullptr);
          }
          if (!victim.runnext.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel))
            continue;
          batch[batch_head % kRunQueueSize].store(next, std::memory_order_relaxed);
          return 1;
        }
      }
      return 0;
    }
    if (n > kRunQueueSize / 2) continue;  // inconsistent h and t: retry
    for (std::uint32_t i = 0; i < n; ++i) {
      G* g = victim.ring[(h + i) % kRunQueueSize].load(std::memory_order_relaxed);
      batch[(batch_head + i) % kRunQueueSize].store(g, std::memory_order_relaxed);
    }
    if (victim.head.compare_exchange_strong(h, h + n, std::memory_order_acq_rel)) return n;
  }
}

// Steals half of victim's queue into q (the thief's own) and returns one G to run;
// *taken says how many were stolen (the one returned included). q's owner only.
template <class IsRunning>
G* runqsteal(RunQueue& q, RunQueue& victim, bool steal_runnext, IsRunning&& victim_running,
             std::uint32_t* taken) {
  std::uint32_t t = q.tail.load(std::memory_order_relaxed);
  std::uint32_t n = runqgrab(victim, q.ring, t, steal_runnext, victim_running);
  *taken = n;
  if (n == 0) return nullptr;
  n--;
  G* g = q.ring[(t + n) % kRunQueueSize].load(std::memory_order_relaxed);
  if (n == 0) return g;
  q.tail.store(t + n, std::memory_order_release);
  return g;
}

}  // namespace goro::detail
