#include <goro/net/dial.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include <goro/net/errors.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>

#include "internal.hpp"
#include "net_fd.hpp"

namespace goro::net {

namespace detail {

namespace {

std::error_code gai_error(int rc, int saved_errno) {
  switch (rc) {
    case EAI_NONAME:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
#endif
      return errc::host_not_found;
    case EAI_MEMORY: return std::make_error_code(std::errc::not_enough_memory);
    case EAI_SYSTEM: return saved_errno != 0 ? errno_code(saved_errno) : errc::lookup_failed;
    default: return errc::lookup_failed;
  }
}

}  // namespace

Result<std::vector<Addr>> lookup(std::string_view host, std::uint16_t port, int family,
                                 Network kind) {
  if (auto literal = parse_ip(host, port, kind)) {
    if (family != AF_UNSPEC && literal->family() != family)
      return std::errc::address_family_not_supported;
    return std::vector<Addr>{*literal};
  }
  if (host.empty() || host.find('\0') != std::string_view::npos) return errc::host_not_found;
  std::string name(host);
  addrinfo hints = {};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
  addrinfo* list = nullptr;
  int saved_errno = 0;
  int rc = goro::blocking([&] {
    int r = ::getaddrinfo(name.c_str(), nullptr, &hints, &list);
    saved_errno = errno;
    return r;
  });
  if (rc != 0) return gai_error(rc, saved_errno);
  std::vector<Addr> out;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    Addr a = Addr::from_sockaddr(ai->ai_addr, ai->ai_addrlen, kind).with_port(port);
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  ::freeaddrinfo(list);
  if (out.empty()) return errc::host_not_found;
  return out;
}

}  // namespace detail

namespace {

// Go's partialDeadline: an equal share of the time left for each remaining address,
// but at least 2 s (or all that is left).
Result<std::int64_t> partial_deadline(std::int64_t now, std::int64_t deadline, std::size_t left) {
  if (deadline == 0) return std::int64_t{0};
  std::int64_t remaining = deadline - now;
  if (remaining <= 0) return errc::timeout;
  std::int64_t share = remaining / static_cast<std::int64_t>(left);
  constexpr std::int64_t kSaneMinimum = 2'000'000'000;
  if (share < kSaneMinimum) share = std::min(remaining, kSaneMinimum);
  return now + share;
}

struct ConnectWatch {
  detail::NetFd* fd;
  goro::detail::G* waiter;
};

// Interrupts a connect in progress when the dial's context is cancelled.
void interrupt_connect(goro::detail::CancelHook* hook) {
  auto* w = static_cast<ConnectWatch*>(hook->arg);
  w->fd->interrupt(detail::IoMode::write, w->waiter);
}

// ctx's error when it is cancelled, or when ec is a timeout at ctx's deadline (the
// socket's deadline timer may fire just before the context's); else ec.
std::error_code dial_error(const Context& ctx, std::error_code ec) {
  if (auto e = ctx.err()) return e;
  if (ec == errc::interrupted) return make_error_code(context_errc::canceled);
  if (ec == errc::timeout) {
    if (auto d = ctx.deadline(); d && *d <= std::chrono::steady_clock::now())
      return make_error_code(context_errc::deadline_exceeded);
  }
  return ec;
}

Result<Conn> dial_one(const detail::NetSpec& spec, const Addr& addr, std::int64_t deadline,
                      const Context& ctx) {
  // A TCP connect to a free local port in the ephemeral range can connect the socket to
  // itself (simultaneous open); such a "connection" is refused and retried, as in Go.
  for (int attempt = 0;; ++attempt) {
    int fd = ::socket(addr.family(), spec.sotype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return detail::last_errno();
    auto nfd = std::make_unique<detail::NetFd>(fd, addr.family(), spec.kind);
    if (auto ec = nfd->init()) return ec;
    ConnectWatch target{nfd.get(), goro::detail::current_g()};
    std::error_code ec;
    {
      goro::detail::ContextWatch watch(ctx, interrupt_connect, &target);
      ec = watch.ok() ? nfd->connect(addr, deadline) : ctx.err();
    }
    if (ec) return dial_error(ctx, ec);
    nfd->clear_interrupt(detail::IoMode::write, target.waiter);
    nfd->set_remote_addr(addr);
    if (spec.kind == Network::tcp) {
      if (nfd->local_addr() == addr) {
        nfd->close();
        if (attempt < 2) continue;
        return std::make_error_code(std::errc::connection_refused);
      }
      detail::tune_new_tcp(*nfd, std::chrono::seconds(15));
    }
    return Conn(std::move(nfd));
  }
}

}  // namespace

Result<Conn> dial(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout) {
  return dial(network, address, timeout, Context());
}

Result<Conn> dial(std::string_view network, std::string_view address, const Context& ctx) {
  return dial(network, address, {}, ctx);
}

Result<Conn> dial(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout, const Context& ctx) {
  if (auto e = ctx.err()) return e;
  auto spec = detail::parse_network(network);
  if (!spec) return spec.error();
  if (spec->sotype == 0) return std::errc::protocol_not_supported;
  std::int64_t deadline = timeout.count() > 0 ? goro::detail::nanotime_after(timeout.count()) : 0;
  if (auto d = ctx.deadline()) {
    const std::int64_t ctx_deadline = std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(d->time_since_epoch()).count());
    if (deadline == 0 || ctx_deadline < deadline) deadline = ctx_deadline;
  }
  if (spec->kind == Network::unix_stream) {
    auto addr = detail::parse_unix(address);
    if (!addr) return addr.error();
    auto conn = dial_one(*spec, *addr, deadline, ctx);
    if (!conn) return dial_error(ctx, conn.error());
    return conn;
  }
  auto parts = split_host_port(address);
  if (!parts) return parts.error();
  auto port = detail::parse_port(parts->second);
  if (!port) return port.error();
  // An empty host means the local system, as in Go.
  std::string_view host = parts->first;
  if (host.empty()) host = spec->family == AF_INET6 ? "::1" : "127.0.0.1";
  auto addrs = detail::lookup(host, *port, spec->family, spec->kind);
  if (!addrs) return addrs.error();
  if (auto e = ctx.err()) return e;  // a lookup cannot be interrupted: check after it
  std::error_code first_error;
  for (std::size_t i = 0; i < addrs->size(); ++i) {
    auto partial = partial_deadline(goro::detail::nanotime(), deadline, addrs->size() - i);
    if (!partial) {
      if (!first_error) first_error = partial.error();
      break;
    }
    auto conn = dial_one(*spec, (*addrs)[i], *partial, ctx);
    if (conn) return conn;
    if (ctx.err()) return ctx.err();
    if (!first_error) first_error = conn.error();
  }
  return dial_error(ctx, first_error);
}

Result<std::vector<Addr>> resolve(std::string_view host) {
  return detail::lookup(host, 0, AF_UNSPEC, Network::ip);
}

}  // namespace goro::net
