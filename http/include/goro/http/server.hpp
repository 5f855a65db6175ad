// goro::http::Server — HTTP/1.1 and HTTP/2 over goro::net, one goroutine per connection.
//
//   goro::run([] {
//     goro::http::listen_and_serve("127.0.0.1:8080", [](auto& req, auto& w) {
//       w.text("Hello, World!");
//     });
//   });
//
// HTTP/2 (ServerOptions::enable_http2, enable_h2c) runs each stream's handler in a
// goroutine of its own; docs/http.md says how.
//
// Each accepted connection is served by its own goroutine, which reads requests into
// one reusable buffer, parses them with llhttp in strict mode, and runs the handler for
// one request at a time, so pipelined requests are answered in order. Every would-block
// (a slow client, a handler sleeping or calling a backend) parks that goroutine only.
//
// Protocol errors are answered with a short text/plain body naming the problem and
// "Connection: close", and the connection is closed: nothing after a framing error is
// interpreted (400 bad syntax or framing, 408 head too slow, 413 body too large — at
// once when Content-Length says so, 414 target too long, 417 unknown expectation,
// 431 header too large, 501 unknown method or transfer coding, 505 HTTP version).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <goro/base/error.hpp>

#include <goro/http/error_reply.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/request.hpp>
#include <goro/http/response.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/stream.hpp>
#include <goro/net/tls.hpp>

namespace goro::http {

using Handler = std::function<void(Request&, ResponseWriter&)>;

// A reply the server makes on its own, without the handler: a malformed or oversized
// request (400, 413, 414, 431, 501, 505), a head or body too slow (408), an unknown
// expectation (417). Middleware never sees these; ServerOptions::on_error_reply does,
// after shape_reply made them what the client gets.
struct ErrorReply {
  int status = 0;
  std::string_view message{};  // names the problem; the reply's body says it too
  std::string_view remote_addr{};
  std::string_view request_id{};  // with ServerOptions::request_ids; else ""
  // The request's method, target and the header fields read so far, once its target was
  // read; empty when the problem came before (a malformed method, a timeout).
  std::string_view method{};
  std::string_view target{};
  std::span<const HeaderField> request_headers{};
  // Header fields of the reply (X-Request-Id, shape_reply's); the hook may add (CORS).
  Headers headers{};
};
using ErrorReplyHook = std::function<void(ErrorReply&)>;

// A condition the server must meet to take traffic, beside its own (accepting, not
// draining): a database reachable, a cache warmed. check returns an empty Error while it
// holds, else why not; it runs on the goroutine of each readiness probe, under the
// probe's request context, so it may block briefly (a ping) but should answer well
// inside the probe's timeout.
struct ReadinessCheck {
  std::string name;
  std::function<goro::Error(const Context& ctx)> check;
};

// Limits and timeouts; the defaults are safe for a server facing the Internet.
struct ServerOptions {
  // Time to read a request's head, counted from its first byte (for the first request
  // of a connection, from the accept). Past it: 408 and close. (Go: ReadHeaderTimeout.)
  std::chrono::nanoseconds read_header_timeout = std::chrono::seconds(10);
  // Time a keep-alive connection may wait for the first byte of its next request.
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(60);
  // Time to read a request body, counted from the end of its head; zero: no limit.
  std::chrono::nanoseconds read_body_timeout{0};
  // Time to write a response, counted from the end of the request head; zero: no limit.
  std::chrono::nanoseconds write_timeout{0};

  // Bytes of the request-target; past it: 414.
  std::size_t max_request_line = 8 * 1024;
  // Bytes of all header fields of a request (and of its trailers); past it: 431.
  std::size_t max_header_bytes = 64 * 1024;
  // Bytes of a request body; past it: 413 (before reading it when Content-Length says
  // so, else as soon as a chunked body grows past it).
  std::uint64_t max_body_bytes = 16u << 20;
  // Body bytes the handler left unread that the server discards to keep the
  // connection alive; a larger remainder closes the connection instead.
  std::size_t max_drain_bytes = 256 * 1024;
  // Response body bytes buffered before the head is sent and the body streamed.
  std::size_t write_buffer_size = 64 * 1024;
  // Initial size of a connection's read buffer (it grows for large heads).
  std::size_t read_buffer_size = 4 * 1024;

  // HTTP/2 (RFC 9113, framing and HPACK by nghttp2). Over TLS a connection whose
  // client and listener agreed on ALPN "h2" is served as HTTP/2 (the listener's
  // TlsConfig must offer "h2"; listen_and_serve_tls does); off: such a connection is
  // served as HTTP/1.1, so leave "h2" out of the offer too. The limits and timeouts
  // above apply to each stream (max_header_bytes is also sent as
  // SETTINGS_MAX_HEADER_LIST_SIZE; idle_timeout counts while no stream is open).
  bool enable_http2 = true;
  // Cleartext HTTP/2 with prior knowledge ("h2c"): a plain connection whose first bytes
  // are the client preface is served as HTTP/2, any other as HTTP/1.1. There is no
  // upgrade from HTTP/1.1 (RFC 9113 dropped it).
  bool enable_h2c = false;
  // Streams an HTTP/2 client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS);
  // a new stream while this many handlers still run is refused (REFUSED_STREAM).
  std::uint32_t http2_max_concurrent_streams = 250;

  // Connections open at once (accepted, or passed to serve_conn); zero: no limit. At the
  // limit the accept loops wait for one to close, and new connections wait in the
  // kernel's listen backlog (accept backpressure, as Go's netutil.LimitListener): the
  // connections already open keep their speed. http_server_accept_waits_total on
  // /metrics counts the waits. overload.hpp has the limits on requests.
  std::size_t max_connections = 0;

  // Stack of each connection goroutine; zero: the runtime's default (goro::Config).
  std::size_t stack_size = 0;
  // Where a handler's exception is reported; empty: one line on stderr.
  std::function<void(std::string_view message)> error_log{};
  // Shapes every reply goro writes by itself, the server's own and those of the router,
  // JSON decoding, recover(), timeout() and the other built-in handlers (status, content
  // type, body, fields): error_reply.hpp. Empty: goro's text replies.
  ReplyShaper shape_reply{};
  // Called for every reply the server makes on its own (see ErrorReply), before it is
  // sent, on the connection's goroutine: for logging (http::log_error_replies) and to add
  // header fields. An exception from it is reported on error_log and ignored.
  ErrorReplyHook on_error_reply{};
  // Gives every request an id: the client's X-Request-Id when it is 1 to 128 characters
  // of [A-Za-z0-9._-], else 16 random hex digits. It goes on the response (X-Request-Id,
  // the server's own replies included), on the request's context (request_id_of(req),
  // for handlers and their backend calls) and to shape_reply and on_error_reply.
  bool request_ids = false;
  // The parent of every request's context (Go's BaseContext): values put there (a
  // logger, a database handle) reach every handler, and cancelling it cancels them all.
  Context base_context{};

  // What readiness() (and /readyz, readiness_handler()) asks beside the server's own
  // state, in order.
  std::vector<ReadinessCheck> readiness_checks{};
  // How long shutdown() gives an idle HTTP/1.1 connection that still has its goroutine
  // (idle less than its park delay, 30 to 400 ms: a load balancer's pooled connection, a
  // client in a request loop)
  // for one more request, answered with "Connection: close", before closing it. Such a
  // client may have sent that request already: closing under it would cut it, and the
  // client could not tell whether it was served. Connections idle longer close at once.
  // Zero: every idle connection closes at once (Go's Shutdown).
  std::chrono::nanoseconds shutdown_idle_grace = std::chrono::milliseconds(500);
};

// What readiness() found.
struct Readiness {
  bool ready = false;
  // One line per condition, in Kubernetes' /readyz?verbose format: "[+]serving ok",
  // "[-]draining failed: the server is shutting down", "[-]db failed: <why>".
  std::vector<std::string> lines;
};

class Server {
 public:
  // handler must be safe to call from many goroutines at once.
  Server(ServerOptions options, Handler handler);
  explicit Server(Handler handler) : Server(ServerOptions{}, std::move(handler)) {}
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Accepts connections on listener and serves each in its own goroutine, until the
  // listener fails or shutdown() is called (then returns errc::server_closed). Blocks.
  // The listener must outlive the call; serve() may run on several listeners at once.
  std::error_code serve(net::Listener& listener);
  // The same over TLS; the handshake runs in the connection's goroutine, bounded by
  // read_header_timeout.
  std::error_code serve(net::TlsListener& listener);
  // Serves one already accepted stream in the calling goroutine; returns when the
  // connection ends. A TLS stream is served by the protocol its ALPN agreed (HTTP/2
  // with "h2").
  void serve_conn(std::unique_ptr<net::Stream> stream);
  void serve_conn(std::unique_ptr<net::TlsConn> stream);

  // Graceful shutdown: readiness turns false (as drain() does, if it was not called),
  // stops accepting, closes idle connections (those busy a moment ago after
  // shutdown_idle_grace), lets requests in flight finish (their responses carry
  // "Connection: close"; HTTP/2 connections get GOAWAY), and at the deadline closes the
  // connections still open. Returns once every connection is gone ({}), or at the
  // deadline (errc::shutdown_timeout). Blocks (parks).
  std::error_code shutdown(std::chrono::steady_clock::time_point deadline);

  // Connections currently open. Callable from any thread.
  std::size_t connection_count() const;

  // Readiness, what a load balancer's or Kubernetes' readiness probe asks (/readyz): ready
  // while it serves (an accept loop of serve() runs, or a connection of serve_conn is
  // open), drain() and shutdown() have not been called, and every
  // ServerOptions::readiness_checks holds (each is run, in order; ctx is theirs).
  // Blocks while a check does. Call it from a goroutine.
  Readiness readiness(const Context& ctx = Context()) const;

  // The first step of a shutdown behind a load balancer: readiness turns false for good
  // and drain_context() is cancelled, while the server goes on accepting and serving as
  // before. After the time the load balancer takes to notice (its probe interval times
  // its failure threshold; Kubernetes: the endpoints' propagation), shutdown() finds no
  // new traffic coming. Does not block; calling it again does nothing.
  void drain();
  // Cancelled by drain(), or by shutdown() if it comes first: for what should stop
  // attracting work while requests are still served (a gRPC health service turning
  // NOT_SERVING, a registration in a service directory).
  Context drain_context() const;

  // Cancelled as soon as shutdown() begins. A long-lived handler (a stream of events, a
  // long poll) watches it beside its request's context and ends early, instead of
  // holding the shutdown to its deadline. (Request contexts themselves are cancelled
  // only at the deadline: ordinary requests in flight finish normally.)
  Context shutdown_context() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// What every Server of the process has done since it started (the numbers /metrics
// exports as http_server_*). Each is a sum over per-thread shards, read on its own.
struct ServerStats {
  std::uint64_t connections_open = 0;   // accepted (or passed to serve_conn), not yet closed
  std::uint64_t connections_total = 0;  // accepted, ever
  std::uint64_t bytes_received = 0;     // read from clients: heads and bodies
  std::uint64_t bytes_sent = 0;         // written to clients: heads and bodies
  std::uint64_t requests_total = 0;     // requests handed to a handler, every protocol
  std::uint64_t accept_waits = 0;  // an accept loop waited at ServerOptions::max_connections
  std::uint64_t requests_shed = 0;  // turned away by limit_concurrency or rate_limit
  // ServerOptions::max_connections summed over the servers accepting now (those with a
  // limit); 0 when none has one.
  std::uint64_t max_connections = 0;
};
ServerStats server_stats();

// The shutdown_context() of the server that serves req; background() for a request
// that no Server made.
Context shutdown_context(Request& req);
// The drain_context() of the server that serves req; background() for a request that no
// Server made.
Context drain_context(Request& req);

// Listens on address ("host:port") and serves handler with default options. Blocks
// until the listener fails; returns that error.
std::error_code listen_and_serve(std::string_view address, Handler handler);
// The same over TLS with one certificate chain and key (PEM files), offering ALPN
// "h2" and "http/1.1".
std::error_code listen_and_serve_tls(std::string_view address, std::string_view cert_file,
                                     std::string_view key_file, Handler handler);

}  // namespace goro::http
