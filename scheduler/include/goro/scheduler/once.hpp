// goro::Once: runs a function exactly once, like Go's sync.Once (and std::call_once,
// whose exception rule it follows).
//
//   goro::Once once;
//   once.call([] { init_tables(); });  // from any number of goroutines
//
// Every call() returns only after the function has completed: concurrent callers park
// until the first one's function returns. If the function throws, the exception
// propagates to that caller and the Once is not done: the next call() runs its own
// function (std::call_once's rule; Go would count a panicking function as done). A
// call() from inside the function deadlocks, as in Go.
#pragma once

#include <atomic>
#include <mutex>
#include <utility>

#include <goro/scheduler/mutex.hpp>

namespace goro {

class Once {
 public:
  Once() = default;
  Once(const Once&) = delete;
  Once& operator=(const Once&) = delete;

  // Runs fn if no call() has completed one yet; blocks (parks) while another
  // goroutine's fn runs. Rethrows fn's exception.
  template <class F>
  void call(F&& fn) {
    // acquire: pairs with the release below, so fn's effects are visible.
    if (done_.load(std::memory_order_acquire)) return;
    std::lock_guard<Mutex> guard(mu_);
    if (done_.load(std::memory_order_relaxed)) return;  // mu_ orders it
    std::forward<F>(fn)();
    done_.store(true, std::memory_order_release);
  }

  // Whether a call() has completed its function. Never blocks.
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> done_{false};  // written under mu_, read anywhere
  Mutex mu_;                       // serialises the callers until done_
};

}  // namespace goro
