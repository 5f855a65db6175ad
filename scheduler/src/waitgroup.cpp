// goro::WaitGroup: Go's sync.WaitGroup on a parking semaphore.
//
// Memory orders: add() is acq_rel (release: a done() publishes the goroutine's work;
// acquire: the add that reaches zero sees every earlier done()'s work, and passes it on
// through the semaphore); wait()'s load is acquire (a zero count seen there orders the
// work of every done() before wait() returns).

#include <goro/scheduler/waitgroup.hpp>

#include <goro/scheduler/context.hpp>

namespace goro {

void WaitGroup::add(int delta) {
  const std::uint64_t state =
      state_.fetch_add(static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)) << 32,
                       std::memory_order_acq_rel) +
      (static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)) << 32);
  const auto count = static_cast<std::int32_t>(state >> 32);
  auto waiters = static_cast<std::uint32_t>(state);
  if (count < 0) detail::sync_fatal("sync: negative WaitGroup counter");
  if (waiters != 0 && delta > 0 && count == delta)
    detail::sync_fatal("sync: WaitGroup misuse: add called concurrently with wait");
  if (count > 0 || waiters == 0) return;
  // The count hit zero with waiters parked. Nobody may change the state now (that
  // would be add racing with wait), so reset it and wake them all.
  if (state_.load(std::memory_order_relaxed) != state)
    detail::sync_fatal("sync: WaitGroup misuse: add called concurrently with wait");
  // relaxed: each woken waiter reads it after the semaphore's lock orders it.
  state_.store(0, std::memory_order_relaxed);
  for (; waiters != 0; --waiters) sema_.release();
}

void WaitGroup::wait() {
  std::uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((state >> 32) == 0) return;
    // Count ourselves as a waiter. acq_rel: on failure we loop with a fresh acquire load.
    if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      sema_.acquire(false, detail::WaitReason::waitgroup);
      if (state_.load(std::memory_order_relaxed) != 0)
        detail::sync_fatal("sync: WaitGroup is reused before previous wait has returned");
      return;
    }
  }
}

std::error_code WaitGroup::wait(const Context& ctx) {
  if (!ctx.can_cancel()) {
    wait();
    return {};
  }
  std::uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((state >> 32) == 0) return {};
    if (auto e = ctx.err()) return e;
    if (!state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    if (sema_.acquire(false, detail::WaitReason::waitgroup, ctx)) {
      if (state_.load(std::memory_order_relaxed) != 0)
        detail::sync_fatal("sync: WaitGroup is reused before previous wait has returned");
      return {};
    }
    // Cancelled, and off the semaphore's queue. While the count is not zero we are
    // still counted: uncount ourselves. Once add() has reset the state at zero, a token
    // is on its way for us (add releases one per waiter it counted): take it, and the
    // wait has simply completed.
    state = state_.load(std::memory_order_acquire);
    while ((state >> 32) != 0) {
      if (state_.compare_exchange_weak(state, state - 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        return ctx.err();
    }
    sema_.acquire(false, detail::WaitReason::waitgroup);
    return {};
  }
}

}  // namespace goro
