// NetFd: one non-blocking socket registered with the runtime's netpoller — Go's netFD
// and internal/poll.FD in one. Conn, Listener and PacketConn are thin owners of one.
// Internal to goro::net.
//
// Every operation takes a reference through the FdMutex (reads and accepts also the
// read lock, writes the write lock, which is what keeps at most one goroutine per mode
// in poll_wait, as the netpoller requires). close() marks the FdMutex closed and evicts
// the poll descriptor, waking parked operations with errc::closed; the last reference
// to go (perhaps a read just returning from the kernel) unregisters and closes the
// descriptor. Like Go's FD.Close, close() called by a goroutine then waits until that
// has happened, so once it returns no operation is still inside the NetFd and its
// owner may destroy it.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include <goro/base/object_pool.hpp>
#include <goro/base/result.hpp>
#include <goro/net/addr.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/waitq.hpp>

#include "fd_mutex.hpp"

namespace goro::net::detail {

// The direction an operation or a deadline concerns (the netpoller's).
using IoMode = goro::detail::IoMode;

// net's IoMode as the netpoller's.
constexpr IoMode to_poll(net::IoMode mode) noexcept {
  return mode == net::IoMode::read ? IoMode::read
                                   : mode == net::IoMode::write ? IoMode::write : IoMode::both;
}

class NetFd : public goro::Pooled {
 public:
  // Takes ownership of fd, a non-blocking socket of kind and family. Call init() next.
  NetFd(int fd, int family, Network kind) noexcept : fd_(fd), family_(family), kind_(kind) {}
  // Precondition: closed (close() returned; from outside the runtime, close() cannot
  // wait, so also no operation running).
  ~NetFd();
  NetFd(const NetFd&) = delete;
  NetFd& operator=(const NetFd&) = delete;

  // Registers with the netpoller. On failure the descriptor is closed.
  std::error_code init();

  Result<std::size_t> read(void* buf, std::size_t len);
  Result<std::size_t> write(const void* buf, std::size_t len);
  Result<std::size_t> writev(const struct iovec* iov, int count);
  // Conn::send_file: sendfile(2) from file, parking on the write side while it is full.
  std::error_code send_file(int file, std::uint64_t offset, std::uint64_t count,
                            std::uint64_t& sent);
  Result<std::size_t> read_from(void* buf, std::size_t len, Addr* from);
  Result<std::size_t> write_to(const void* buf, std::size_t len, const Addr& to);
  // Returns a new non-blocking, close-on-exec descriptor; the peer's address in *peer.
  Result<int> accept(sockaddr_storage* peer, socklen_t* peer_len);
  // Connects to addr, waiting at most until deadline (nanotime, 0: none).
  std::error_code connect(const Addr& addr, std::int64_t deadline);

  std::error_code close();
  // A reference held across several operations (Listener::accept's back-off), so that
  // close() waits for it too. acquire_ref() is false once closed.
  bool acquire_ref() noexcept { return mu_.incref(); }
  void release_ref() noexcept {
    if (mu_.decref()) destroy_for_closer();
  }
  std::error_code shutdown(int how);
  // poll_interrupt / poll_clear_interrupt on the descriptor while it is open.
  void interrupt(IoMode mode, goro::detail::G* waiter);
  void clear_interrupt(IoMode mode, goro::detail::G* waiter);
  // Stream::start_on. Readable: poll_start_on_read when the last read found the receive
  // queue empty; false (nothing armed) when it did not. Hang-up: poll_start_on_hangup.
  // Both false once closed, or outside a run.
  bool start_on(Wake what, const WakeCall& call);
  bool cancel_start(Wake what);
  // Whether a poll without waiting reports a hang-up or an error; false once closed.
  bool peer_closed() const;
  // Stream::readable_at.
  std::chrono::steady_clock::time_point readable_at() const;
  std::error_code set_deadline(Deadline d, IoMode mode);
  std::error_code set_option(int level, int name, const void* value, socklen_t len);
  std::error_code set_option(int level, int name, int value) {
    return set_option(level, name, &value, sizeof value);
  }

  // The read or write deadline as nanotime (0: none).
  std::int64_t deadline(IoMode mode) const noexcept {
    return (mode == IoMode::read ? read_deadline_ : write_deadline_)
        .load(std::memory_order_relaxed);
  }

  Addr local_addr() const;
  const Addr& remote_addr() const noexcept { return remote_; }
  void set_remote_addr(const Addr& a) noexcept { remote_ = a; }
  int sysfd() const noexcept { return fd_; }
  // Whether close() has been called (the descriptor may still be open for an operation
  // in flight, but is no longer the caller's to use).
  bool closed() const noexcept { return mu_.closed(); }
  Network kind() const noexcept { return kind_; }
  int family() const noexcept { return family_; }

 private:
  class OpGuard;
  // Whether mode's deadline has passed (Go fails then even with data ready). In a run
  // that is when its timer has expired it (see poll_set_deadline), not a clock read.
  bool deadline_passed(IoMode mode) const noexcept;
  // Parks until fd may be ready for mode (read or write); a status other than ready is
  // turned into errc::timeout or errc::closed by wait_error (net_fd.cpp).
  goro::detail::PollStatus wait(IoMode mode) noexcept;
  // Before a read (guarded by the read lock): waits for readiness when the last read
  // drained the receive queue (see net_fd.cpp); ready when there is no need.
  goro::detail::PollStatus wait_if_drained() noexcept;
  std::error_code destroy() noexcept;
  // The last reference was an operation's: destroy, then let the closer go.
  void destroy_for_closer() noexcept;

  FdMutex mu_;
  int fd_;
  int family_;
  Network kind_;
  goro::detail::PollDesc* pd_ = nullptr;
  std::uint32_t poll_generation_ = 0;  // the netpoller run pd_ belongs to
  std::atomic<std::int64_t> read_deadline_{0};  // nanotime, 0: none; mirrors the pd's
  std::atomic<std::int64_t> write_deadline_{0};
  std::atomic<bool> destroyed_{false};
  std::atomic<bool> lingers_{false};     // SO_LINGER with a time: ::close may block
  goro::detail::Semaphore closed_sema_;  // released once destroyed by an operation
  // The receive queue was empty as of the last read (it came back short or found
  // nothing), so only an edge can say more arrived (see read); guarded by the read lock.
  bool drained_ = false;
  Addr remote_;
};

}  // namespace goro::net::detail
