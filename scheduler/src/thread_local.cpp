// goro::ThreadLocal's scopes (goro/scheduler/thread_local.hpp), and the check that a
// goroutine holding one does not enter the runtime.
//
// A scope is counted on the G that opens it. Every way a goroutine can leave its thread
// passes through check_no_thread_local_scope first: park, yield, the safe point of a
// RuntimeScope (which also guards every runtime lock, Context and channel operation,
// and the readying of another goroutine) and entering a blocking call. A goroutine that
// gets there inside a scope would leave the thread's state half-edited for the next
// goroutine on this thread, and edit another thread's copy if it resumed elsewhere:
// the process ends there, with a stack that names the call.
#include <goro/scheduler/thread_local.hpp>

#include <cstdio>

#include "sched.hpp"

namespace goro::detail {

G* thread_local_scope_open() noexcept {
  M* m = this_m();
  G* g = m != nullptr ? m->curg.load(std::memory_order_relaxed) : nullptr;
  if (g != nullptr) ++g->thread_local_scopes;
  return g;
}

void thread_local_scope_close(G* g) noexcept {
  if (g != nullptr) --g->thread_local_scopes;
}

void check_no_thread_local_scope(const G* g, const char* what) {
  if (g == nullptr || g->thread_local_scopes == 0) return;
  char msg[160];
  std::snprintf(msg, sizeof msg,
                "goroutine %llu: %s inside a goro::ThreadLocal scope (it may park or change "
                "threads; close the scope first)",
                static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)), what);
  fatal(msg);
}

}  // namespace goro::detail
