// The runtime's signals (signals.cpp): SIGURG preempts a goroutine that never calls
// the runtime, SIGSEGV/SIGBUS on a guard page report a stack overflow.
#pragma once

#include "sched.hpp"

namespace goro::detail {

// Installs the preemption and overflow handlers (once per process).
void install_runtime_signals();

// A goroutine the preemption signal detached from its P keeps running on its thread
// (a hog); the handler moves that thread to SCHED_IDLE, so the kernel runs it only
// when the threads that hold Ps leave the core, and the hog's next safe point moves it
// back to SCHED_OTHER. Only where the process may leave SCHED_IDLE again (root,
// CAP_SYS_NICE or an RLIMIT_NICE that allows nice 0), which hog_priority_probe finds
// out once, on a thread of its own, before the first run.
void hog_priority_probe();
// Async-signal-safe: lowers the calling thread's priority, noting it in m.
void hog_priority_lower(M* m);
// Undoes hog_priority_lower, if it lowered anything.
void hog_priority_restore(M* m);

// Prints "goroutine N: stack overflow" on stderr and aborts the process. Async-signal
// safe: also called from the SIGSEGV handler, on the thread's alternate signal stack.
[[noreturn]] void report_stack_overflow(const G* g);

// Ends every goro::signal_notify registration, as the run ends, and gives each signal
// back its previous disposition (signal_notify.cpp).
void signal_notify_reset();

}  // namespace goro::detail
