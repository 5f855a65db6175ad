// Creating sockets: binding (listen, listen_packet) and per-connection options.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "internal.hpp"
#include "net_fd.hpp"

namespace goro::net::detail {

namespace {

bool is_wildcard(const Addr& a) { return a.host() == "0.0.0.0" || a.host() == "::"; }

// Where to bind, and whether the socket is dual-stack.
struct BindPlan {
  Addr addr;
  bool dual_stack = false;  // an IPv6 wildcard socket that also takes IPv4 (V6ONLY off)
};

Result<BindPlan> plan_bind(const NetSpec& spec, std::string_view address) {
  if (spec.kind == Network::unix_stream) {
    auto a = parse_unix(address);
    if (!a) return a.error();
    return BindPlan{*a, false};
  }
  auto parts = split_host_port(address);
  if (!parts) return parts.error();
  auto port = parse_port(parts->second);
  if (!port) return port.error();
  std::string_view host = parts->first;
  Addr addr;
  if (host.empty()) {
    auto a = parse_ip(spec.family == AF_INET ? "0.0.0.0" : "::", *port, spec.kind);
    if (!a) return a.error();
    addr = *a;
  } else {
    auto addrs = lookup(host, *port, spec.family, spec.kind);
    if (!addrs) return addrs.error();
    // A name for both families binds its first IPv4 address, as Go does.
    auto v4 = std::find_if(addrs->begin(), addrs->end(),
                           [](const Addr& a) { return a.family() == AF_INET; });
    addr = v4 != addrs->end() ? *v4 : addrs->front();
  }
  bool dual = spec.family == AF_UNSPEC && is_wildcard(addr);
  if (dual && addr.family() == AF_INET) {
    auto a = parse_ip("::", *port, spec.kind);
    if (!a) return a.error();
    addr = *a;
  }
  return BindPlan{addr, dual};
}

Result<int> open_bound(const NetSpec& spec, const BindPlan& plan, bool reuse_port, int backlog) {
  int fd = ::socket(plan.addr.family(), spec.sotype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return last_errno();
  auto fail = [fd] {
    std::error_code ec = last_errno();
    ::close(fd);
    return ec;
  };
  int one = 1;
  if (spec.kind == Network::tcp &&
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
    return fail();
  if (reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
    return fail();
  if (plan.addr.family() == AF_INET6) {
    int v6only = plan.dual_stack ? 0 : 1;
    if (::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) != 0) return fail();
  }
  if (::bind(fd, plan.addr.sockaddr_ptr(), plan.addr.size()) != 0) return fail();
  if (backlog >= 0 && ::listen(fd, backlog) != 0) return fail();
  return fd;
}

int local_family(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return ss.ss_family;
}

}  // namespace

Result<std::unique_ptr<NetFd>> bind_socket(const NetSpec& spec, std::string_view address,
                                           bool reuse_port, int backlog) {
  auto plan = plan_bind(spec, address);
  if (!plan) return plan.error();
  auto fd = open_bound(spec, *plan, reuse_port, backlog);
  if (!fd && plan->dual_stack && fd.error() == std::errc::address_family_not_supported) {
    // No IPv6 on this host: an IPv4 wildcard socket instead.
    auto v4 = parse_ip("0.0.0.0", plan->addr.port(), spec.kind);
    if (!v4) return v4.error();
    fd = open_bound(spec, BindPlan{*v4, false}, reuse_port, backlog);
  }
  if (!fd) return fd.error();
  auto nfd = std::make_unique<NetFd>(*fd, local_family(*fd), spec.kind);
  if (auto ec = nfd->init()) return ec;
  return nfd;
}

std::error_code set_keepalive(NetFd& fd, bool on, std::chrono::seconds period) {
  if (auto ec = fd.set_option(SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0)) return ec;
  if (!on) return {};
  int secs = static_cast<int>(std::clamp<std::chrono::seconds::rep>(period.count(), 1, 32767));
  if (auto ec = fd.set_option(IPPROTO_TCP, TCP_KEEPINTVL, secs)) return ec;
  return fd.set_option(IPPROTO_TCP, TCP_KEEPIDLE, secs);
}

void tune_new_tcp(NetFd& fd, std::chrono::seconds keep_alive) {
  (void)fd.set_option(IPPROTO_TCP, TCP_NODELAY, 1);
  if (keep_alive.count() > 0) (void)set_keepalive(fd, true, keep_alive);
}

}  // namespace goro::net::detail
