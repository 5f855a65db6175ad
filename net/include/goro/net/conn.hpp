// goro::net::Conn — a connected TCP, Unix or UDP socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

#include <goro/net/addr.hpp>
#include <goro/base/result.hpp>
#include <goro/net/stream.hpp>

namespace goro::net {

namespace detail {
class NetFd;
struct StreamAccess;
}

// Owns its socket; move-only. Made by dial() and Listener::accept().
//
// Concurrency as for Stream: one reader, one writer and a closer may run at once.
// close() wakes parked operations with errc::closed at once; the descriptor itself is
// closed when the last operation still inside a system call on it returns, so its
// number is never reused under a running read.
//
// close() from a goroutine returns only once no operation is inside the socket any
// more (Go's FD.Close waits the same way), so the object may be destroyed right after
// it; the goroutines woken with errc::closed must not touch it again.
//
// Operations on a default-constructed or moved-from Conn fail with
// std::errc::bad_file_descriptor.
class Conn final : public Stream {
 public:
  Conn() noexcept;
  explicit Conn(std::unique_ptr<detail::NetFd> fd) noexcept;
  Conn(Conn&&) noexcept;
  Conn& operator=(Conn&&) noexcept;
  ~Conn() override;
  // From the pool for connection objects (goro/base/object_pool.hpp).
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  using Stream::read;  // the overloads taking a Context
  using Stream::write;
  Result<std::size_t> read(void* buf, std::size_t len) override;
  // Reads exactly len bytes unless the peer ends the stream first; returns the count.
  Result<std::size_t> read_full(void* buf, std::size_t len);
  Result<std::size_t> write(const void* buf, std::size_t len) override;
  Result<std::size_t> writev(const struct iovec* iov, int count) override;
  // Sends count bytes of the open file `file` from offset by sendfile(2): from the page
  // cache to the socket, no copy through user space (a TCP or Unix stream socket). Parks
  // while the socket is full and returns as write() does (the write deadline, close();
  // with_context for a Context); sent counts the bytes that went, also on failure. {}
  // with sent < count means the file ended first. The call itself is not made in
  // goro::blocking: pages of the file not in the page cache are read from the disk while
  // the thread keeps its P (nginx's trade; docs/net.md).
  std::error_code send_file(int file, std::uint64_t offset, std::uint64_t count,
                            std::uint64_t& sent);
  std::error_code close() override;

  // Half-close: sends FIN; the peer reads end of stream, this end can still read.
  std::error_code shutdown_write() override;
  // Stops reading: later reads return 0 (and peer_closed() is true).
  std::error_code shutdown_read();
  // A poll of the socket, without waiting, for a hang-up or an error (POLLRDHUP,
  // POLLHUP, POLLERR). On a UDP socket only a pending error counts.
  bool peer_closed() const override;

  std::error_code set_read_deadline(Deadline d) override;
  std::error_code set_write_deadline(Deadline d) override;
  std::error_code set_deadline(Deadline d) override;

  Addr remote_addr() const override;
  Addr local_addr() const override;
  bool start_on(Wake what, const WakeCall& call) override;
  bool cancel_start(Wake what) override;
  std::chrono::steady_clock::time_point readable_at() const override;

  // The socket descriptor (-1 when not open); for setsockopt and friends.
  int fd() const noexcept;
  // False once close() was called.
  bool is_open() const noexcept;

  // TCP_NODELAY (on by default for TCP, as in Go): send small writes at once.
  std::error_code set_nodelay(bool on);
  // SO_KEEPALIVE, with idle time and probe interval period (TCP_KEEPIDLE/KEEPINTVL).
  std::error_code set_keepalive(bool on, std::chrono::seconds period = std::chrono::seconds(15));
  // SO_LINGER as Go's SetLinger: sec < 0 default (graceful close in the background),
  // 0 discard unsent data and reset the connection on close (RST), > 0 linger.
  std::error_code set_linger(int sec);
  // SO_RCVBUF / SO_SNDBUF.
  std::error_code set_read_buffer(int bytes);
  std::error_code set_write_buffer(int bytes);

 private:
  friend struct detail::StreamAccess;  // with_context reaches the descriptor (stream.cpp)
  std::unique_ptr<detail::NetFd> fd_;
};

}  // namespace goro::net
