// Ms: starting, parking and waking OS threads, and handing Ps between them (thread.cpp).
#pragma once

#include <cstdint>

#include "sched.hpp"

namespace goro::detail {

// Makes the calling thread m's: its thread-local M pointer, errno and exception-state
// slots, signal mask and alternate signal stack (for the overflow report).
void setup_thread(M* m);
// Undoes setup_thread when the thread leaves the runtime.
void teardown_thread(M* m);

// Parks m until startm hands it a P; returns with m->p set, or without one when the
// runtime is exiting.
void stopm(M* m);

// Gives pp (an idle P when null) to an idle M, or starts a new M for it; spinning: the
// M starts looking for work (the caller has counted it in nmspinning).
void startm(P* pp, bool spinning);

// Starts one spinning M if there is an idle P and nobody spins (a G became runnable).
void wakep();

// A P's earliest timer became `when`: break the M blocked in the netpoller if it would
// sleep past it, or, with nobody polling, start an M to poll (Go's wakeNetPoller).
void wake_net_poller(std::int64_t when);

// lock_os_thread's scheduling. g, found runnable by m, is wired to another M: m gives
// that M its P and g (m is left without a P).
void start_locked_m(M* m, G* g);
// m is wired to a goroutine that is not running: hands its P (if any) off, and waits
// for start_locked_m. Returns false when the runtime is exiting instead.
bool stop_locked_m(M* m);

// Hands off pp, whose M is blocked (in a syscall) or gone: start an M for it if there
// is work or nobody is spinning, else put it on the idle list.
void handoffp(P* pp);

}  // namespace goro::detail
