// The netpoller as the scheduler drives it (netpoll.cpp). The side that goro::net uses
// (poll descriptors) is in detail/netpoll.hpp; the contract between the netpoller and
// the scheduler is written at the top of netpoll.cpp.
#pragma once

#include <cstdint>

#include "sched.hpp"

struct epoll_event;

namespace goro::detail {

class PollDesc;

void netpoll_init();
void netpoll_shutdown();
bool netpoll_inited();

// Polls: delay_ns < 0 blocks until an event or a break, 0 does not wait, > 0 waits at
// most that long. Returns the Gs made runnable, linked through G::link (*count of them),
// still in the waiting state: the caller makes them runnable (inject_list).
G* netpoll(std::int64_t delay_ns, int* count);

// The Gs that n events returned by epoll make runnable (netpoll's second half; tests
// feed it events). take_break: consume the eventfd's break (blocking polls only).
G* netpoll_ready(const epoll_event* events, int n, bool take_break, int* count);

// The data word epoll returns with pd's events while its current registration lasts.
std::uint64_t poll_event_data(PollDesc* pd);

// Wakes the M blocked in netpoll(-1 or > 0), if any; at most one break is pending.
void netpoll_break();

// Whether any G waits on a poll descriptor, or any is armed to start one (a poll is
// worth making).
bool netpoll_anything_waiting();
// How many Gs are parked on poll descriptors (armed ones hold none).
int netpoll_waiter_count();

}  // namespace goro::detail
