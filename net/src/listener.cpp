#include <goro/net/listener.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "internal.hpp"
#include "net_fd.hpp"

namespace goro::net {

namespace {

const std::error_code kNotOpen = std::make_error_code(std::errc::bad_file_descriptor);

// Errors after which accept can succeed later without anyone acting on the listener:
// the process or system is out of descriptors or kernel memory, or epoll out of
// watches (ENOSPC from registering the new connection, which is then closed).
// Compares the category by address and errno values directly, calling nothing on the
// category object: this runs while the process has no free descriptor, and UBSan's
// check of a call on a polymorphic object may need one (it reports a false error).
bool is_exhaustion(std::error_code ec) {
  if (&ec.category() != &std::system_category()) return false;
  switch (ec.value()) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case ENOSPC: return true;
    default: return false;
  }
}

constexpr std::chrono::milliseconds kFirstBackoff{5};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

}  // namespace

Listener::Listener() noexcept = default;
Listener::Listener(std::unique_ptr<detail::NetFd> fd, Addr addr, ListenOptions options,
                   bool unlink_on_close)
    : fd_(std::move(fd)),
      addr_(addr),
      options_(options),
      unlink_on_close_(unlink_on_close),
      closed_(1) {}
Listener::Listener(Listener&& other) noexcept
    : fd_(std::move(other.fd_)),
      addr_(other.addr_),
      options_(other.options_),
      unlink_on_close_(std::exchange(other.unlink_on_close_, false)),
      closed_(std::exchange(other.closed_, goro::Chan<char>::nil())),
      closing_(other.closing_.exchange(true, std::memory_order_acq_rel)) {}
Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    if (fd_) close();
    fd_ = std::move(other.fd_);
    addr_ = other.addr_;
    options_ = other.options_;
    unlink_on_close_ = std::exchange(other.unlink_on_close_, false);
    closed_ = std::exchange(other.closed_, goro::Chan<char>::nil());
    closing_.store(other.closing_.exchange(true, std::memory_order_acq_rel),
                   std::memory_order_release);
  }
  return *this;
}
Listener::~Listener() {
  if (fd_) close();
}

namespace {
struct AcceptWatch {
  detail::NetFd* fd;
  goro::detail::G* waiter;
};
}  // namespace

Result<Conn> Listener::accept(const Context& ctx) {
  if (auto e = ctx.err()) return e;
  if (!fd_ || !ctx.can_cancel()) return accept();
  AcceptWatch target{fd_.get(), goro::detail::current_g()};
  Result<Conn> conn = [&]() -> Result<Conn> {
    goro::detail::ContextWatch watch(ctx, [](goro::detail::CancelHook* h) {
      auto* t = static_cast<AcceptWatch*>(h->arg);
      t->fd->interrupt(detail::IoMode::read, t->waiter);
    }, &target);
    if (!watch.ok()) return ctx.err();
    return accept();
  }();
  target.fd->clear_interrupt(detail::IoMode::read, target.waiter);
  if (!conn && conn.error() == errc::interrupted && ctx.err()) return ctx.err();
  return conn;
}

Result<Conn> Listener::accept() {
  if (!fd_) return kNotOpen;
  // Held through the back-off sleeps too, so close() waits until this call is out.
  if (!fd_->acquire_ref()) return errc::closed;
  struct Ref {
    detail::NetFd* fd;
    ~Ref() { fd->release_ref(); }
  } ref{fd_.get()};
  std::chrono::milliseconds backoff{0};
  for (;;) {
    sockaddr_storage peer;
    socklen_t peer_len = 0;
    auto fd = fd_->accept(&peer, &peer_len);
    std::error_code ec = fd.error();
    if (fd) {
      auto conn = std::make_unique<detail::NetFd>(*fd, fd_->family(), fd_->kind());
      ec = conn->init();  // closes the connection on failure
      if (!ec) {
        conn->set_remote_addr(
            Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&peer), peer_len, fd_->kind()));
        if (fd_->kind() == Network::tcp) detail::tune_new_tcp(*conn, options_.keep_alive);
        return Conn(std::move(conn));
      }
    }
    if (!is_exhaustion(ec)) return ec;
    // Out of descriptors: the connection waits in the kernel's queue until some are
    // freed. Sleep instead of spinning on an accept that fails at once; log the
    // episode once. A close() meanwhile ends the sleep (the next accept says closed).
    if (backoff.count() == 0) {
      backoff = kFirstBackoff;
      char reason[128];
      std::fprintf(stderr,
                   "goro::net: accept on %s: %s; "
                   "retrying with backoff (%lld ms doubling to %lld ms)\n",
                   addr_.to_string().c_str(), ::strerror_r(ec.value(), reason, sizeof reason),
                   static_cast<long long>(kFirstBackoff.count()),
                   static_cast<long long>(kMaxBackoff.count()));
    } else {
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    std::chrono::nanoseconds nap = backoff;
    if (std::int64_t deadline = fd_->deadline(detail::IoMode::read); deadline != 0) {
      std::int64_t left = deadline - goro::detail::nanotime();
      if (left <= 0) return errc::timeout;
      nap = std::min(nap, std::chrono::nanoseconds(left));
    }
    (void)goro::select(goro::recv_case(closed_), goro::timeout_case(nap));
  }
}

std::error_code Listener::close() {
  if (!fd_) return kNotOpen;
  // End a back-off sleep first: fd_->close() waits for the accept() sleeping in it.
  if (!closing_.exchange(true, std::memory_order_acq_rel)) closed_.close();
  std::error_code ec = fd_->close();
  if (!ec && unlink_on_close_) {
    unlink_on_close_ = false;
    std::string path = addr_.host();
    goro::blocking([&] { ::unlink(path.c_str()); });
  }
  return ec;
}

std::error_code Listener::set_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::read);
}

int Listener::fd() const noexcept { return fd_ && !fd_->closed() ? fd_->sysfd() : -1; }
bool Listener::is_open() const noexcept { return fd_ && !fd_->closed(); }

Result<Listener> listen(std::string_view network, std::string_view address, ListenOptions options) {
  auto spec = detail::parse_network(network);
  if (!spec) return spec.error();
  if (spec->sotype != SOCK_STREAM) return std::errc::protocol_not_supported;
  auto fd = detail::bind_socket(*spec, address, options.reuse_port, std::max(options.backlog, 0));
  if (!fd) return fd.error();
  Addr addr = (*fd)->local_addr();
  bool unlink_on_close =
      spec->kind == Network::unix_stream && !address.empty() && address.front() != '@';
  return Listener(std::move(*fd), addr, options, unlink_on_close);
}

}  // namespace goro::net
