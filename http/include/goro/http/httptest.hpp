// goro::http::httptest — testing handlers the way Go's net/http/httptest does.
//
//   goro::run([] {
//     namespace httptest = goro::http::httptest;
//     httptest::Recorded r = httptest::record(handler, httptest::new_request("GET", "/users/7"));
//     assert(r.status == 200 && r.header("content-type") == "application/json");
//
//     auto srv = httptest::Server::start(handler);      // 127.0.0.1:<ephemeral port>
//     auto resp = srv->client().get(srv->url() + "/users/7");
//     srv->close();
//   });
//
// record() runs a handler without any network: it writes the built request as HTTP/1.1
// bytes into an in-memory net::Stream, lets the real server code (Server::serve_conn)
// serve that one connection, and parses what the server wrote back. Parsing, limits,
// error replies, framing and middleware therefore behave exactly as on a socket.
// Server serves a handler on a real loopback socket, with a Client set up for it.
//
// Link goro::httptest (CMake: find_package(goro) + target_link_libraries(test PRIVATE
// goro::httptest)); it depends on goro::http only, on no test framework.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <goro/http/client.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/server.hpp>
#include <goro/net/addr.hpp>
#include <goro/base/result.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::http::httptest {

// A request to hand to record(), built field by field and sent as HTTP/1.1 bytes
// exactly as given: nothing is validated, so a test may also send a malformed request
// and see the server's error reply.
class RequestBuilder {
 public:
  // target is the request-target: a path ("/users/7?x=1") or an absolute URL
  // ("http://api.example/users/7"), whose host then becomes the Host header.
  RequestBuilder(std::string_view method, std::string_view target, std::string body = {});

  // Appends a header field (order kept, repeats allowed). Host, Content-Length and
  // Transfer-Encoding set here replace the ones the builder would add.
  RequestBuilder& header(std::string_view name, std::string_view value);
  // Replaces the body.
  RequestBuilder& body(std::string body);
  // Sends the body with Transfer-Encoding: chunked, in chunks of at most chunk_size
  // bytes (zero: one chunk), instead of with Content-Length.
  RequestBuilder& chunked(std::size_t chunk_size = 0);
  // The client's address the handler sees in Request::remote_addr(): a numeric
  // "ip:port" ("10.0.0.7:5000", "[::1]:80"); anything else leaves it empty.
  // Default "192.0.2.1:1234", as in Go.
  RequestBuilder& remote_addr(std::string_view address);
  // The version in the request line (default 1.1). Responses are always HTTP/1.1.
  RequestBuilder& version(int major, int minor);

  std::string_view method() const noexcept { return method_; }
  std::string_view target() const noexcept { return target_; }
  const Headers& headers() const noexcept { return headers_; }
  const std::string& body() const noexcept { return body_; }
  std::string_view remote_addr() const noexcept { return remote_addr_; }

  // The request as it goes over the wire. Added unless set with header(): Host (the
  // absolute target's host, else "example.com"), and for a non-empty body, or an empty
  // one on POST, PUT and PATCH, Content-Length (or Transfer-Encoding: chunked). When
  // header() set Content-Length or Transfer-Encoding, the body follows as given.
  std::string wire() const;

 private:
  std::string method_;
  std::string target_;
  Headers headers_;
  std::string body_;
  std::string remote_addr_ = "192.0.2.1:1234";
  int version_major_ = 1;
  int version_minor_ = 1;
  bool chunked_ = false;
  std::size_t chunk_size_ = 0;
};

// Go's httptest.NewRequest: a builder for method and target with body.
inline RequestBuilder new_request(std::string_view method, std::string_view target,
                                  std::string body = {}) {
  return RequestBuilder(method, target, std::move(body));
}

// The response the server sent, parsed (Go's ResponseRecorder after ServeHTTP). A
// connection the server closed without answering (a request it dropped) gives status 0.
struct Recorded {
  int status = 0;
  std::string reason{};
  // Every header field the server sent, in order; lookups are case-insensitive.
  Headers headers{};
  // The body, decoded when it came chunked.
  std::string body{};
  // The head went out before the handler returned, so the body was streamed: the
  // handler called flush() or wrote more than ServerOptions::write_buffer_size.
  bool flushed = false;
  // The body came with Transfer-Encoding: chunked.
  bool chunked = false;
  // The response arrived whole. False when the server cut it (a handler threw after
  // its response had started) or when the stream ended before the announced length.
  bool complete = false;
  // Every byte the server wrote, interim 1xx responses included.
  std::string raw{};

  // The first value of header `name`, or empty.
  std::string_view header(std::string_view name) const noexcept { return headers.get(name); }
  // Every value of header `name`, in the order sent (a Vary or Set-Cookie check).
  std::vector<std::string_view> header_values(std::string_view name) const {
    return headers.values(name);
  }
};

// Serves request to handler through the server code, with options, over an in-memory
// connection that carries this one request, and returns the response. The handler
// sees a connection whose client waits for the answer (client_gone() is false); read
// and write deadlines that have passed fail its reads and writes as on a socket.
//
// On a goroutine it runs there and parks as a server connection would (the handler may
// sleep, start goroutines, use middleware such as timeout()). Called from a thread that
// is not a goroutine (goro::goid() == 0) it runs inside its own goro::run with two Ps
// and returns when that ends, so it must not be called so while another goro::run is
// running anywhere in the process (only one run at a time; a second is a fatal error).
Recorded record(const Handler& handler, const RequestBuilder& request,
                const ServerOptions& options = {});

// Go's httptest.ResponseRecorder: a ResponseWriter that keeps what a handler wrote, for
// calling a handler (or middleware, or a router) directly, with no server and no
// connection. It frames nothing: the body is the bytes written, the headers those set.
class ResponseRecorder final : public ResponseWriter {
 public:
  using ResponseWriter::write;
  Headers& header() override { return headers_; }
  // Takes effect until the head counts as sent (flush()).
  void set_status(int code) override {
    if (!flushed_) status_ = code;
  }
  int status() const override { return status_; }
  std::error_code write(std::string_view data) override {
    body_.append(data);
    return {};
  }
  // Marks the head sent, as the server's writer would.
  std::error_code flush() override {
    flushed_ = true;
    return {};
  }
  bool headers_sent() const override { return flushed_; }
  std::uint64_t bytes_written() const override { return body_.size(); }

  const std::string& body() const noexcept { return body_; }
  bool flushed() const noexcept { return flushed_; }

 private:
  Headers headers_;
  std::string body_;
  int status_ = 200;
  bool flushed_ = false;
};

// How Server::start sets things up.
struct StartOptions {
  // The limits and timeouts of the server under test.
  ServerOptions server{};
  // Settings of the Client that client() returns. With tls and an empty ca_file it
  // trusts tls->cert_file, which suits a self-signed certificate; for one signed by a
  // test CA, name the CA's file here.
  ClientOptions client{};
  // Serve HTTPS with this certificate (ALPN "http/1.1") instead of plain HTTP.
  std::optional<net::TlsCertificate> tls{};
  // With tls: the host name url() uses, which the client verifies against the
  // certificate; it must resolve to 127.0.0.1 (the server listens there only).
  std::string tls_host = "localhost";
};

// Go's httptest.Server: a goro::http::Server serving a handler on 127.0.0.1 at an
// ephemeral port, in a goroutine of the calling runtime. Start, close and destroy it
// on goroutines of one goro::run; the other methods may be called from any goroutine.
class Server {
 public:
  // Listens, starts serving in a new goroutine and returns. Fails with the listen or
  // TLS setup error, or std::errc::operation_not_permitted when not called on a
  // goroutine.
  static Result<Server> start(Handler handler, StartOptions options = {});

  Server(Server&&) noexcept;
  Server& operator=(Server&&) noexcept;
  // Closes the server (close() with its default grace) if that has not been done. Must
  // run on a goroutine unless the server is closed or moved from.
  ~Server();

  // "http://127.0.0.1:PORT", or "https://<tls_host>:PORT"; no trailing slash.
  const std::string& url() const noexcept;
  // The address the server listens on.
  const net::Addr& addr() const noexcept;
  // A client for this server (the same one on every call, living as long as the
  // Server), safe to share between goroutines. close() closes its idle connections.
  Client& client() noexcept;
  // The server under test (connection_count(), ...).
  http::Server& http_server() noexcept;

  // Graceful shutdown, as Go's Server.Close: closes the client's idle connections,
  // stops accepting, closes idle connections, lets requests in flight finish within
  // grace (their responses carry "Connection: close"), then closes what is left and
  // waits until every connection goroutine has returned — so a handler still running
  // past grace is waited for. Returns {} when all finished in time, else
  // errc::shutdown_timeout; a second call returns {} at once. Blocks (parks).
  std::error_code close(std::chrono::nanoseconds grace = std::chrono::seconds(5));

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

// A Server for tests that run on a plain thread (curl, raw sockets): it runs in its own
// goro::run on a background thread. Since a process runs one goro::run at a time, it
// must not be started while another runs (from a goroutine, say), nothing else may
// start one while it is up, and the test thread cannot use goro (Client included)
// meanwhile.
class BackgroundServer {
 public:
  // Starts the thread and its runtime (runtime: its Config, two Ps unless given) and
  // returns once the server listens, or with the error of Server::start.
  static Result<BackgroundServer> start(Handler handler, StartOptions options = {},
                                        goro::Config runtime = {.maxprocs = 2});

  BackgroundServer(BackgroundServer&&) noexcept;
  BackgroundServer& operator=(BackgroundServer&&) noexcept;
  // close() if that has not been done.
  ~BackgroundServer();

  const std::string& url() const noexcept;
  const net::Addr& addr() const noexcept;

  // Server::close in the server's runtime, then waits for that runtime to end. Blocks
  // the calling thread; must not be called on a goroutine. A second call returns {}.
  std::error_code close(std::chrono::nanoseconds grace = std::chrono::seconds(5));

  struct Impl;

 private:
  explicit BackgroundServer(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace goro::http::httptest
