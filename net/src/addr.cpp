#include <goro/net/addr.hpp>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "internal.hpp"

namespace goro::net {

Addr::Addr() noexcept : storage_{}, len_(0), network_(Network::none) {
  storage_.ss_family = AF_UNSPEC;
}

Addr Addr::from_sockaddr(const sockaddr* sa, socklen_t len, Network network) noexcept {
  Addr a;
  if (sa == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t))) return a;
  if (len > static_cast<socklen_t>(sizeof a.storage_)) len = sizeof a.storage_;
  std::memcpy(&a.storage_, sa, static_cast<std::size_t>(len));
  a.len_ = len;
  a.network_ = network;
  if (a.storage_.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage_);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      sockaddr_in in = {};
      in.sin_family = AF_INET;
      in.sin_port = in6->sin6_port;
      std::memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
      a.storage_ = {};
      std::memcpy(&a.storage_, &in, sizeof in);
      a.len_ = sizeof in;
    }
  }
  return a;
}

Addr Addr::to_v6_mapped() const noexcept {
  if (storage_.ss_family != AF_INET) return *this;
  auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
  sockaddr_in6 in6 = {};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = in->sin_port;
  in6.sin6_addr.s6_addr[10] = 0xff;
  in6.sin6_addr.s6_addr[11] = 0xff;
  std::memcpy(&in6.sin6_addr.s6_addr[12], &in->sin_addr, 4);
  Addr a;
  std::memcpy(&a.storage_, &in6, sizeof in6);
  a.len_ = sizeof in6;
  a.network_ = network_;
  return a;
}

std::string_view Addr::network() const noexcept {
  switch (network_) {
    case Network::none: return "";
    case Network::tcp: return "tcp";
    case Network::udp: return "udp";
    case Network::unix_stream: return "unix";
    case Network::ip: return "ip";
  }
  return "";
}

std::uint16_t Addr::port() const noexcept {
  if (storage_.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (storage_.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

Addr Addr::with_port(std::uint16_t port) const noexcept {
  Addr a = *this;
  if (a.storage_.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&a.storage_)->sin_port = htons(port);
  else if (a.storage_.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&a.storage_)->sin6_port = htons(port);
  return a;
}

Addr Addr::with_network(Network network) const noexcept {
  Addr a = *this;
  a.network_ = network;
  return a;
}

bool Addr::is_loopback() const noexcept {
  if (storage_.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (storage_.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string Addr::host() const {
  if (storage_.ss_family == AF_INET) {
    char buf[INET_ADDRSTRLEN];
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
    if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) == nullptr) return {};
    return buf;
  }
  if (storage_.ss_family == AF_INET6) {
    char buf[INET6_ADDRSTRLEN];
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    if (::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf) == nullptr) return {};
    std::string s = buf;
    if (in6->sin6_scope_id != 0) {
      char name[IF_NAMESIZE];
      s += '%';
      if (::if_indextoname(in6->sin6_scope_id, name) != nullptr)
        s += name;
      else
        s += std::to_string(in6->sin6_scope_id);
    }
    return s;
  }
  if (storage_.ss_family == AF_UNIX) {
    auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
    std::size_t base = offsetof(sockaddr_un, sun_path);
    if (len_ <= static_cast<socklen_t>(base)) return {};  // unnamed
    std::size_t n = static_cast<std::size_t>(len_) - base;
    if (un->sun_path[0] == '\0') {  // abstract: shown as "@name"
      std::string s(1, '@');
      s.append(un->sun_path + 1, n - 1);
      return s;
    }
    return std::string(un->sun_path, ::strnlen(un->sun_path, n));
  }
  return {};
}

std::string Addr::to_string() const {
  if (storage_.ss_family == AF_INET || storage_.ss_family == AF_INET6) {
    if (network_ == Network::ip) return host();
    return join_host_port(host(), port());
  }
  return host();
}

bool operator==(const Addr& a, const Addr& b) noexcept {
  if (a.storage_.ss_family != b.storage_.ss_family) return false;
  switch (a.storage_.ss_family) {
    case AF_UNSPEC: return true;
    case AF_INET: {
      auto* x = reinterpret_cast<const sockaddr_in*>(&a.storage_);
      auto* y = reinterpret_cast<const sockaddr_in*>(&b.storage_);
      return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    case AF_INET6: {
      auto* x = reinterpret_cast<const sockaddr_in6*>(&a.storage_);
      auto* y = reinterpret_cast<const sockaddr_in6*>(&b.storage_);
      return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
             std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    default:
      return a.len_ == b.len_ &&
             std::memcmp(&a.storage_, &b.storage_, static_cast<std::size_t>(a.len_)) == 0;
  }
}

Result<std::pair<std::string_view, std::string_view>> split_host_port(std::string_view hp) {
  std::size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos) return std::errc::invalid_argument;  // missing port
  std::string_view host;
  if (!hp.empty() && hp.front() == '[') {
    std::size_t close = hp.find(']');
    // "[host]:port" exactly: the ']' must come right before the last ':'.
    if (close == std::string_view::npos || close + 1 != colon) return std::errc::invalid_argument;
    host = hp.substr(1, close - 1);
  } else {
    host = hp.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return std::errc::invalid_argument;
    if (host.find_first_of("[]") != std::string_view::npos) return std::errc::invalid_argument;
  }
  std::string_view port = hp.substr(colon + 1);
  if (port.find_first_of("[]") != std::string_view::npos) return std::errc::invalid_argument;
  return std::pair{host, port};
}

std::string join_host_port(std::string_view host, std::uint16_t port) {
  std::string s;
  if (host.find(':') != std::string_view::npos) {
    s.reserve(host.size() + 8);
    s += '[';
    s += host;
    s += ']';
  } else {
    s = host;
  }
  s += ':';
  s += std::to_string(port);
  return s;
}

namespace detail {

Result<NetSpec> parse_network(std::string_view n) {
  if (n == "tcp") return NetSpec{Network::tcp, AF_UNSPEC, SOCK_STREAM};
  if (n == "tcp4") return NetSpec{Network::tcp, AF_INET, SOCK_STREAM};
  if (n == "tcp6") return NetSpec{Network::tcp, AF_INET6, SOCK_STREAM};
  if (n == "udp") return NetSpec{Network::udp, AF_UNSPEC, SOCK_DGRAM};
  if (n == "udp4") return NetSpec{Network::udp, AF_INET, SOCK_DGRAM};
  if (n == "udp6") return NetSpec{Network::udp, AF_INET6, SOCK_DGRAM};
  if (n == "unix") return NetSpec{Network::unix_stream, AF_UNIX, SOCK_STREAM};
  if (n == "ip") return NetSpec{Network::ip, AF_UNSPEC, 0};
  if (n == "ip4") return NetSpec{Network::ip, AF_INET, 0};
  if (n == "ip6") return NetSpec{Network::ip, AF_INET6, 0};
  return std::errc::protocol_not_supported;
}

Result<std::uint16_t> parse_port(std::string_view port) {
  if (port.empty() || port.size() > 5) return std::errc::invalid_argument;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::errc::invalid_argument;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) return std::errc::invalid_argument;
  return static_cast<std::uint16_t>(value);
}

Result<Addr> parse_ip(std::string_view host, std::uint16_t port, Network kind) {
  if (host.empty() || host.size() >= 64) return std::errc::invalid_argument;
  char buf[64];
  std::memcpy(buf, host.data(), host.size());
  buf[host.size()] = '\0';
  sockaddr_storage ss = {};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  if (::inet_pton(AF_INET, buf, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    return Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in), kind);
  }
  ss = {};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  char* zone = std::strchr(buf, '%');
  if (zone != nullptr) *zone++ = '\0';
  if (::inet_pton(AF_INET6, buf, &in6->sin6_addr) != 1) return std::errc::invalid_argument;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  if (zone != nullptr) {
    auto index = parse_port(zone);  // a numeric zone is an interface index
    if (index.ok()) {
      in6->sin6_scope_id = *index;
    } else {
      in6->sin6_scope_id = ::if_nametoindex(zone);
      if (in6->sin6_scope_id == 0) return std::errc::invalid_argument;
    }
  }
  return Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in6), kind);
}

// The unix address for path: "@name" is in the abstract namespace (no file).
Result<Addr> parse_unix(std::string_view path) {
  sockaddr_un un = {};
  un.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof un.sun_path) return std::errc::filename_too_long;
  std::memcpy(un.sun_path, path.data(), path.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (path.front() == '@')
    un.sun_path[0] = '\0';
  else
    len += 1;  // the terminating NUL, as the kernel reports it back
  return Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&un), len, Network::unix_stream);
}

}  // namespace detail

Result<Addr> Addr::parse(std::string_view network, std::string_view address) {
  auto spec = detail::parse_network(network);
  if (!spec) return spec.error();
  if (spec->kind == Network::unix_stream) return detail::parse_unix(address);
  std::string_view host = address;
  std::uint16_t port = 0;
  if (spec->kind != Network::ip) {
    auto parts = split_host_port(address);
    if (!parts) return parts.error();
    auto p = detail::parse_port(parts->second);
    if (!p) return p.error();
    host = parts->first;
    port = *p;
  }
  if (host.empty()) host = spec->family == AF_INET6 ? "::" : "0.0.0.0";
  auto addr = detail::parse_ip(host, port, spec->kind);
  if (!addr) return addr.error();
  if (spec->family != AF_UNSPEC && addr->family() != spec->family)
    return std::errc::address_family_not_supported;
  return addr;
}

}  // namespace goro::net
