// goro::WaitGroup: waits for a collection of goroutines to finish, like Go's
// sync.WaitGroup. The launcher calls add(n) before starting n goroutines, each calls
// done() when finished, and wait() parks until the count is back to zero.
//
//   goro::WaitGroup wg;
//   for (auto& job : jobs) {
//     wg.add(1);
//     goro::go([&wg, &job] { process(job); wg.done(); });
//   }
//   wg.wait();
//
// Everything a goroutine did before its done() is visible after wait() returns.
// As in Go: a negative count is a fatal error (the process aborts with a message); add
// with a positive delta while the count is zero must happen before wait(); a WaitGroup
// may be reused once every wait() of the previous round has returned.
#pragma once

#include <atomic>
#include <cstdint>
#include <system_error>

#include <goro/scheduler/detail/waitq.hpp>

namespace goro {

class Context;

class WaitGroup {
 public:
  WaitGroup() = default;
  WaitGroup(const WaitGroup&) = delete;
  WaitGroup& operator=(const WaitGroup&) = delete;

  // Adds delta (may be negative) to the count; at zero, wakes every waiter. Never
  // blocks. A count below zero is a fatal error.
  void add(int delta);

  // Decrements the count by one. Never blocks.
  void done() { add(-1); }

  // Blocks (parks) until the count is zero; returns at once if it is.
  void wait();
  // Like wait(), but returns ctx.err() if ctx is cancelled first ({} once the count is
  // zero). Giving up changes nothing for the other waiters.
  std::error_code wait(const Context& ctx);

 private:
  // High 32 bits: the count; low 32 bits: parked waiters. One word, so that add() at
  // zero sees exactly the waiters it must wake.
  std::atomic<std::uint64_t> state_{0};
  detail::Semaphore sema_;  // waiters park here; add() at zero releases one per waiter
};

}  // namespace goro
