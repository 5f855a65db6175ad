// The TLS listener and dialer: TCP plus a TlsConn on top (tls.hpp). The TLS session
// itself is in tls.cpp.
#include <goro/net/tls.hpp>

#include <memory>
#include <string_view>

#include <goro/net/dial.hpp>
#include <goro/net/listener.hpp>

#include "internal.hpp"

namespace goro::net {

TlsListener::TlsListener(Listener inner, std::shared_ptr<TlsContext> ctx) noexcept
    : inner_(std::move(inner)), ctx_(std::move(ctx)) {}

Result<TlsConn> TlsListener::accept() { return accept(Context()); }

Result<TlsConn> TlsListener::accept(const Context& ctx) {
  auto conn = inner_.accept(ctx);
  if (!conn) return conn.error();
  return TlsConn::server(std::make_unique<Conn>(std::move(*conn)), ctx_);
}

Result<TlsListener> tls_listen(std::string_view network, std::string_view address,
                               std::shared_ptr<TlsContext> ctx, ListenOptions options) {
  if (!ctx || !ctx->is_server()) return std::errc::invalid_argument;
  auto ln = listen(network, address, options);
  if (!ln) return ln.error();
  return TlsListener(std::move(*ln), std::move(ctx));
}

Result<TlsConn> tls_dial(std::string_view network, std::string_view address,
                         std::shared_ptr<TlsContext> ctx, std::chrono::nanoseconds timeout) {
  return tls_dial(network, address, std::move(ctx), timeout, Context());
}

Result<TlsConn> tls_dial(std::string_view network, std::string_view address,
                         std::shared_ptr<TlsContext> ctx, std::chrono::nanoseconds timeout,
                         const Context& cancel) {
  if (!ctx || ctx->is_server()) return std::errc::invalid_argument;
  Deadline deadline = timeout.count() > 0 ? deadline_after(timeout) : no_deadline;
  std::string_view name = ctx->config().server_name;
  if (name.empty()) {
    auto parts = split_host_port(address);
    if (!parts) return parts.error();
    name = parts->first;
  }
  auto conn = dial(network, address, timeout, cancel);
  if (!conn) return conn.error();
  if (deadline != no_deadline) (void)conn->set_deadline(deadline);
  auto tls = TlsConn::client(std::make_unique<Conn>(std::move(*conn)), std::move(ctx), name);
  if (!tls) return tls.error();
  if (auto ec = tls->handshake(cancel)) return ec;
  if (deadline != no_deadline) (void)tls->set_deadline(no_deadline);
  return tls;
}

}  // namespace goro::net
