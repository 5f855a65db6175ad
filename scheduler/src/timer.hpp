// The timer heaps as the scheduler drives them (timer.cpp; the Timer itself and
// timer_start/timer_stop are in detail/runtime.hpp).
#pragma once

#include <cstdint>

#include "sched.hpp"

namespace goro::detail {

// Runs pp's expired timers, at most max of them (max < 0: all), and returns its next
// deadline (0 if none; not after now while expired ones are left).
std::int64_t run_timers(P* pp, std::int64_t now, int max = -1);

// The earliest deadline over all Ps' heaps, 0 if none.
std::int64_t earliest_timer();

// Disarms t without waiting for a fire in progress (for timers that are never freed).
bool timer_stop_nowait(Timer* t);

}  // namespace goro::detail
