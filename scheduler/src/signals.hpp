// The runtime's signals (signals.cpp): SIGURG preempts a goroutine that never calls
// the runtime, SIGSEGV/SIGBUS on a guard page report a stack overflow.
#pragma once

#include "sched.hpp"

namespace goro::detail {

// Installs the preemption and overflow handlers (once per process).
void install_runtime_signals();

// Prints "goroutine N: stack overflow" on stderr and aborts the process. Async-signal
// safe: also called from the SIGSEGV handler, on the thread's alternate signal stack.
[[noreturn]] void report_stack_overflow(const G* g);

// Ends every goro::signal_notify registration, as the run ends, and gives each signal
// back its previous disposition (signal_notify.cpp).
void signal_notify_reset();

}  // namespace goro::detail
