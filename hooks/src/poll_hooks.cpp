// poll, ppoll and select on a goroutine, with a timeout that is not zero: a poll with a
// zero timeout first, and when nothing is ready the goroutine parks until one of the
// descriptors may be, then polls again (a wake-up may be spurious), until the timeout.
//
// One descriptor waited on for one direction (libpq's and hiredis' blocking calls): a
// tracked socket parks on its watch, any other descriptor on net::wait_fd. Several
// (libcurl's easy interface polls its sockets and a wake-up pipe): one helper goroutine
// per descriptor and direction parks in net::wait_fd, the first that wakes cancels the
// others, and the caller polls again. So a poll costs goroutines, never threads; the
// price is a few system calls per descriptor per wait (wait_fd registers a duplicate).
// A descriptor the netpoller cannot take (a regular file, always ready for poll)
// ends the wait at once. With no descriptor at all, poll is a sleep.
//
// ppoll with a signal mask goes to libc (a goroutine has no signal mask of its own);
// epoll_wait is not hooked.

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/select.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <system_error>

#include <goro/net/errors.hpp>

#include <goro/scheduler/context.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "fd_table.hpp"
#include "libc.hpp"

namespace goro::hooks::detail {

namespace {

using net::Interest;
namespace rt = goro::detail;

constexpr short kReadEvents = POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND | POLLRDHUP;
constexpr short kWriteEvents = POLLOUT | POLLWRNORM | POLLWRBAND;

std::chrono::nanoseconds left_until(std::int64_t deadline) noexcept {
  if (deadline == 0) return std::chrono::nanoseconds::max();
  const std::int64_t now = rt::nanotime();
  return std::chrono::nanoseconds(deadline > now ? deadline - now : 0);
}

// Parks until one of fds may be ready, or the deadline (0: none). False when the
// netpoller cannot watch one of them (errno set): the caller falls back.
bool wait_for_any(pollfd* fds, nfds_t n, std::int64_t deadline) noexcept {
  int waits = 0;
  pollfd* only = nullptr;
  Interest only_interest = Interest::read;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0) continue;
    if ((fds[i].events & kReadEvents) != 0) {
      ++waits;
      only = &fds[i];
      only_interest = Interest::read;
    }
    if ((fds[i].events & kWriteEvents) != 0) {
      ++waits;
      only = &fds[i];
      only_interest = Interest::write;
    }
  }
  if (waits == 0) {
    // Nothing to wait for but hang-ups and errors, which epoll reports with any
    // registration: one read wait per descriptor catches them, else a plain sleep.
    bool any = false;
    for (nfds_t i = 0; i < n && !any; ++i) any = fds[i].fd >= 0;
    if (!any) {
      goro::sleep(left_until(deadline));
      return true;
    }
  }
  if (waits == 1) return wait_one(only->fd, only_interest, deadline) != WaitResult::failed;
  // Not a structured binding: clang 14 cannot capture one in a lambda.
  const auto cancellable = goro::with_cancel(goro::background());
  const goro::Context& ctx = cancellable.first;
  const goro::CancelFunc& cancel = cancellable.second;
  goro::WaitGroup helpers;
  std::atomic<bool> failed{false};
  auto start = [&](int fd, Interest interest) {
    helpers.add(1);
    goro::go([&, fd, interest] {
      const std::error_code ec = net::wait_fd(fd, interest, ctx);
      // Ready, closed, or cancelled by another helper: the caller polls again. Any
      // other error (no descriptor left for the duplicate) makes it fall back.
      if (ec && ec != ctx.err() && ec != net::errc::closed &&
          ec != std::errc::bad_file_descriptor && ec != std::errc::operation_not_permitted)
        failed.store(true, std::memory_order_relaxed);
      cancel();
      helpers.done();
    });
  };
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0) continue;
    const bool write = (fds[i].events & kWriteEvents) != 0;
    if ((fds[i].events & kReadEvents) != 0 || !write) start(fds[i].fd, Interest::read);
    if (write) start(fds[i].fd, Interest::write);
  }
  goro::sleep(left_until(deadline), ctx);
  cancel();
  helpers.wait();  // its acquire orders the helpers' stores before this load
  if (failed.load(std::memory_order_relaxed)) {
    set_errno(EMFILE);
    return false;
  }
  return true;
}

}  // namespace

// poll on a goroutine; timeout_ns < 0 for none.
int poll_goroutine(pollfd* fds, nfds_t n, std::int64_t timeout_ns) noexcept {
  const std::int64_t deadline = timeout_ns < 0 ? 0 : rt::nanotime_after(timeout_ns);
  for (;;) {
    const int r = libc::poll(fds, n, 0);
    if (r != 0) return r;
    if (deadline != 0 && rt::nanotime() >= deadline) return 0;
    if (!wait_for_any(fds, n, deadline)) {
      const std::chrono::nanoseconds left = left_until(deadline);
      const int ms = deadline == 0 ? -1 : static_cast<int>((left.count() + 999'999) / 1'000'000);
      return goro::blocking_long([&] { return libc::poll(fds, n, ms); });
    }
  }
}

}  // namespace goro::hooks::detail

using goro::hooks::detail::on_goroutine;
using goro::hooks::detail::poll_goroutine;
namespace libc = goro::hooks::detail::libc;

extern "C" {

// Named by linked.cpp, so that a program linking goro::hooks takes this object.
extern const int goro_hooks_object_poll;
const int goro_hooks_object_poll = 1;

int poll(pollfd* fds, nfds_t n, int timeout_ms) {
  if (timeout_ms == 0 || !on_goroutine()) return libc::poll(fds, n, timeout_ms);
  return poll_goroutine(fds, n, timeout_ms < 0 ? -1 : std::int64_t{timeout_ms} * 1'000'000);
}

int ppoll(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* sigmask) {
  if (sigmask != nullptr || !on_goroutine() ||
      (timeout != nullptr && timeout->tv_sec == 0 && timeout->tv_nsec == 0))
    return libc::ppoll(fds, n, timeout, sigmask);
  if (timeout != nullptr &&
      (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1'000'000'000)) {
    errno = EINVAL;
    return -1;
  }
  const std::int64_t ns =
      timeout == nullptr
          ? -1
          : static_cast<std::int64_t>(timeout->tv_sec) * 1'000'000'000 + timeout->tv_nsec;
  return poll_goroutine(fds, n, ns);
}

// select as a poll of the descriptors in its sets. Linux's select writes the time left
// into *timeout; so does this.
int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (!on_goroutine() || nfds < 0 || nfds > FD_SETSIZE ||
      (timeout != nullptr && timeout->tv_sec == 0 && timeout->tv_usec == 0))
    return libc::select(nfds, readfds, writefds, exceptfds, timeout);
  if (timeout != nullptr &&
      (timeout->tv_sec < 0 || timeout->tv_usec < 0 || timeout->tv_usec >= 1'000'000)) {
    errno = EINVAL;
    return -1;
  }
  pollfd fds[FD_SETSIZE];
  nfds_t n = 0;
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    if (readfds != nullptr && FD_ISSET(fd, readfds)) events |= POLLIN;
    if (writefds != nullptr && FD_ISSET(fd, writefds)) events |= POLLOUT;
    if (exceptfds != nullptr && FD_ISSET(fd, exceptfds)) events |= POLLPRI;
    if (events != 0) fds[n++] = pollfd{fd, events, 0};
  }
  const std::int64_t ns = timeout == nullptr
                              ? -1
                              : static_cast<std::int64_t>(timeout->tv_sec) * 1'000'000'000 +
                                    static_cast<std::int64_t>(timeout->tv_usec) * 1'000;
  const std::int64_t start = goro::detail::nanotime();
  const int r = poll_goroutine(fds, n, ns);
  if (r < 0) return r;
  if (timeout != nullptr) {
    std::int64_t left = ns - (goro::detail::nanotime() - start);
    if (left < 0) left = 0;
    timeout->tv_sec = left / 1'000'000'000;
    timeout->tv_usec = (left % 1'000'000'000) / 1'000;
  }
  for (nfds_t i = 0; i < n; ++i) {
    if ((fds[i].revents & POLLNVAL) != 0) {
      goro::hooks::detail::set_errno(EBADF);
      return -1;
    }
  }
  if (readfds != nullptr) FD_ZERO(readfds);
  if (writefds != nullptr) FD_ZERO(writefds);
  if (exceptfds != nullptr) FD_ZERO(exceptfds);
  int ready = 0;
  for (nfds_t i = 0; i < n; ++i) {
    const short ev = fds[i].revents;
    const int fd = fds[i].fd;
    if ((fds[i].events & POLLIN) != 0 && (ev & (POLLIN | POLLHUP | POLLERR)) != 0) {
      FD_SET(fd, readfds);
      ++ready;
    }
    if ((fds[i].events & POLLOUT) != 0 && (ev & (POLLOUT | POLLERR)) != 0) {
      FD_SET(fd, writefds);
      ++ready;
    }
    if ((fds[i].events & POLLPRI) != 0 && (ev & POLLPRI) != 0) {
      FD_SET(fd, exceptfds);
      ++ready;
    }
  }
  return ready;
}

}  // extern "C"
