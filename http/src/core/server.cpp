// The server: accept loops that start one goroutine per connection (a Connection, in
// core/conn.cpp), graceful shutdown, and the package's listen-and-serve helpers.
#include <goro/http/server.hpp>

#include <chrono>
#include <mutex>
#include <tuple>

#include <goro/http/errors.hpp>
#include <goro/net/conn.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "core/conn.hpp"

namespace goro::http {

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_shared<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  std::tie(impl_->shutdown_started, impl_->cancel_shutdown_started) =
      goro::with_cancel(goro::background());
  std::tie(impl_->base, impl_->cancel_base) = goro::with_cancel(goro::with_value(
      impl_->options.base_context, detail::shutdown_key, impl_->shutdown_started));
}

Context Server::shutdown_context() const { return impl_->shutdown_started; }

Server::~Server() = default;

namespace {

void start_conn(const std::shared_ptr<Server::Impl>& impl, std::unique_ptr<net::Stream> stream,
                bool tls) {
  detail::ConnRef conn = detail::Connection::open(impl, std::move(stream), tls, true);
  goro::go(GoOptions{.stack_size = impl->options.stack_size, .name = "http conn"},
           [conn = std::move(conn)]() mutable { detail::Connection::serve(std::move(conn)); });
}

// Errors accept() may return that concern one connection, not the listener.
bool transient_accept_error(std::error_code ec) {
  return ec == std::errc::connection_aborted || ec == std::errc::connection_reset ||
         ec == std::errc::protocol_error || ec == std::errc::interrupted;
}

template <class L, class Wrap>
std::error_code accept_loop(const std::shared_ptr<Server::Impl>& impl, L& listener,
                            net::Listener& inner, bool tls, Wrap wrap) {
  {
    std::lock_guard lock(impl->mu);
    if (impl->shutting_down) return errc::server_closed;
    impl->listeners.insert(&inner);
  }
  std::error_code result;
  for (;;) {
    auto conn = listener.accept();
    if (conn) {
      start_conn(impl, wrap(std::move(*conn)), tls);
      continue;
    }
    if (transient_accept_error(conn.error())) continue;
    std::lock_guard lock(impl->mu);
    result = impl->shutting_down ? make_error_code(errc::server_closed) : conn.error();
    break;
  }
  std::lock_guard lock(impl->mu);
  impl->listeners.erase(&inner);
  return result;
}

}  // namespace

std::error_code Server::serve(net::Listener& listener) {
  return accept_loop(impl_, listener, listener, false,
                     [](net::Conn&& c) -> std::unique_ptr<net::Stream> {
                       return std::make_unique<net::Conn>(std::move(c));
                     });
}

std::error_code Server::serve(net::TlsListener& listener) {
  return accept_loop(impl_, listener, listener.inner(), true,
                     [](net::TlsConn&& c) -> std::unique_ptr<net::Stream> {
                       return std::make_unique<net::TlsConn>(std::move(c));
                     });
}

void Server::serve_conn(std::unique_ptr<net::Stream> stream) {
  detail::Connection::serve(detail::Connection::open(impl_, std::move(stream), false, false));
}

void Server::serve_conn(std::unique_ptr<net::TlsConn> stream) {
  detail::Connection::serve(detail::Connection::open(impl_, std::move(stream), true, false));
}

std::error_code Server::shutdown(std::chrono::steady_clock::time_point deadline) {
  goro::Chan<int> drained;
  impl_->cancel_shutdown_started();
  {
    std::lock_guard lock(impl_->mu);
    impl_->shutting_down = true;
    impl_->closing.store(true, std::memory_order_seq_cst);
    for (net::Listener* l : impl_->listeners) l->close();
    impl_->conns.for_each([](detail::Connection* c) {
      if (c->idle()) {
        c->close_stream();
      } else {
        c->begin_shutdown();
      }
    });
    if (impl_->conns.empty()) return {};
    impl_->drained = drained;
  }
  auto left = deadline - std::chrono::steady_clock::now();
  if (left > std::chrono::nanoseconds::zero() &&
      goro::select(goro::recv_case(drained), goro::timeout_case(left)) == 0) {
    return {};
  }
  // Out of time: the handlers still running learn it through their contexts, and their
  // connections close.
  impl_->cancel_base();
  std::lock_guard lock(impl_->mu);
  if (impl_->conns.empty()) return {};
  impl_->conns.for_each([](detail::Connection* c) { c->close_stream(); });
  return errc::shutdown_timeout;
}

Context shutdown_context(Request& req) {
  const Context* started = req.context().value(detail::shutdown_key);
  return started != nullptr ? *started : Context();
}

std::size_t Server::connection_count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->conns.size();
}

std::error_code listen_and_serve(std::string_view address, Handler handler) {
  Result<net::Listener> listener = net::listen("tcp", address);
  if (!listener) return listener.error();
  Server server(std::move(handler));
  return server.serve(*listener);
}

std::error_code listen_and_serve_tls(std::string_view address, std::string_view cert_file,
                                     std::string_view key_file, Handler handler) {
  net::TlsConfig config;
  config.certificates.push_back({std::string(cert_file), std::string(key_file)});
  config.alpn = {"h2", "http/1.1"};
  Result<std::shared_ptr<net::TlsContext>> context = net::TlsContext::server(config);
  if (!context) return context.error();
  Result<net::TlsListener> listener = net::tls_listen("tcp", address, *context);
  if (!listener) return listener.error();
  Server server(std::move(handler));
  return server.serve(*listener);
}

}  // namespace goro::http