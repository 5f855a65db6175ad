// goro::http::Client — a blocking HTTP/1.1 client with a keep-alive pool.
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
// A Client is safe to use from many goroutines at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <goro/http/headers.hpp>
#include <goro/base/result.hpp>
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
  // Sent unless the request sets its own.
  std::string user_agent = "goro-http";
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
  Context context{};
};

struct ClientResponse {
  int status = 0;
  std::string reason{};
  int version_minor = 1;
  Headers headers{};
  std::string body{};

  std::string_view header(std::string_view name) const noexcept { return headers.get(name); }
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
