// A P's local run queue: a fixed ring of 256 Gs plus the runnext slot.
//
// Contract (as Go's runq): push — the owner P only; pop — the owner, concurrently with
// thieves; grab (steal) — any thread holding some other P, concurrently with push, pop
// and other thieves. head is advanced by CAS by every consumer; tail is written only by
// the owner. No lock.
#pragma once

#include <atomic>
#include <cstdint>

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

}  // namespace goro::detail
