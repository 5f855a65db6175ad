// The runtime's signals (signals.cpp): SIGURG preempts a goroutine that never calls
// the runtime, SIGSEGV/SIGBUS on a guard page report a stack overflow.
#pragma once

#include "sched.hpp"

namespace goro::detail {

// Installs the preemption and overflow handlers (once per process).
void install_runtime_signals();

// A goroutine the preemption signal detached from its P keeps running on its thread
// (a hog); the handler drops that thread to nice 19 so the threads that hold Ps keep
// their cores, and the hog's next safe point restores it. Only where the process may
// raise a thread's priority back (root, CAP_SYS_NICE or RLIMIT_NICE), which
// hog_priority_probe finds out once, on a thread of its own, before the first run.
void hog_priority_probe();
// Async-signal-safe: lowers the calling thread's priority, saving it in m.
void hog_priority_lower(M* m);
// Restores what hog_priority_lower saved, if anything: from m's own thread at its safe
// point, or from run_main's shutdown (a hog it waits for must not wait for a CPU at
// nice 19 behind the rest of the machine).
void hog_priority_restore(M* m);

// Prints "goroutine N: stack overflow" on stderr and aborts the process. Async-signal
// safe: also called from the SIGSEGV handler, on the thread's alternate signal stack.
[[noreturn]] void report_stack_overflow(const G* g);

// Ends every goro::signal_notify registration, as the run ends, and gives each signal
// back its previous disposition (signal_notify.cpp).
void signal_notify_reset();

}  // namespace goro::detail
