#include "net_fd.hpp"

#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>

#include <goro/net/errors.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>

#include "internal.hpp"
#include "sys.hpp"

namespace goro::net::detail {

namespace rt = goro::detail;

// Holds a reference (and the read or write lock) for one operation; the last release
// of a closed NetFd destroys the descriptor.
class NetFd::OpGuard {
 public:
  enum Kind { ref, read, write };
  OpGuard(NetFd& fd, Kind kind) noexcept : fd_(fd), kind_(kind) {
    held_ = kind == ref ? fd.mu_.incref() : fd.mu_.rwlock(kind == read);
  }
  ~OpGuard() {
    if (!held_) return;
    bool last = kind_ == ref ? fd_.mu_.decref() : fd_.mu_.rwunlock(kind_ == read);
    if (last) fd_.destroy_for_closer();
  }
  OpGuard(const OpGuard&) = delete;
  OpGuard& operator=(const OpGuard&) = delete;
  bool held() const noexcept { return held_; }

 private:
  NetFd& fd_;
  Kind kind_;
  bool held_;
};

NetFd::~NetFd() {
  // Owners close before destroying; a NetFd whose init() failed is already closed.
  if (!destroyed_.load(std::memory_order_acquire)) {
    close();
  }
  assert(destroyed_.load(std::memory_order_relaxed));
}

std::error_code NetFd::init() {
  pd_ = rt::poll_open(fd_);
  poll_generation_ = rt::poll_generation();
  if (pd_ == nullptr) {
    std::error_code ec = last_errno();
    ::close(fd_);
    fd_ = -1;
    destroyed_.store(true, std::memory_order_release);
    return ec;
  }
  return {};
}

std::error_code NetFd::destroy() noexcept {
  // Unregister before closing, so the number cannot be reused while still in epoll.
  if (pd_ != nullptr) rt::poll_close(pd_);
  pd_ = nullptr;
  int rc, err = 0;
  if (lingers_.load(std::memory_order_acquire) && rt::current_g() != nullptr) {
    // SO_LINGER with a time: close waits (up to that time) for unsent data to go out.
    rc = goro::blocking([&] {
      int r = ::close(fd_);
      if (r != 0) err = errno;
      return r;
    });
  } else {
    rc = ::close(fd_);
    if (rc != 0) err = errno;
  }
  destroyed_.store(true, std::memory_order_release);
  return rc == 0 || err == EINTR ? std::error_code() : errno_code(err);
}

void NetFd::destroy_for_closer() noexcept {
  destroy();
  // The last touch of this NetFd: the closer, parked in close(), may free it next.
  closed_sema_.release();
}

std::error_code NetFd::close() {
  if (destroyed_.load(std::memory_order_acquire) || !mu_.incref_and_close()) return errc::closed;
  // Closed after its goro::run returned: the poll descriptor went with that run.
  if (poll_generation_ != rt::poll_generation()) pd_ = nullptr;
  if (pd_ != nullptr) rt::poll_evict(pd_);
  if (mu_.decref()) return destroy();
  // An operation still holds a reference; it fails at once now (evicted, or closed when
  // it reaches the lock) and the last one out destroys the descriptor. Wait for that,
  // as Go's Close does, so the owner may free this NetFd when close() returns.
  if (rt::current_g() != nullptr) closed_sema_.acquire(false, rt::WaitReason::other);
  return {};
}

bool NetFd::deadline_passed(IoMode mode) const noexcept {
  std::int64_t d = deadline(mode);
  if (d == 0) return false;
  // In a run, the poll descriptor's flag, as Go does: no clock read per operation.
  if (pd_ != nullptr && poll_generation_ == rt::poll_generation())
    return rt::poll_deadline_expired(pd_, mode);
  return rt::nanotime() >= d;
}

// Parks until the fd may be ready for mode. The hot paths compare the status and build
// an error only when it is not ready (a std::error_code costs a call to
// std::system_category() even when it holds no error).
rt::PollStatus NetFd::wait(IoMode mode) noexcept { return rt::poll_wait(pd_, mode); }

namespace {
std::error_code wait_error(rt::PollStatus status) noexcept {
  switch (status) {
    case rt::PollStatus::timeout:
      return errc::timeout;
    case rt::PollStatus::interrupted:
      return errc::interrupted;
    default:
      return errc::closed;
  }
}
}  // namespace

void NetFd::interrupt(IoMode mode, rt::G* waiter) {
  OpGuard guard(*this, OpGuard::ref);
  if (guard.held()) rt::poll_interrupt(pd_, mode, waiter);
}

void NetFd::clear_interrupt(IoMode mode, rt::G* waiter) {
  OpGuard guard(*this, OpGuard::ref);
  if (guard.held()) rt::poll_clear_interrupt(pd_, mode, waiter);
}

bool NetFd::start_on(Wake what, const WakeCall& call) {
  OpGuard guard(*this, what == Wake::readable ? OpGuard::read : OpGuard::ref);
  if (!guard.held() || pd_ == nullptr || poll_generation_ != rt::poll_generation()) return false;
  if (what == Wake::hangup) {
    rt::poll_start_on_hangup(pd_, call.fn, call.arg, call.stack_size, call.name);
    return true;
  }
  // Bytes may be queued with no edge to come for them: the caller reads now.
  if (!drained_ || rt::poll_hangup_or_urgent_seen(pd_)) return false;
  // The goroutine started reads at once: the edge that starts it is consumed.
  drained_ = false;
  rt::poll_start_on_read(pd_, call.fn, call.arg, call.stack_size, call.name);
  return true;
}

std::chrono::steady_clock::time_point NetFd::readable_at() const {
  // Const for callers; the reference count is bookkeeping, not state. The reference
  // keeps a concurrent close from taking pd_ away while it is read.
  NetFd& self = const_cast<NetFd&>(*this);
  OpGuard guard(self, OpGuard::ref);
  const std::int64_t at = guard.held() && pd_ != nullptr ? rt::poll_read_ready_at(pd_) : 0;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(at));
}

bool NetFd::cancel_start(Wake what) {
  // Only the hang-up start can be taken back: a readable one ends with the stream.
  if (what != Wake::hangup) return false;
  OpGuard guard(*this, OpGuard::ref);
  return guard.held() && pd_ != nullptr && poll_generation_ == rt::poll_generation() &&
         rt::poll_cancel_start_on_hangup(pd_);
}

std::error_code NetFd::set_deadline(Deadline d, IoMode mode) {
  OpGuard guard(*this, OpGuard::ref);
  if (!guard.held()) return errc::closed;
  std::int64_t ns = to_nanotime(d);
  if (mode != IoMode::write) read_deadline_.store(ns, std::memory_order_relaxed);
  if (mode != IoMode::read) write_deadline_.store(ns, std::memory_order_relaxed);
  rt::poll_set_deadline(pd_, ns, mode);
  return {};
}

// The previous read came back short, so it drained the receive queue: reading now
// would only get EAGAIN (one wasted syscall per message in request/response traffic).
// Wait for readiness first. Edge-triggered epoll reports any data that arrived after
// the drain, so nothing is missed; a readiness edge older than the drain costs the one
// EAGAIN this saves. Not after a hang-up: an end of stream or an error that came with
// the data is still there to read, with no edge to come. Nor after TCP urgent data: a
// read stops short at the urgent mark, the rest queued.
rt::PollStatus NetFd::wait_if_drained() noexcept {
  if (!drained_) return rt::PollStatus::ready;
  // A wait that fails (a deadline) leaves the queue as drained as it found it.
  if (!rt::poll_hangup_or_urgent_seen(pd_)) {
    if (auto st = wait(IoMode::read); st != rt::PollStatus::ready) return st;
  }
  drained_ = false;
  return rt::PollStatus::ready;
}

Result<std::size_t> NetFd::read(void* buf, std::size_t len) {
  OpGuard guard(*this, OpGuard::read);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::read)) return errc::timeout;
  if (len == 0) return std::size_t{0};
  if (auto st = wait_if_drained(); st != rt::PollStatus::ready) return wait_error(st);
  for (;;) {
    ssize_t n = sys::recv(fd_, buf, len, 0);
    if (n >= 0) {
      // On TCP a short read means nothing was left. Not on a datagram socket, nor on
      // a Unix stream: its read stops after a message that carried descriptors, or
      // (with SO_PASSCRED) where two writers' messages meet, with more queued.
      drained_ = n > 0 && static_cast<std::size_t>(n) < len && kind_ == Network::tcp;
      return static_cast<std::size_t>(n);
    }
    int e = static_cast<int>(-n);
    if (e == EINTR) continue;
    if (e != EAGAIN) return errno_code(e);
    if (auto st = wait(IoMode::read); st != rt::PollStatus::ready) {
      drained_ = true;  // EAGAIN said so, on any kind of socket
      return wait_error(st);
    }
  }
}

Result<std::size_t> NetFd::write(const void* buf, std::size_t len) {
  OpGuard guard(*this, OpGuard::write);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::write)) return errc::timeout;
  const char* p = static_cast<const char*>(buf);
  std::size_t done = 0;
  for (;;) {
    // len == 0 still makes one call: on a datagram socket it sends an empty datagram.
    ssize_t n = sys::send(fd_, p + done, len - done, MSG_NOSIGNAL);
    if (n >= 0) {
      done += static_cast<std::size_t>(n);
      if (done == len) return done;
      continue;
    }
    int e = static_cast<int>(-n);
    if (e == EINTR) continue;
    if (e != EAGAIN) return errno_code(e);
    if (auto st = wait(IoMode::write); st != rt::PollStatus::ready) return wait_error(st);
  }
}

std::error_code NetFd::send_file(int file, std::uint64_t offset, std::uint64_t count,
                                 std::uint64_t& sent) {
  sent = 0;
  OpGuard guard(*this, OpGuard::write);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::write)) return errc::timeout;
  auto at = static_cast<off_t>(offset);
  while (sent < count) {
    constexpr std::uint64_t kMaxCall = 1u << 30;
    const auto want = static_cast<std::size_t>(std::min(count - sent, kMaxCall));
    const ssize_t n = ::sendfile(fd_, file, &at, want);
    if (n > 0) {
      sent += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == 0) return {};  // the file ended first: sent < count tells
    const int e = errno;
    if (e == EINTR) continue;
    if (e != EAGAIN) return errno_code(e);
    if (auto st = wait(IoMode::write); st != rt::PollStatus::ready) return wait_error(st);
  }
  return {};
}

Result<std::size_t> NetFd::writev(const struct iovec* iov, int count) {
  if (count < 0 || (count > 0 && iov == nullptr))
    return std::make_error_code(std::errc::invalid_argument);
  // A datagram is one sendmsg: the whole array, or EMSGSIZE past the kernel's limit.
  const bool datagram = kind_ == Network::udp;
  if (datagram && count > IOV_MAX) return std::make_error_code(std::errc::message_size);
  OpGuard guard(*this, OpGuard::write);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::write)) return errc::timeout;
  if (datagram) {
    struct msghdr msg = {};
    msg.msg_iov = const_cast<struct iovec*>(iov);
    msg.msg_iovlen = static_cast<std::size_t>(count);
    for (;;) {
      ssize_t w = sys::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (w >= 0) return static_cast<std::size_t>(w);
      int e = static_cast<int>(-w);
      if (e == EINTR) continue;
      if (e != EAGAIN) return errno_code(e);
      if (auto st = wait(IoMode::write); st != rt::PollStatus::ready) return wait_error(st);
    }
  }
  // A stream: sendmsg consumes a prefix; rebuild a window of at most kBatch iovecs from
  // (index, offset) after each partial write. The caller's array stays untouched.
  constexpr int kBatch = 64;
  std::array<struct iovec, kBatch> window;
  std::size_t done = 0;
  int index = 0;
  std::size_t offset = 0;
  for (;;) {
    while (index < count && offset == iov[index].iov_len) {
      ++index;
      offset = 0;
    }
    if (index == count) return done;
    int n = 0;
    for (int i = index; i < count && n < kBatch; ++i) {
      std::size_t skip = i == index ? offset : 0;
      if (iov[i].iov_len == skip) continue;
      window[n].iov_base = static_cast<char*>(iov[i].iov_base) + skip;
      window[n].iov_len = iov[i].iov_len - skip;
      ++n;
    }
    struct msghdr msg = {};
    msg.msg_iov = window.data();
    msg.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t w = sys::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      int e = static_cast<int>(-w);
      if (e == EINTR) continue;
      if (e != EAGAIN) return errno_code(e);
      if (auto st = wait(IoMode::write); st != rt::PollStatus::ready) return wait_error(st);
      continue;
    }
    done += static_cast<std::size_t>(w);
    std::size_t left = static_cast<std::size_t>(w);
    while (left > 0) {
      std::size_t room = iov[index].iov_len - offset;
      if (left < room) {
        offset += left;
        break;
      }
      left -= room;
      ++index;
      offset = 0;
    }
  }
}

Result<std::size_t> NetFd::read_from(void* buf, std::size_t len, Addr* from) {
  OpGuard guard(*this, OpGuard::read);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::read)) return errc::timeout;
  for (;;) {
    sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    ssize_t n = ::recvfrom(fd_, buf, len, 0, reinterpret_cast<sockaddr*>(&ss), &sl);
    if (n >= 0) {
      *from = Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), sl, kind_);
      return static_cast<std::size_t>(n);
    }
    int e = errno;
    if (e == EINTR) continue;
    if (e != EAGAIN) return errno_code(e);
    if (auto st = wait(IoMode::read); st != rt::PollStatus::ready) return wait_error(st);
  }
}

Result<std::size_t> NetFd::write_to(const void* buf, std::size_t len, const Addr& to) {
  OpGuard guard(*this, OpGuard::write);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::write)) return errc::timeout;
  // An IPv4 destination on a dual-stack IPv6 socket goes as its v4-mapped form.
  const Addr dest = family_ == AF_INET6 ? to.to_v6_mapped() : to;
  for (;;) {
    ssize_t n = ::sendto(fd_, buf, len, MSG_NOSIGNAL, dest.sockaddr_ptr(), dest.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    int e = errno;
    if (e == EINTR) continue;
    if (e != EAGAIN) return errno_code(e);
    if (auto st = wait(IoMode::write); st != rt::PollStatus::ready) return wait_error(st);
  }
}

Result<int> NetFd::accept(sockaddr_storage* peer, socklen_t* peer_len) {
  OpGuard guard(*this, OpGuard::read);
  if (!guard.held()) return errc::closed;
  if (deadline_passed(IoMode::read)) return errc::timeout;
  for (;;) {
    *peer_len = sizeof *peer;
    int fd =
        ::accept4(fd_, reinterpret_cast<sockaddr*>(peer), peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    int e = errno;
    // A connection reset while queued is the peer's business, not the listener's.
    if (e == EINTR || e == ECONNABORTED) continue;
    if (e != EAGAIN) return errno_code(e);
    if (auto st = wait(IoMode::read); st != rt::PollStatus::ready) return wait_error(st);
  }
}

std::error_code NetFd::connect(const Addr& addr, std::int64_t deadline) {
  OpGuard guard(*this, OpGuard::write);
  if (!guard.held()) return errc::closed;
  if (::connect(fd_, addr.sockaddr_ptr(), addr.size()) == 0) return {};
  int e = errno;
  if (e == EISCONN) return {};
  // An interrupted connect goes on asynchronously, like one in progress.
  if (e != EINPROGRESS && e != EALREADY && e != EINTR) return errno_code(e);
  if (deadline != 0) {
    if (rt::nanotime() >= deadline) return errc::timeout;
    rt::poll_set_deadline(pd_, deadline, IoMode::write);
  }
  std::error_code result;
  for (;;) {
    if (auto st = wait(IoMode::write); st != rt::PollStatus::ready) {
      result = wait_error(st);
      break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      result = last_errno();
      break;
    }
    if (err == EINPROGRESS || err == EALREADY || err == EINTR) continue;
    if (err == EISCONN) break;
    if (err != 0) {
      result = errno_code(err);
      break;
    }
    // The poller may wake us spuriously (Go issues 14548, 19289): make sure.
    sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &sl) == 0) break;
  }
  if (deadline != 0) rt::poll_set_deadline(pd_, 0, IoMode::write);
  return result;
}

std::error_code NetFd::shutdown(int how) {
  OpGuard guard(*this, OpGuard::ref);
  if (!guard.held()) return errc::closed;
  if (::shutdown(fd_, how) != 0) return last_errno();
  return {};
}

bool NetFd::peer_closed() const {
  // Const for callers; the reference count is bookkeeping, not state.
  NetFd& self = const_cast<NetFd&>(*this);
  OpGuard guard(self, OpGuard::ref);
  if (!guard.held()) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::error_code NetFd::set_option(int level, int name, const void* value, socklen_t len) {
  OpGuard guard(*this, OpGuard::ref);
  if (!guard.held()) return errc::closed;
  if (::setsockopt(fd_, level, name, value, len) != 0) return last_errno();
  if (level == SOL_SOCKET && name == SO_LINGER &&
      len >= static_cast<socklen_t>(sizeof(struct linger))) {
    const auto* l = static_cast<const struct linger*>(value);
    lingers_.store(l->l_onoff != 0 && l->l_linger > 0, std::memory_order_release);
  }
  return {};
}

Addr NetFd::local_addr() const {
  // Const for callers; the reference count is bookkeeping, not state.
  NetFd& self = const_cast<NetFd&>(*this);
  OpGuard guard(self, OpGuard::ref);
  if (!guard.held()) return Addr();
  sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) return Addr();
  return Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), sl, kind_);
}

}  // namespace goro::net::detail
