// What the hooks know about each descriptor, and the goroutine's wait on one.
//
// Only sockets are tracked: those made through the hooked socket, socketpair, accept
// and accept4 (every socket a library makes, once the hooks are linked). Any other
// descriptor (a file, a pipe, a socket made before the hooks or by libc itself, as
// getaddrinfo's) has no entry, and every call on it is libc's.
//
// The table is indexed by descriptor number: 1024 pages of 4096 entries, each page
// mapped (mmap, not malloc) the first time a descriptor in it is tracked and never
// unmapped, so an entry's address is stable and a lookup is two loads and no lock.
// Descriptors past 4 Mi are not tracked.
//
// An entry's flags and timeouts are atomics, read without a lock by every hooked call;
// they are written by socket creation, close, fcntl/ioctl and setsockopt, which race
// only with themselves in a program that already races on the descriptor. The watch
// (the descriptor's registration with the netpoller, made by the first goroutine that
// has to wait) is guarded by the entry's spin lock, held for a few instructions.
#pragma once

#include <atomic>
#include <cstdint>

#include <goro/net/wait_fd.hpp>

namespace goro::hooks::detail {

// FdState::flags.
inline constexpr std::uint32_t kSocket = 1;        // a tracked socket
inline constexpr std::uint32_t kUserNonblock = 2;  // the user asked for O_NONBLOCK
inline constexpr std::uint32_t kHookNonblock = 4;  // O_NONBLOCK is set underneath

struct Watch;  // fd_table.cpp

struct FdState {
  std::atomic<std::uint32_t> flags{0};
  // SO_RCVTIMEO / SO_SNDTIMEO in nanoseconds, 0 for none.
  std::atomic<std::int64_t> recv_timeout{0};
  std::atomic<std::int64_t> send_timeout{0};
  std::atomic<std::uint32_t> lock{0};  // guards watch
  Watch* watch = nullptr;
};

// The entry of a tracked socket, or null (not tracked, never was, or out of range).
FdState* socket_state(int fd) noexcept;

// Whether the hooks should turn this call into a goroutine's wait: the descriptor is a
// tracked socket the user left blocking. Returns its entry, or null for libc.
inline FdState* blocking_socket(int fd) noexcept {
  FdState* st = socket_state(fd);
  if (st == nullptr) return nullptr;
  const std::uint32_t f = st->flags.load(std::memory_order_relaxed);
  return (f & kSocket) != 0 && (f & kUserNonblock) == 0 ? st : nullptr;
}

// A new socket fd (socket, socketpair, accept): tracked from now on, with the user's
// O_NONBLOCK as given. A watch left from an earlier descriptor of that number (closed
// behind the hooks' back) is released.
void track_socket(int fd, bool user_nonblock) noexcept;

// copy is a new descriptor for fd's open file (dup, dup2, dup3, F_DUPFD): tracked as
// fd is, sharing its O_NONBLOCK and its timeouts, which belong to the file (the hooks'
// O_NONBLOCK underneath, set on the file, must stay hidden from copy's user too).
void track_duplicate(int fd, int copy) noexcept;

// fd is about to be closed (close, or dup2/dup3 onto it): goroutines waiting on it
// return with EBADF, its registration is dropped and it is no longer tracked.
void forget_fd(int fd) noexcept;

// Whether the caller is a goroutine of a running goro::run.
bool on_goroutine() noexcept;

// errno of the thread running the caller now, read and set. glibc declares
// __errno_location const, so a compiler may compute errno's address once in a function
// and keep it across a call that parks; a goroutine that resumed on another thread would
// then read or set the old thread's errno. These are not inlined: each call looks the
// address up afresh. Every errno read or set after a possible park goes through them.
int errno_now() noexcept;
void set_errno(int value) noexcept;

// Sets O_NONBLOCK underneath (kHookNonblock) if it is not yet. False if fcntl failed.
bool make_nonblocking(int fd, FdState& st) noexcept;

enum class WaitResult : std::uint8_t {
  ready,    // may be ready: retry the operation
  timeout,  // the deadline passed
  closed,   // the descriptor was closed by another goroutine or thread (EBADF)
  failed,   // the netpoller cannot watch it (errno set); the caller blocks the thread
};

// Parks the calling goroutine until the tracked socket fd may be ready for interest, or
// until deadline (an absolute nanotime(), 0 for none). Edge-triggered: the caller has
// retried its operation until EAGAIN since its last wait. Precondition: on_goroutine().
WaitResult wait_socket(int fd, FdState& st, net::Interest interest, std::int64_t deadline) noexcept;

// Parks until fd may be ready for interest, or until deadline (0: none): a tracked
// socket on its watch (registered once, edge-triggered: the caller polled it with a
// zero timeout since its last wait), anything else through wait_any_fd.
WaitResult wait_one(int fd, net::Interest interest, std::int64_t deadline) noexcept;

// The same for any descriptor, tracked or not, level-triggered (net::wait_fd: a
// registration of a duplicate for the length of the wait).
WaitResult wait_any_fd(int fd, net::Interest interest, std::int64_t deadline) noexcept;

// Blocks the thread in the next poll() until fd is ready for interest, or timeout_ns
// (0: none) passes: the libc behaviour of a blocking socket that the hooks made
// non-blocking, for a caller that is not a goroutine. Returns poll's result.
int poll_thread(int fd, net::Interest interest, std::int64_t timeout_ns) noexcept;

}  // namespace goro::hooks::detail
