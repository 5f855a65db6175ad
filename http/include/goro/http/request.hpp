// goro::http::Request — a request as a handler sees it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <goro/base/result.hpp>
#include <goro/http/headers.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::net {
struct TlsConnectionState;  // <goro/net/tls.hpp>
}  // namespace goro::net

namespace goro::http {

// A request's body as a stream of bytes (Go's Request.Body). The server's parks the
// reading goroutine while the client is slow. Middleware may stand its own in front of
// it (Request::set_body_reader): a limit, a decoder, a guard.
class BodyReader {
 public:
  // Reads up to len bytes; 0 at the end of the body. See Request::read for the errors.
  virtual Result<std::size_t> read(void* buf, std::size_t len) = 0;

 protected:
  ~BodyReader() = default;
};

struct FrameworkReply;

namespace detail {
// What a Request asks of the exchange that made it (core/exchange.hpp): its context,
// made on first use, whether the client is gone, and its server's shape for the replies
// goro writes by itself (send_error).
class RequestHost {
 public:
  virtual Context request_context() = 0;
  virtual bool client_gone() = 0;
  virtual void shape_reply(FrameworkReply& reply) = 0;
  // The TLS state of the connection the request came on; nullptr for plaintext.
  virtual const net::TlsConnectionState* tls_state() const noexcept { return nullptr; }

 protected:
  ~RequestHost() = default;
};
struct RequestAccess;
}  // namespace detail

// A request received by the server. Every view it returns (method, target, path,
// headers, path values) points into the connection's buffers and is valid until the
// handler returns: copy what must outlive it.
class Request {
 public:
  Request() = default;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // "GET", "POST", ...
  std::string_view method() const noexcept { return method_; }
  // The request-target exactly as sent: "/a%20b?x=1", "http://host/p", "*".
  std::string_view target() const noexcept { return target_; }
  // The path of the target, percent-decoded ("/a b"). A request whose path holds an
  // invalid %-escape is answered 400 before any handler runs.
  std::string_view path() const noexcept { return path_; }
  // The path of the target as sent, still encoded ("/a%20b").
  std::string_view raw_path() const noexcept { return raw_path_; }
  // The query of the target without '?', still encoded ("x=1&y=a%20b").
  std::string_view raw_query() const noexcept { return raw_query_; }
  // The first value of query parameter `name`, decoded ('+' is a space); nullopt when
  // absent. Scans the query on each call.
  std::optional<std::string> query(std::string_view name) const;

  // The first value of header `name` (case-insensitive), or empty when absent.
  std::string_view header(std::string_view name) const noexcept;
  bool has_header(std::string_view name) const noexcept;
  // Every header field, in the order received.
  std::span<const HeaderField> headers() const noexcept { return headers_; }
  // The Host header; for an absolute-form target ("GET http://h/p"), the target's
  // authority, which the server puts in Host's place (RFC 9112 3.2.2).
  std::string_view host() const noexcept { return header("host"); }

  int version_major() const noexcept { return version_major_; }
  int version_minor() const noexcept { return version_minor_; }

  // The declared Content-Length, or -1 for a chunked body.
  std::int64_t content_length() const noexcept { return content_length_; }

  // Reads up to len bytes of the body (through body_reader()); 0 at its end. Parks the
  // goroutine while waiting for the client. The first read answers "Expect:
  // 100-continue" with 100 Continue. Fails with errc::body_too_large past
  // ServerOptions::max_body_bytes (the server has then answered 413 by itself if the
  // handler had not started its response), errc::malformed_body, errc::unexpected_eof,
  // or a net error (timeout).
  Result<std::size_t> read(void* buf, std::size_t len);
  // Reads the whole body (bounded by ServerOptions::max_body_bytes).
  Result<std::string> body();
  // What read() reads from: the server's body, unless middleware put its own in front
  // (Go's `r.Body = ...`); nullptr for a request without one. The reader must outlive
  // its use; put the previous one back before it goes.
  BodyReader* body_reader() const noexcept { return body_; }
  void set_body_reader(BodyReader* reader) noexcept { body_ = reader; }

  // The client's address, "ip:port".
  std::string_view remote_addr() const noexcept { return remote_addr_; }
  // The TLS state of the connection the request came on (Go's Request.TLS): version,
  // cipher, ALPN, SNI and, when the client showed one, its certificate (subject, SANs
  // such as a SPIFFE id, fingerprint; net::TlsConnectionState, <goro/net/tls.hpp>).
  // nullptr for a request over plaintext. Fixed for the connection: the handshake
  // made it, nothing is computed here.
  const net::TlsConnectionState* tls() const noexcept {
    return host_ != nullptr ? host_->tls_state() : nullptr;
  }

  // When the request's first bytes arrived: the time the netpoller saw them on the
  // connection's socket (net::Stream::readable_at), so that now() minus it is how long
  // the request waited to be served (HTTP/2: the read that brought its HEADERS). The
  // epoch when that is not known: a request whose bytes were read before the netpoller
  // looked (pipelined, or sent while the last one was being answered), a stream goro did
  // not make.
  std::chrono::steady_clock::time_point received_at() const noexcept { return received_at_; }
  void set_received_at(std::chrono::steady_clock::time_point t) noexcept { received_at_ = t; }

  // The value the router matched for wildcard `name` in its pattern ("{id}"); empty
  // when there is none.
  std::string_view path_value(std::string_view name) const noexcept;
  // Sets a path value (the router does; middleware may).
  void set_path_value(std::string_view name, std::string_view value);

  // The pattern of the route the Router matched ("GET /users/{id}"), as written when it
  // was registered; empty before a router matched one (and for its 404 and 405). Go's
  // Request.Pattern. The innermost router's, when routers are nested. It points into the
  // router, which must outlive its use.
  std::string_view pattern() const noexcept { return pattern_; }
  // Sets the pattern (a router does; the view must outlive the request).
  void set_pattern(std::string_view pattern) noexcept { pattern_ = pattern; }

  // Whether the client is known to have gone: it closed its end of the connection or
  // the connection failed (the connection's net::Stream::peer_closed(), a poll of the
  // socket that does not wait), or a body read or response write found it closed. A cheap
  // check for a handler doing long work to call between steps; it never blocks and
  // never consumes input. A client that half-closes after sending its request counts
  // as gone, as in Go.
  bool client_gone();

  // The request's context (Go's Request.Context()). The server cancels it when the
  // client goes away while the handler runs (the netpoller sees the connection closed
  // or reset: no read needed), when the server's shutdown deadline passes, and when the
  // handler returns; http::timeout cancels it when its limit passes. Pass it to every
  // blocking call made for this request (sleep, a backend call through the Client, a
  // query), so that a client that leaves frees its goroutine and the work at once.
  // Made on first use: a handler that never asks pays nothing.
  const Context& context();
  // Replaces the context for the handlers further down (Go's WithContext): middleware
  // adds values (a request id, a user) or a tighter deadline derived from context().
  void set_context(Context ctx) noexcept {
    ctx_ = std::move(ctx);
    ctx_ready_ = true;
  }

 private:
  friend struct detail::RequestAccess;

  std::string_view method_, target_, path_, raw_path_, raw_query_, remote_addr_, pattern_;
  std::span<const HeaderField> headers_;
  int version_major_ = 1, version_minor_ = 1;
  std::int64_t content_length_ = 0;
  std::chrono::steady_clock::time_point received_at_{};
  BodyReader* body_ = nullptr;
  detail::RequestHost* host_ = nullptr;
  std::string decoded_path_;
  std::vector<std::pair<std::string, std::string>> path_values_;
  std::size_t path_value_count_ = 0;
  Context ctx_;
  bool ctx_ready_ = false;
};

}  // namespace goro::http
