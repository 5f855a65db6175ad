// lock_os_thread: wiring a goroutine to its thread. The scheduling side is in
// schedule.cpp (the loop of a wired M, and a wired G found by another M) and thread.cpp
// (start_locked_m, stop_locked_m).

#include <goro/scheduler/runtime.hpp>

#include "sched.hpp"

namespace goro {

using namespace detail;

void lock_os_thread() {
  G* g = current_g();
  if (g == nullptr) return;
  // Under a RuntimeScope the preemption signal cannot detach the P meanwhile, and a P
  // it detached before is taken back: g->m is the thread g runs on.
  RuntimeScope scope;
  if (g->lock_depth++ == 0) {
    g->lockedm = g->m;
    g->m->lockedg = g;
  }
}

void unlock_os_thread() {
  G* g = current_g();
  if (g == nullptr || g->lock_depth == 0) return;
  RuntimeScope scope;
  if (--g->lock_depth == 0) {
    g->m->lockedg = nullptr;
    g->lockedm = nullptr;
  }
}

}  // namespace goro
