// The calls that make, close and configure descriptors: the hooks track sockets from
// their creation, keep the O_NONBLOCK the user asked for (fcntl's F_GETFL and
// ioctl(FIONBIO) report and set the user's view, while a socket a goroutine used stays
// non-blocking underneath), and record SO_RCVTIMEO / SO_SNDTIMEO, which bound the
// goroutine's waits as the kernel's bound a blocking call.

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "fd_table.hpp"
#include "libc.hpp"

namespace libc = goro::hooks::detail::libc;
using goro::hooks::detail::FdState;
using goro::hooks::detail::kHookNonblock;
using goro::hooks::detail::kSocket;
using goro::hooks::detail::kUserNonblock;

namespace {

FdState* tracked(int fd) noexcept {
  FdState* st = goro::hooks::detail::socket_state(fd);
  return st != nullptr && (st->flags.load(std::memory_order_relaxed) & kSocket) != 0 ? st : nullptr;
}

void set_user_nonblock(FdState& st, bool on) noexcept {
  if (on) {
    st.flags.fetch_or(kUserNonblock, std::memory_order_relaxed);
  } else {
    st.flags.fetch_and(~kUserNonblock, std::memory_order_relaxed);
  }
}

int do_fcntl(int fd, int cmd, unsigned long arg) noexcept {
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
    const int copy = libc::fcntl(fd, cmd, arg);
    if (copy >= 0) goro::hooks::detail::track_duplicate(fd, copy);
    return copy;
  }
  FdState* st = (cmd == F_GETFL || cmd == F_SETFL) ? tracked(fd) : nullptr;
  if (st == nullptr) return libc::fcntl(fd, cmd, arg);
  const bool hook_nonblock = (st->flags.load(std::memory_order_relaxed) & kHookNonblock) != 0;
  if (cmd == F_GETFL) {
    const int fl = libc::fcntl(fd, F_GETFL);
    if (fl < 0 || !hook_nonblock) return fl;
    const bool user = (st->flags.load(std::memory_order_relaxed) & kUserNonblock) != 0;
    return user ? fl : fl & ~O_NONBLOCK;
  }
  const int r =
      libc::fcntl(fd, F_SETFL, hook_nonblock ? arg | static_cast<unsigned long>(O_NONBLOCK) : arg);
  if (r == 0) set_user_nonblock(*st, (arg & O_NONBLOCK) != 0);
  return r;
}

std::int64_t to_nanoseconds(const timeval& tv) noexcept {
  return static_cast<std::int64_t>(tv.tv_sec) * 1'000'000'000 +
         static_cast<std::int64_t>(tv.tv_usec) * 1'000;
}

}  // namespace

extern "C" {

// Named by linked.cpp, so that a program linking goro::hooks takes this object.
extern const int goro_hooks_object_fd;
const int goro_hooks_object_fd = 1;

int socket(int domain, int type, int protocol) noexcept {
  const int fd = libc::socket(domain, type, protocol);
  if (fd >= 0) goro::hooks::detail::track_socket(fd, (type & SOCK_NONBLOCK) != 0);
  return fd;
}

int socketpair(int domain, int type, int protocol, int fds[2]) noexcept {
  const int r = libc::socketpair(domain, type, protocol, fds);
  if (r == 0) {
    goro::hooks::detail::track_socket(fds[0], (type & SOCK_NONBLOCK) != 0);
    goro::hooks::detail::track_socket(fds[1], (type & SOCK_NONBLOCK) != 0);
  }
  return r;
}

int close(int fd) {
  goro::hooks::detail::forget_fd(fd);
  return libc::close(fd);
}

// A duplicate of a tracked socket is tracked as it is (track_duplicate). dup2 and dup3
// close newfd first.
int dup(int oldfd) noexcept {
  const int fd = libc::dup(oldfd);
  if (fd >= 0) goro::hooks::detail::track_duplicate(oldfd, fd);
  return fd;
}

int dup2(int oldfd, int newfd) noexcept {
  if (oldfd == newfd) return libc::dup2(oldfd, newfd);
  goro::hooks::detail::forget_fd(newfd);
  const int fd = libc::dup2(oldfd, newfd);
  if (fd >= 0) goro::hooks::detail::track_duplicate(oldfd, fd);
  return fd;
}

int dup3(int oldfd, int newfd, int flags) noexcept {
  if (oldfd != newfd) goro::hooks::detail::forget_fd(newfd);
  const int fd = libc::dup3(oldfd, newfd, flags);
  if (fd >= 0) goro::hooks::detail::track_duplicate(oldfd, fd);
  return fd;
}

// The third argument, when there is one, is an int or a pointer; it is passed on as
// a word, which is how the x86-64 and AArch64 calling conventions pass either.
int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return do_fcntl(fd, cmd, arg);
}

// glibc's name for fcntl in programs built with _FILE_OFFSET_BITS=64 (or 64-bit time).
int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return do_fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) noexcept {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (request == FIONBIO && arg != nullptr) {
    if (FdState* st = tracked(fd)) {
      const bool on = *static_cast<int*>(arg) != 0;
      if ((st->flags.load(std::memory_order_relaxed) & kHookNonblock) != 0) {
        set_user_nonblock(*st, on);  // it stays non-blocking underneath
        return 0;
      }
      const int r = libc::ioctl(fd, request, arg);
      if (r == 0) set_user_nonblock(*st, on);
      return r;
    }
  }
  return libc::ioctl(fd, request, arg);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) noexcept {
  const int r = libc::setsockopt(fd, level, name, value, len);
  if (r == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) &&
      len >= sizeof(timeval)) {
    if (FdState* st = tracked(fd)) {
      const std::int64_t ns = to_nanoseconds(*static_cast<const timeval*>(value));
      (name == SO_RCVTIMEO ? st->recv_timeout : st->send_timeout)
          .store(ns, std::memory_order_relaxed);
    }
  }
  return r;
}

}  // extern "C"
