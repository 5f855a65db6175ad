// goro::net::PacketConn — an unconnected UDP socket, and listen_packet().
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>

#include <goro/net/addr.hpp>
#include <goro/base/result.hpp>
#include <goro/net/stream.hpp>

namespace goro::net {

namespace detail {
class NetFd;
}

// Owns a datagram socket; move-only. Concurrency: one read_from and one write_to at a
// time each (more are serialised), close() and deadlines from any goroutine.
// The object must outlive every operation on it.
class PacketConn {
 public:
  PacketConn() noexcept;
  explicit PacketConn(std::unique_ptr<detail::NetFd> fd) noexcept;
  PacketConn(PacketConn&&) noexcept;
  PacketConn& operator=(PacketConn&&) noexcept;
  ~PacketConn();

  // Receives one datagram into buf (truncated to len) and returns its size and sender.
  // Blocks until one arrives, the read deadline or close().
  Result<std::pair<std::size_t, Addr>> read_from(void* buf, std::size_t len);

  // Sends one datagram of len bytes to addr. Blocks only while the socket buffer is full.
  Result<std::size_t> write_to(const void* buf, std::size_t len, const Addr& addr);

  // Closes the socket; waiting calls return errc::closed.
  std::error_code close();

  std::error_code set_read_deadline(Deadline d);
  std::error_code set_write_deadline(Deadline d);
  std::error_code set_deadline(Deadline d);

  Addr local_addr() const;
  int fd() const noexcept;
  // False once close() was called.
  bool is_open() const noexcept;

 private:
  std::unique_ptr<detail::NetFd> fd_;
};

// Opens a UDP socket bound to address ("127.0.0.1:0", "[::1]:0", ":5353").
// network: "udp" (":port" binds IPv4 and IPv6), "udp4" or "udp6".
// Blocks only to resolve a host name.
Result<PacketConn> listen_packet(std::string_view network, std::string_view address);

}  // namespace goro::net
