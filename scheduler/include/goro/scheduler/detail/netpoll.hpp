// The runtime's netpoller interface for goro::net (internal; see detail/runtime.hpp).
//
// One epoll instance, each descriptor registered once, edge-triggered, for in, out,
// rdhup and pri. A PollDesc has a reader slot and a writer slot; at most one G waits in
// each. How the netpoller and the scheduler work together is written at the top of
// scheduler/src/netpoll.cpp.
// Contract:
//  - poll_open / poll_close (or poll_forget): by the owner of the descriptor, once each.
//  - poll_wait(pd, mode): by at most one G per mode at a time (the net layer serialises
//    readers and writers of one connection); poll_start_on_read counts as the reader.
//  - poll_set_deadline / poll_evict / poll_interrupt: any thread, concurrently with
//    poll_wait.
//  - poll_start_on_read / poll_start_on_hangup: the netpoller's only calls up into the
//    layers above: each starts a function on a new goroutine, never on the poller's
//    thread. net offers them as Stream::start_on (goro/net/stream.hpp).
// PollDescs are recycled, never freed; each registration is numbered, and an event
// that epoll returned for an earlier one is dropped, so a late event for a closed
// descriptor never reaches the descriptor that reuses its PollDesc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace goro::detail {

class PollDesc;
struct G;

enum class PollStatus : std::uint8_t { ready, timeout, closed, interrupted };

// The direction a wait or a deadline concerns.
enum class IoMode : std::uint8_t { read, write, both };

// Which run of the netpoller is current: a new number for each goro::run, 0 between
// runs. PollDescs do not outlive their run: one opened in another run is gone, and its
// owner closes the descriptor without touching it (an object destroyed after
// goro::run returned).
std::uint32_t poll_generation() noexcept;

// Registers the non-blocking descriptor fd. Returns nullptr with errno set on failure.
PollDesc* poll_open(int fd);

// Unregisters and recycles pd. Call after poll_evict, when no G is inside poll_wait,
// and before closing the descriptor.
void poll_close(PollDesc* pd);

// As poll_close, for a descriptor that was closed while registered (a C library's,
// closed behind net::FdWatch's back): recycles pd without asking epoll to remove it.
// epoll dropped the registration when the file's last descriptor closed, and the
// number may already be someone else's, whose registration poll_close would remove. If
// the file lives on in a duplicate, its registration stays in epoll until that closes;
// its events carry pd's old sequence number and are dropped.
void poll_forget(PollDesc* pd);

// Wakes any G parked on pd with PollStatus::closed; later waits return closed at once.
void poll_evict(PollDesc* pd);

// Waits until the descriptor may be readable (read) or writable (write) since the last
// wait, the deadline for that mode passes, or pd is evicted. A readiness edge that
// arrived before the wait is not lost. Parks the G; never blocks the thread.
PollStatus poll_wait(PollDesc* pd, IoMode mode);  // mode: read or write

// Interrupts waiter's waits on pd in mode (read, write or both): wakes it if it is
// parked there, and makes its later waits in that mode return PollStatus::interrupted
// at once, until poll_clear_interrupt(pd, mode, waiter). Other goroutines' waits are
// not affected. For cancelling an operation (a context's cancellation).
void poll_interrupt(PollDesc* pd, IoMode mode, G* waiter);
void poll_clear_interrupt(PollDesc* pd, IoMode mode, G* waiter);

// Instead of a goroutine parked in poll_wait(pd, read): fn(arg) starts on a new
// goroutine (stack_size and name as GoOptions's; name must outlive the call) when a
// reader parked there would be woken: the descriptor may be readable, the read
// deadline passed, or pd is evicted. At once if one of those holds already, an edge
// included that arrived since the last wait. One start per call; until it starts, no
// goroutine may wait on pd for reading. A connection can wait this way holding no
// goroutine, and so no stack, while it is idle.
void poll_start_on_read(PollDesc* pd, void (*fn)(void*), void* arg, std::size_t stack_size,
                        const char* name);

// Also instead of a goroutine: fn(arg) starts on a new goroutine (as above) when epoll
// reports a hang-up of the descriptor (the peer closed or reset the connection: rdhup,
// hup or err), or pd is evicted; at once if one of those has happened already. One
// start per call; one armed at a time per descriptor. For a server that must learn of a
// client leaving while no goroutine reads (its handler runs).
void poll_start_on_hangup(PollDesc* pd, void (*fn)(void*), void* arg, std::size_t stack_size,
                          const char* name);
// Takes back a start armed by poll_start_on_hangup that has not happened: true when fn
// will not run, false when it runs or ran.
bool poll_cancel_start_on_hangup(PollDesc* pd);

// Whether epoll has reported a hang-up for the descriptor (peer closed its side, a
// local shutdown, or an error) or TCP urgent data: either can leave something to read
// after a read that came back short, with no edge to announce it. Sticky.
bool poll_hangup_or_urgent_seen(PollDesc* pd);

// When a poll last returned the descriptor readable (a nanotime()), 0 when none has
// since poll_open. Every edge is stamped, whether a goroutine waits or not.
std::int64_t poll_read_ready_at(const PollDesc* pd);

// Sets the deadline of mode read, write or both: an absolute nanotime(), 0 for none,
// or a time in the past (waits then return timeout at once). A G already parked sees
// the new deadline. A deadline that passes is expired by a timer, so it is seen up to
// one timer check late, as Go's are; one already past when set expires at once, unless
// an earlier one, already passed too, still has its timer to fire.
void poll_set_deadline(PollDesc* pd, std::int64_t deadline, IoMode mode);

// Whether mode's deadline (read or write) has expired: its timer fired, or it was set
// in the past. Cleared by poll_set_deadline.
bool poll_deadline_expired(const PollDesc* pd, IoMode mode);

}  // namespace goro::detail
