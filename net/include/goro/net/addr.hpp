// goro::net::Addr — a socket address (IPv4, IPv6 or Unix) as a value.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <goro/base/result.hpp>

namespace goro::net {

// The kind of socket an address belongs to; network() names it as Go does.
enum class Network : std::uint8_t {
  none,         // a default-constructed Addr, or an unnamed Unix peer
  tcp,          // "tcp"
  udp,          // "udp"
  unix_stream,  // "unix" (named so: `unix` is a macro under -std=gnu++)
  ip,           // "ip": a bare host address from resolve(), port 0
};

class Addr {
 public:
  // An empty address: network() is "", to_string() is "".
  Addr() noexcept;

  // Copies a kernel socket address (AF_INET, AF_INET6 or AF_UNIX) of len bytes. An
  // IPv4-mapped IPv6 address (from a dual-stack socket) becomes the plain IPv4 one.
  static Addr from_sockaddr(const sockaddr* sa, socklen_t len, Network network) noexcept;

  // Parses a numeric address without any lookup: "127.0.0.1:80", "[::1]:80",
  // "[fe80::1%eth0]:80", ":80" (the unspecified address of the network's family), or a
  // Unix socket path ("@name" for the abstract namespace) when network is "unix".
  // network: tcp, tcp4, tcp6, udp, udp4, udp6, ip, ip4, ip6 or unix. Never blocks.
  static Result<Addr> parse(std::string_view network, std::string_view address);

  // "127.0.0.1:8080", "[::1]:8080", "[fe80::1%eth0]:80", a Unix path, or "" when empty.
  // An address from resolve() (Network::ip) prints without a port: "127.0.0.1", "::1".
  std::string to_string() const;
  // The IP without port or brackets ("::1"); the path for Unix addresses.
  std::string host() const;
  // The port in host byte order; 0 for Unix and empty addresses.
  std::uint16_t port() const noexcept;
  // "tcp", "udp", "unix", "ip", or "" for an empty address.
  std::string_view network() const noexcept;
  Network kind() const noexcept { return network_; }
  // AF_INET, AF_INET6, AF_UNIX, or AF_UNSPEC when empty.
  int family() const noexcept { return storage_.ss_family; }
  bool empty() const noexcept { return storage_.ss_family == AF_UNSPEC; }
  bool is_loopback() const noexcept;

  // The same address with another port / another network kind.
  Addr with_port(std::uint16_t port) const noexcept;
  Addr with_network(Network network) const noexcept;
  // An IPv4 address as IPv4-mapped IPv6 ("[::ffff:1.2.3.4]:80"); others unchanged.
  Addr to_v6_mapped() const noexcept;

  // For system calls.
  const sockaddr* sockaddr_ptr() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage_);
  }
  socklen_t size() const noexcept { return len_; }

  // Same family, address bytes, port (and scope) or path; the network kind is ignored.
  friend bool operator==(const Addr& a, const Addr& b) noexcept;

 private:
  sockaddr_storage storage_;
  socklen_t len_;
  Network network_;
};

// Splits "host:port", "[host]:port" or ":port" as Go's net.SplitHostPort does: brackets
// are removed, a host with a colon must be bracketed. Never blocks.
Result<std::pair<std::string_view, std::string_view>> split_host_port(std::string_view hostport);

// Joins host and port, bracketing a host that contains ':' (an IPv6 literal).
std::string join_host_port(std::string_view host, std::uint16_t port);

}  // namespace goro::net
