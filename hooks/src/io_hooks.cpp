// The data calls, connect and accept: on a goroutine, a tracked socket the user left
// blocking is made non-blocking underneath, the call is tried, and while it would block
// the goroutine parks on the netpoller and tries again. SO_RCVTIMEO / SO_SNDTIMEO bound
// the call, as the kernel's do (EAGAIN when they pass). A close of the socket by
// another goroutine or thread ends the wait with EBADF. Off a goroutine such a socket
// (non-blocking only because a goroutine used it) blocks the thread in poll(), so the
// caller sees libc's blocking call. Anything else goes to libc unchanged.

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstddef>

#include <goro/scheduler/detail/runtime.hpp>

#include "fd_table.hpp"
#include "libc.hpp"

namespace goro::hooks::detail {

namespace {

using net::Interest;

std::int64_t timeout_of(const FdState& st, Interest interest) noexcept {
  return (interest == Interest::read ? st.recv_timeout : st.send_timeout)
      .load(std::memory_order_relaxed);
}

bool would_block(long r) noexcept {
  if (r >= 0) return false;
  const int e = errno_now();
  return e == EAGAIN || e == EWOULDBLOCK;
}

// blocking_io's deadline: from the socket's SO_RCVTIMEO / SO_SNDTIMEO, now.
constexpr std::int64_t kDeadlineFromTimeout = -1;

// Runs op, a non-blocking attempt of the call, as a blocking call on fd. On a
// goroutine, deadline (an absolute nanotime(), 0 for none) ends the waits.
template <class Op>
auto blocking_io(int fd, Interest interest, Op op,
                 std::int64_t deadline = kDeadlineFromTimeout) noexcept -> decltype(op()) {
  FdState* st = blocking_socket(fd);
  if (st == nullptr) return op();
  const std::int64_t timeout = timeout_of(*st, interest);
  if (!on_goroutine()) {
    if ((st->flags.load(std::memory_order_relaxed) & kHookNonblock) == 0) return op();
    for (;;) {
      auto r = op();
      if (!would_block(r)) return r;
      const int n = poll_thread(fd, interest, timeout);
      if (n < 0) return -1;  // EINTR, as the blocking call would
      if (n == 0) {
        set_errno(EAGAIN);
        return -1;
      }
    }
  }
  if (!make_nonblocking(fd, *st)) return op();
  if (deadline == kDeadlineFromTimeout)
    deadline = timeout > 0 ? goro::detail::nanotime_after(timeout) : 0;
  for (;;) {
    auto r = op();
    if (!would_block(r)) return r;
    switch (wait_socket(fd, *st, interest, deadline)) {
      case WaitResult::ready: break;
      case WaitResult::timeout: set_errno(EAGAIN); return -1;
      case WaitResult::closed: set_errno(EBADF); return -1;
      case WaitResult::failed:
        if (poll_thread(fd, interest, 0) < 0) return -1;
        break;
    }
  }
}

// Runs op(done), a non-blocking attempt to send what is left after done bytes of total,
// as a blocking send: the kernel's blocking send on a stream socket returns only once
// all of it is queued (or the timeout passes, or an error comes: then it reports what
// it sent before, if anything), so a short attempt is followed by another. On a
// goroutine SO_SNDTIMEO bounds the whole send, as it does the kernel's.
template <class Op>
ssize_t blocking_send(int fd, std::size_t total, Op op) noexcept {
  const FdState* st = blocking_socket(fd);
  const std::int64_t timeout = st != nullptr ? timeout_of(*st, Interest::write) : 0;
  const std::int64_t deadline = timeout > 0 ? goro::detail::nanotime_after(timeout) : 0;
  std::size_t done = 0;
  for (;;) {
    const ssize_t r = blocking_io(
        fd, Interest::write, [&] { return op(done); }, deadline);
    if (r < 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
    done += static_cast<std::size_t>(r);
    if (done >= total || r == 0 || blocking_socket(fd) == nullptr)
      return static_cast<ssize_t>(done);
  }
}

// The iovecs of iov past the first done bytes, in out (same count; leading ones empty).
void skip_iovecs(const iovec* iov, int count, std::size_t done, iovec* out) noexcept {
  for (int i = 0; i < count; ++i) {
    const std::size_t skip = std::min(done, iov[i].iov_len);
    out[i].iov_base = static_cast<char*>(iov[i].iov_base) + skip;
    out[i].iov_len = iov[i].iov_len - skip;
    done -= skip;
  }
}

std::size_t iovecs_size(const iovec* iov, int count) noexcept {
  std::size_t n = 0;
  for (int i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// The result of a connect that is in progress on fd, once the socket is writable.
int connect_result(int fd) noexcept {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -1;
  if (err != 0) {
    set_errno(err);
    return -1;
  }
  return 0;
}

int accepted(int fd, int flags) noexcept {
  if (fd >= 0) track_socket(fd, (flags & SOCK_NONBLOCK) != 0);
  return fd;
}

}  // namespace

}  // namespace goro::hooks::detail

using goro::hooks::detail::blocking_io;
using goro::hooks::detail::blocking_send;
using goro::hooks::detail::blocking_socket;
using goro::hooks::detail::iovecs_size;
using goro::hooks::detail::skip_iovecs;
using goro::net::Interest;
namespace libc = goro::hooks::detail::libc;

extern "C" {

// Named by linked.cpp, so that a program linking goro::hooks takes this object.
extern const int goro_hooks_object_io;
const int goro_hooks_object_io = 1;

ssize_t read(int fd, void* buf, size_t n) {
  return blocking_io(fd, Interest::read, [&] { return libc::read(fd, buf, n); });
}

ssize_t write(int fd, const void* buf, size_t n) {
  if (blocking_socket(fd) == nullptr) return libc::write(fd, buf, n);
  return blocking_send(fd, n, [&](std::size_t done) {
    return libc::write(fd, static_cast<const char*>(buf) + done, n - done);
  });
}

ssize_t readv(int fd, const iovec* iov, int count) {
  return blocking_io(fd, Interest::read, [&] { return libc::readv(fd, iov, count); });
}

ssize_t writev(int fd, const iovec* iov, int count) {
  if (blocking_socket(fd) == nullptr || count <= 0 || count > IOV_MAX)
    return libc::writev(fd, iov, count);
  iovec rest[IOV_MAX];
  return blocking_send(fd, iovecs_size(iov, count), [&](std::size_t done) {
    skip_iovecs(iov, count, done, rest);
    return libc::writev(fd, rest, count);
  });
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return libc::recv(fd, buf, n, flags);
  if ((flags & MSG_WAITALL) != 0 && blocking_socket(fd) != nullptr) {
    // Non-blocking underneath, MSG_WAITALL returns what is there: wait for the rest, as
    // the blocking call does, until all of it, the end of the stream, or an error.
    std::size_t done = 0;
    while (done < n) {
      const ssize_t r = blocking_io(fd, Interest::read, [&] {
        return libc::recv(fd, static_cast<char*>(buf) + done, n - done, flags);
      });
      if (r < 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    return static_cast<ssize_t>(done);
  }
  return blocking_io(fd, Interest::read, [&] { return libc::recv(fd, buf, n, flags); });
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* from_len) {
  if ((flags & MSG_DONTWAIT) != 0) return libc::recvfrom(fd, buf, n, flags, from, from_len);
  return blocking_io(fd, Interest::read,
                     [&] { return libc::recvfrom(fd, buf, n, flags, from, from_len); });
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return libc::recvmsg(fd, msg, flags);
  return blocking_io(fd, Interest::read, [&] { return libc::recvmsg(fd, msg, flags); });
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return libc::send(fd, buf, n, flags);
  if (blocking_socket(fd) == nullptr) return libc::send(fd, buf, n, flags);
  return blocking_send(fd, n, [&](std::size_t done) {
    return libc::send(fd, static_cast<const char*>(buf) + done, n - done, flags);
  });
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t to_len) {
  if ((flags & MSG_DONTWAIT) != 0) return libc::sendto(fd, buf, n, flags, to, to_len);
  if (blocking_socket(fd) == nullptr) return libc::sendto(fd, buf, n, flags, to, to_len);
  return blocking_send(fd, n, [&](std::size_t done) {
    return libc::sendto(fd, static_cast<const char*>(buf) + done, n - done, flags, to, to_len);
  });
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return libc::sendmsg(fd, msg, flags);
  if (blocking_socket(fd) == nullptr || msg->msg_iovlen > IOV_MAX)
    return libc::sendmsg(fd, msg, flags);
  const int count = static_cast<int>(msg->msg_iovlen);
  iovec rest[IOV_MAX];
  msghdr left = *msg;
  left.msg_iov = rest;
  return blocking_send(fd, iovecs_size(msg->msg_iov, count), [&](std::size_t done) {
    skip_iovecs(msg->msg_iov, count, done, rest);
    // Ancillary data (descriptors, credentials) goes with the first bytes only.
    if (done > 0) {
      left.msg_control = nullptr;
      left.msg_controllen = 0;
    }
    return libc::sendmsg(fd, &left, flags);
  });
}

int accept(int fd, sockaddr* addr, socklen_t* len) {
  return goro::hooks::detail::accepted(
      blocking_io(fd, Interest::read, [&] { return libc::accept(fd, addr, len); }), 0);
}

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return goro::hooks::detail::accepted(
      blocking_io(fd, Interest::read, [&] { return libc::accept4(fd, addr, len, flags); }), flags);
}

// connect: started non-blocking, then a wait for writable (SO_SNDTIMEO bounds it; when
// it passes the call fails with EINPROGRESS, as Linux's blocking connect does) and the
// result from SO_ERROR. A Unix socket whose listener's backlog is full answers EAGAIN
// rather than EINPROGRESS; the blocking call waits then, and so does the goroutine,
// retrying the connect once writable.
int connect(int fd, const sockaddr* addr, socklen_t len) {
  using namespace goro::hooks::detail;
  FdState* st = blocking_socket(fd);
  if (st == nullptr) return libc::connect(fd, addr, len);
  const bool goroutine = on_goroutine();
  if (!goroutine && (st->flags.load(std::memory_order_relaxed) & kHookNonblock) == 0)
    return libc::connect(fd, addr, len);
  if (goroutine && !make_nonblocking(fd, *st)) return libc::connect(fd, addr, len);
  const std::int64_t timeout = st->send_timeout.load(std::memory_order_relaxed);
  const std::int64_t deadline = timeout > 0 ? goro::detail::nanotime_after(timeout) : 0;
  // Waits for writable: 0, or -1 with errno set.
  auto wait_writable = [&]() -> int {
    if (!goroutine) {
      const int n = poll_thread(fd, Interest::write, timeout);
      if (n != 0) return n < 0 ? -1 : 0;
      set_errno(EINPROGRESS);
      return -1;
    }
    switch (wait_socket(fd, *st, Interest::write, deadline)) {
      case WaitResult::ready: return 0;
      case WaitResult::timeout: set_errno(EINPROGRESS); return -1;
      case WaitResult::closed: set_errno(EBADF); return -1;
      case WaitResult::failed: return poll_thread(fd, Interest::write, 0) < 0 ? -1 : 0;
    }
    return 0;
  };
  int r = libc::connect(fd, addr, len);
  while (r < 0 && errno_now() == EAGAIN) {
    if (wait_writable() < 0) return -1;
    r = libc::connect(fd, addr, len);
  }
  if (r == 0 || errno_now() != EINPROGRESS) return r;
  for (;;) {
    if (wait_writable() < 0) return -1;
    // A spurious wake-up leaves the connect in progress, and SO_ERROR 0 then too.
    pollfd p{fd, POLLOUT, 0};
    if (libc::poll(&p, 1, 0) != 0) return connect_result(fd);
  }
}

}  // extern "C"
