// Helpers shared by the goro::net sources. Internal.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <system_error>
#include <vector>

#include <goro/net/addr.hpp>
#include <goro/net/errors.hpp>
#include <goro/base/result.hpp>
#include <goro/net/stream.hpp>

namespace goro::net::detail {

inline std::error_code errno_code(int e) noexcept { return {e, std::system_category()}; }
inline std::error_code last_errno() noexcept { return errno_code(errno); }

// A network name taken apart: "tcp6" is {tcp, AF_INET6, SOCK_STREAM}.
struct NetSpec {
  Network kind;
  int family;  // AF_UNSPEC (either IP family), AF_INET, AF_INET6 or AF_UNIX
  int sotype;  // SOCK_STREAM, SOCK_DGRAM, or 0 for "ip"
};

// tcp, tcp4, tcp6, udp, udp4, udp6, unix, ip, ip4, ip6; else protocol_not_supported.
Result<NetSpec> parse_network(std::string_view network);

// The port of "80"; only numbers (service names are not looked up).
Result<std::uint16_t> parse_port(std::string_view port);

// An IP literal ("127.0.0.1", "::1", "fe80::1%eth0") as an address of kind with
// port; invalid_argument if host is not a literal.
Result<Addr> parse_ip(std::string_view host, std::uint16_t port, Network kind);

// A Unix socket address; "@name" is in the abstract namespace.
Result<Addr> parse_unix(std::string_view path);

// The addresses of host with port, for family (AF_UNSPEC: both): a literal as is,
// a name with getaddrinfo inside goro::blocking. Never empty on success.
Result<std::vector<Addr>> lookup(std::string_view host, std::uint16_t port, int family,
                                 Network kind);

// A Deadline as the runtime's nanotime: 0 for none, >= 1 otherwise (a time in the past
// stays in the past). std::chrono::steady_clock and goro::detail::nanotime() both read
// CLOCK_MONOTONIC on Linux (libstdc++ and libc++), so this is a unit conversion.
std::int64_t to_nanotime(Deadline d) noexcept;

}  // namespace goro::net::detail

namespace goro::net::detail {

class NetFd;

// A socket for spec bound to address (a numeric or named "host:port", or a path for
// unix) and, when backlog >= 0, listening. A wildcard host ("", "0.0.0.0", "::") on a
// network that allows both families ("tcp", "udp") gets one dual-stack IPv6 socket,
// or an IPv4 one where IPv6 is unavailable, as in Go. Registered with the netpoller.
Result<std::unique_ptr<NetFd>> bind_socket(const NetSpec& spec, std::string_view address,
                                           bool reuse_port, int backlog);

}  // namespace goro::net::detail

namespace goro::net::detail {

// SO_KEEPALIVE plus TCP_KEEPIDLE and TCP_KEEPINTVL = period (at least 1 s).
std::error_code set_keepalive(NetFd& fd, bool on, std::chrono::seconds period);

// TCP_NODELAY on and, if keep_alive is positive, keep-alive: what every new TCP
// connection gets (Go's defaults). Failures are ignored: the connection works without.
void tune_new_tcp(NetFd& fd, std::chrono::seconds keep_alive);

}  // namespace goro::net::detail
