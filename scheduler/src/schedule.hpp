// The scheduling loop (schedule.cpp, where the scheduler's design is described).
#pragma once

#include "sched.hpp"

namespace goro::detail {

// The loop every M runs on its g0: find a runnable G (find_runnable), run it until it
// switches back, do what it asked for, repeat. Returns when the runtime exits.
void schedule_loop(M* m);

// Makes a list of Gs the netpoller returned (linked through G::link, n of them)
// runnable: onto pp's queue, or the global queue when pp is null, waking Ms for them.
void inject_list(P* pp, G* list, int n);

}  // namespace goro::detail
