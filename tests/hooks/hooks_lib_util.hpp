// What the library tests of goro::hooks share: a figure printed for the docs, and the
// run of N goroutines at once whose elapsed time and thread count they check.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::hooks::testing {

struct Burst {
  double ms = 0;           // from the first start to the last end
  int threads_before = 0;  // the runtime's threads before the first start
  int threads = 0;         // the runtime's threads afterwards (goro::stats().threads)
  int succeeded = 0;       // calls for which fn returned true
};

// The most threads a burst may leave when its calls should take at most `budget`.
// Threads made before it (a slow connect handed off under a sanitizer, say) live on for
// the runtime's idle thread timeout; they are not the burst's.
inline int thread_bound(const Burst& b, int budget) { return std::max(b.threads_before, budget); }

// Runs fn(i) for i in [0, n) on n goroutines at once; returns when all are done.
inline Burst burst(int n, const std::function<bool(int)>& fn) {
  std::atomic<int> ok{0};
  goro::WaitGroup wg;
  const int threads_before = goro::stats().threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    wg.add(1);
    goro::go([&, i] {
      if (fn(i)) ok.fetch_add(1);
      wg.done();
    });
  }
  wg.wait();
  Burst b;
  b.threads_before = threads_before;
  b.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  b.threads = goro::stats().threads;
  b.succeeded = ok.load();
  return b;
}

inline void print(const char* what, int n, const Burst& b) {
  std::printf("%s: %d calls at %d P: %.0f ms, %d threads (%d before), %d succeeded\n", what,
              n, goro::maxprocs(), b.ms, b.threads, b.threads_before, b.succeeded);
}

}  // namespace goro::hooks::testing
