// goro::http::Client — a blocking HTTP client (HTTP/1.1 and HTTP/2) with a connection pool.
//
//   goro::http::Client client;
//   goro::Result<goro::http::ClientResponse> r = client.get("http://127.0.0.1:8080/json");
//   if (r) std::printf("%d %s\n", r->status, r->body.c_str());
//
// Every call parks the calling goroutine, never the thread. Responses are parsed with
// the same strict llhttp engine as the server (Content-Length, chunked, or delimited by
// close). Connections are kept per scheme://host:port and reused; a request that fails
// on a reused connection before any response byte arrives (the server had closed it
// while idle) is retried once on a new connection when its method is idempotent.
// HTTPS verifies the server's certificate chain and name (goro::net::TlsConn).
// Redirects are not followed unless ClientOptions::max_redirects says so.
//
// HTTP/2, as Go's client: offered by ALPN on https:// (ClientOptions::http2, on by
// default), and spoken with prior knowledge on http:// when ClientOptions::h2c says so.
// One HTTP/2 connection per origin carries many concurrent calls, up to the server's
// SETTINGS_MAX_CONCURRENT_STREAMS; past it a second connection is opened. A GOAWAY sends
// new calls to a new connection and lets the ones in flight finish. ClientStream (below)
// writes a request body and reads a response as they go, with trailers: what gRPC needs.
//
// A Client is safe to use from many goroutines at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <goro/http/headers.hpp>
#include <goro/base/result.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::http {

struct ClientOptions {
  // Time for a whole call: connecting, writing the request, reading the response head
  // and body, and following redirects (Go's Client.Timeout); zero: no limit. Past it the
  // call fails with a timeout error (net::is_timeout) and its connection is closed. The
  // per-operation limits below still apply inside it. ClientRequest::timeout overrides
  // it for one call.
  std::chrono::nanoseconds timeout{0};
  // Time to connect (DNS, TCP and the TLS handshake).
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(10);
  // Longest wait for the next bytes of a response (head or body); zero: none.
  std::chrono::nanoseconds read_timeout = std::chrono::seconds(30);
  // Longest wait for writing a request; zero: none.
  std::chrono::nanoseconds write_timeout = std::chrono::seconds(30);
  // Idle connections kept per host, and for how long (closed between idle_timeout and
  // 1.5 times it, by a goroutine that runs while the pool holds any). The default lets a
  // few dozen concurrent calls to one host reuse their connections: with fewer kept
  // than are in use, each call past the limit closes a connection and the next opens
  // one, leaving a socket in TIME_WAIT per call.
  std::size_t max_idle_per_host = 64;
  std::chrono::nanoseconds idle_timeout = std::chrono::seconds(90);
  // Largest response body accepted (errc::body_too_large past it).
  std::uint64_t max_body_bytes = 64u << 20;
  // Largest response head accepted.
  std::size_t max_header_bytes = 64 * 1024;
  // Redirects (301, 302, 303, 307, 308) followed; zero: the redirect is returned.
  int max_redirects = 0;
  // HTTPS: PEM file of trusted CAs (empty: the system's store), and whether to verify
  // the server (off only for tests).
  std::string ca_file{};
  bool verify = true;
  // HTTPS: the certificate and key presented when the server asks for one (mutual
  // TLS); none by default.
  std::optional<net::TlsCertificate> client_certificate{};
  // HTTPS: the name sent as SNI and verified in the server's certificate, instead of the
  // URL's host (gRPC's server_host_override); empty: the URL's host.
  std::string tls_server_name{};
  // Sent unless the request sets its own.
  std::string user_agent = "goro-http";
  // HTTP/2: offer "h2" by ALPN on https:// (the server picks); off: HTTP/1.1 only.
  bool http2 = true;
  // HTTP/2 with prior knowledge on http:// (h2c, RFC 9113 3.3): every http:// call speaks
  // HTTP/2 without an upgrade. For servers known to speak it (gRPC over h2c).
  bool h2c = false;
  // HTTP/2 liveness: a connection that has received nothing for ping_interval is sent a
  // PING; without an answer within ping_timeout it is closed and its calls fail
  // (errc::connection_lost). Zero interval: no PINGs (a dead peer is then found only by
  // read_timeout).
  std::chrono::nanoseconds ping_interval{0};
  std::chrono::nanoseconds ping_timeout = std::chrono::seconds(20);
};

struct ClientRequest {
  std::string method = "GET";
  std::string url{};  // http://host[:port]/path?query or https://...
  Headers headers{};
  std::string body;  // sent with Content-Length (none for an empty body on GET/HEAD)
  // This call's total limit, in place of ClientOptions::timeout; zero: the client's.
  std::chrono::nanoseconds timeout{0};
  // The call gives up when this context is cancelled or its deadline passes, whatever
  // it is doing (connecting, writing, waiting for the response): the request is
  // abandoned, its connection closed, and the call fails with context.err().
  // When it carries a trace (goro/http/trace.hpp: trace() puts one on each request's
  // context), send() makes a client span, a child of the context's span, sends its
  // traceparent and the tracestate (unless the request sets traceparent itself), and
  // hands the span to the trace's exporter when the call returns. open_stream() adds
  // nothing: its caller does (gRPC calls do, for their whole call).
  Context context{};
};

struct ClientResponse {
  int status = 0;
  std::string reason{};  // empty on HTTP/2
  int version_major = 1;
  int version_minor = 1;
  Headers headers{};
  std::string body{};
  // Trailer fields (a chunked body's trailer section, HTTP/2 trailing HEADERS).
  Headers trailers{};

  std::string_view header(std::string_view name) const noexcept { return headers.get(name); }
};

// One request whose body is written and whose response is read as they go, on an
// HTTP/2 stream (Client::open_stream). One goroutine may write while another reads (a
// bidirectional stream); two goroutines may not both write, nor both read.
//
// The request's context (ClientRequest::context) and its timeout cover the whole
// exchange: when either ends it, or cancel() is called, the stream is reset with
// RST_STREAM(CANCEL) and every blocked call returns the context's error (or a timeout).
// Destroying a stream that has not ended resets it the same way.
class ClientStream {
 public:
  virtual ~ClientStream() = default;
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // Appends data to the request body; parks while the server's flow-control windows
  // are closed. end: this is the last of the body (END_STREAM). Fails with the stream's
  // error (reset by the server: errc::stream_reset; the connection: errc::connection_lost;
  // cancelled: the context's error) or errc::request_finished after end.
  virtual std::error_code write(std::string_view data, bool end = false) = 0;
  // Ends the request body (an empty DATA frame with END_STREAM) unless write did.
  virtual std::error_code close_send() = 0;
  // Waits for the response head (informational 1xx heads are skipped). The response's
  // status and headers are then in response(); its body is read with read().
  virtual std::error_code wait_response() = 0;
  virtual const ClientResponse& response() const = 0;
  // Reads up to len bytes of the response body, parking until some arrive; 0 at its
  // end, when response().trailers holds the trailer fields. Reading acknowledges the
  // bytes to the server (WINDOW_UPDATE): the server sends no further ahead than the
  // reader than the stream's window. Fails as write does.
  virtual Result<std::size_t> read(void* buf, std::size_t len) = 0;
  // Resets the stream (RST_STREAM CANCEL) unless it has ended; blocked calls return
  // context_errc::canceled.
  virtual void cancel() = 0;
  // After a call failed with errc::stream_reset: the server's RST_STREAM error code
  // (RFC 9113 7: 0x7 REFUSED_STREAM, 0x8 CANCEL, ...); REFUSED_STREAM also when a GOAWAY
  // said the stream was never processed.
  virtual std::uint32_t reset_code() const = 0;

 protected:
  ClientStream() = default;
};

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends request and reads the whole response. Fails with a net error (refused,
  // timeout, TLS), errc::bad_url, errc::invalid_request, errc::malformed_response,
  // errc::header_too_large, errc::body_too_large, errc::unexpected_eof or
  // errc::too_many_redirects. An HTTP error status is not a failure. Blocks (parks).
  Result<ClientResponse> send(const ClientRequest& request);
  Result<ClientResponse> get(std::string_view url);
  // GET under ctx (see ClientRequest::context).
  Result<ClientResponse> get(std::string_view url, const Context& ctx);
  Result<ClientResponse> post(std::string_view url, std::string_view content_type,
                              std::string body);

  // Opens an HTTP/2 stream for request and sends its head (and request.body, if any,
  // without ending the body): the rest is written and the response read through the
  // stream. Needs an origin that speaks HTTP/2 (https:// with ALPN "h2", or http:// with
  // ClientOptions::h2c); errc::http2_required otherwise. Blocks while connecting.
  Result<std::unique_ptr<ClientStream>> open_stream(const ClientRequest& request);

  // Closes the idle pooled connections.
  void close_idle();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;  // shared with the goroutine that closes idle connections
};

// The parts of an http(s) URL.
struct Url {
  std::string scheme{};  // "http" or "https"
  std::string host{};    // without brackets
  std::uint16_t port = 0;
  std::string target;  // "/path?query" ("/" when empty)
};

// Parses an absolute http:// or https:// URL; errc::bad_url otherwise.
Result<Url> parse_url(std::string_view url);

}  // namespace goro::http
