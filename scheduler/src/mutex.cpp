// goro::Mutex slow paths: Go's sync.Mutex lockSlow / unlockSlow, on a parking
// semaphore. The protocol on state_ (locked | woken | starving | waiters << 3):
//  - lock: CAS in `locked` if neither locked nor starving; otherwise count ourselves
//    as a waiter (CAS) and park on the semaphore. A woken waiter competes again (it
//    may lose to a newcomer) and re-queues at the front; once it has waited 1 ms it
//    sets `starving`.
//  - unlock: drop `locked`. Normal mode: if there are waiters and nobody is woken or
//    holds the lock, claim `woken`, take one waiter off the count, release a token.
//    Starvation mode: release a token; the woken waiter owns the mutex (it sets
//    `locked` itself and may end starvation mode).
// The slow paths' CASes use acq_rel: one of them may take the lock (acquire) and each
// publishes the state it read to the next transition; cost is irrelevant here.

#include <goro/scheduler/mutex.hpp>

#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro {
namespace {

constexpr std::int64_t starvation_threshold_ns = 1'000'000;

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spinning pays only if the holder runs on another thread and will be done soon.
bool can_spin(int iteration) { return iteration < 4 && maxprocs() > 1; }

}  // namespace

std::error_code Mutex::lock(const Context& ctx) {
  if (auto e = ctx.err()) return e;
  std::int32_t expected = 0;
  if (state_.compare_exchange_strong(expected, locked, std::memory_order_acquire,
                                     std::memory_order_relaxed))
    return {};
  if (lock_slow(ctx.can_cancel() ? &ctx : nullptr)) return {};
  return ctx.err();
}

// A waiter that gives up (its context was cancelled) after unlock woke it for the
// mutex: clear `woken` and, if the mutex is free with waiters, wake one as unlock would.
void Mutex::drop_woken() {
  std::int32_t old = state_.load(std::memory_order_relaxed);
  while (!state_.compare_exchange_weak(old, old & ~woken, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
  }
  wake_waiter(old & ~woken);
}

bool Mutex::lock_slow(const Context* ctx) {
  std::int64_t wait_start = 0;
  bool starved = false;
  bool awoke = false;
  int iteration = 0;
  std::int32_t old = state_.load(std::memory_order_relaxed);
  for (;;) {
    // Spin while the holder may be about to unlock (never in starvation mode: the
    // mutex will be handed to a waiter, not to us).
    if ((old & (locked | starving)) == locked && can_spin(iteration)) {
      // Setting `woken` tells unlock not to wake a parked waiter we would race with.
      if (!awoke && (old & woken) == 0 && (old >> waiter_shift) != 0 &&
          state_.compare_exchange_strong(old, old | woken, std::memory_order_acq_rel,
                                         std::memory_order_relaxed))
        awoke = true;
      for (int i = 0; i < 30; ++i) cpu_relax();
      ++iteration;
      old = state_.load(std::memory_order_relaxed);
      continue;
    }
    if (ctx != nullptr && ctx->cancelled()) {
      if (awoke) drop_woken();
      return false;
    }
    std::int32_t next = old;
    if ((old & starving) == 0) next |= locked;  // newcomers do not barge a starving mutex
    if ((old & (locked | starving)) != 0) next += 1 << waiter_shift;
    // Switch to starvation mode only while locked: unlock expects a starving mutex to
    // have waiters.
    if (starved && (old & locked) != 0) next |= starving;
    if (awoke) {
      if ((next & woken) == 0) detail::sync_fatal("goro: inconsistent mutex state");
      next &= ~woken;
    }
    if (!state_.compare_exchange_strong(old, next, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
      continue;                                    // `old` was reloaded
    if ((old & (locked | starving)) == 0) return true;  // we set `locked`
    // Queued. A waiter that waited before goes back to the front of the line.
    const bool lifo = wait_start != 0;
    if (wait_start == 0) wait_start = detail::nanotime();
    if (ctx == nullptr) {
      sema_.acquire(lifo, detail::WaitReason::mutex);
    } else if (!sema_.acquire(lifo, detail::WaitReason::mutex, *ctx)) {
      // Cancelled while queued, and off the semaphore's queue: stop being counted. If an
      // unlock already took us off the count for a token, that token went to the next
      // waiter, or waits in the semaphore for the next one to queue (with `woken` still
      // set, or the hand-off in starvation mode): the protocol stays consistent. One
      // corner: a hand-off banked that way leaves the mutex unlocked but `starving`, so
      // try_lock() fails until the next lock() takes the token and ends starvation mode.
      old = state_.load(std::memory_order_relaxed);
      while ((old >> waiter_shift) != 0 &&
             !state_.compare_exchange_weak(old, old - (1 << waiter_shift),
                                           std::memory_order_acq_rel, std::memory_order_relaxed)) {
      }
      return false;
    }
    starved = starved || detail::nanotime() - wait_start > starvation_threshold_ns;
    old = state_.load(std::memory_order_acquire);
    if ((old & starving) != 0) {
      // Ownership was handed to us: `locked` is clear and we are still counted as a
      // waiter. Fix both in one step, and leave starvation mode if we did not starve or
      // are the last waiter (two goroutines would otherwise hand off in lock step).
      if ((old & (locked | woken)) != 0 || (old >> waiter_shift) == 0)
        detail::sync_fatal("goro: inconsistent mutex state");
      std::int32_t delta = locked - (1 << waiter_shift);
      if (!starved || (old >> waiter_shift) == 1) delta -= starving;
      state_.fetch_add(delta, std::memory_order_acq_rel);
      return true;
    }
    awoke = true;
    iteration = 0;
  }
}

void Mutex::wake_waiter(std::int32_t old) {
  for (;;) {
    // No waiters, or someone is already woken, holds the lock, or gets it handed:
    // nothing to do.
    if ((old >> waiter_shift) == 0 || (old & (locked | woken | starving)) != 0) return;
    const std::int32_t next = (old - (1 << waiter_shift)) | woken;
    if (state_.compare_exchange_strong(old, next, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      sema_.release();
      return;
    }
  }
}

void Mutex::unlock_slow(std::int32_t now) {
  if (((now + locked) & locked) == 0) detail::sync_fatal("sync: unlock of unlocked mutex");
  if ((now & starving) == 0) {
    wake_waiter(now);
    return;
  }
  // Starvation mode: hand the mutex to the oldest waiter and let it run now. `locked`
  // stays clear until it wakes, but `starving` keeps newcomers out meanwhile.
  sema_.release();
  yield();
}

}  // namespace goro
