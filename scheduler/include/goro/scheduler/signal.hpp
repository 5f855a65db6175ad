// goro::signal_notify: operating-system signals delivered to channels, as Go's os/signal
// package delivers them.
//
//   goro::Chan<int> signals(1);
//   goro::signal_notify(signals, {SIGINT, SIGTERM});
//   signals.recv();                 // parks until one arrives
//   server.shutdown(deadline);
//
// A signal handler may do almost nothing (no lock, no allocation, no runtime call), so
// the work is left to a relay: the handler writes the signal's number to a pipe, and a
// relay thread reads it and sends it to every channel that asked for it. A goroutine
// waiting on such a channel parks like any receiver: nothing polls.
#pragma once

#include <initializer_list>
#include <system_error>

#include <goro/scheduler/chan.hpp>

namespace goro {

// From now on, each of `signals` that reaches the process is sent to ch, without
// blocking: when ch has no room (its buffer is full, or it is unbuffered and no receiver
// waits) the signal is dropped for ch, as in Go, so give ch a buffer (one slot is enough
// to learn that a signal came). While any channel asks for a signal, its default action
// (ending the process, for SIGINT and SIGTERM) does not happen. Several channels may ask
// for one signal; a channel may be given more signals by calling again. Registrations
// end with signal_stop, and all of them when goro::run returns.
// Fails with std::errc::invalid_argument, registering nothing, for a number that is no
// signal, for SIGKILL and SIGSTOP (no process may catch them), and for the signals the
// runtime keeps: SIGURG (preemption) and the faults SIGSEGV, SIGBUS, SIGFPE and SIGILL.
std::error_code signal_notify(const Chan<int>& ch, std::initializer_list<int> signals);

// Stops sending signals to ch. When it returns, ch receives no more. (A registered
// channel that is closed without signal_stop only stops receiving; nothing throws.) A signal that
// no channel asks for any more gets back the disposition it had before the first signal_notify for
// it (the default action, or what the program had set).
void signal_stop(const Chan<int>& ch);

}  // namespace goro
