// goro::http::ResponseWriter — how a handler answers: an interface, as Go's.
//
//   void handler(http::Request& req, http::ResponseWriter& w) {
//     w.header().set("Cache-Control", "no-store");
//     w.text("hello\n");              // status 200, Content-Type, body
//   }
//
// The server's writer buffers the body (up to ServerOptions::write_buffer_size), so a
// response the handler finishes without flushing leaves in one write, head and body
// together, with a Content-Length. flush() — or outgrowing the buffer — sends the head
// and streams from then on: with the Content-Length the handler set, else chunked
// (HTTP/1.1), delimited by closing the connection (HTTP/1.0), or in DATA frames (HTTP/2).
//
// Middleware may wrap the writer a handler gets: a class that implements ResponseWriter
// around another (compression, a cache, a timeout, a recorder for metrics). It says which
// writer it wraps through unwrap(), so that ResponseController (response_controller.hpp)
// still finds the optional powers of the writers below it: trailers, early hints,
// deadlines, taking the connection over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include <goro/http/headers.hpp>

namespace goro::http {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  // The response headers; changes after the head is sent have no effect. Date and
  // Server are added unless set; Content-Length, Transfer-Encoding and Connection are
  // the server's to manage (a Content-Length set here is honoured when streaming, and
  // "Connection: close" ends the connection after this response).
  virtual Headers& header() = 0;
  // The status to send (default 200). Ignored once the head is sent.
  virtual void set_status(int code) = 0;
  virtual int status() const = 0;

  // Appends to the body. May send the head and data (see above); parks while the
  // client is slow. Returns the write error, errc::content_length_exceeded, or
  // errc::response_finished when the server already answered on its own.
  virtual std::error_code write(std::string_view data) = 0;
  // Sends the head (if not yet sent) and what is buffered; from then on the body is
  // streamed.
  virtual std::error_code flush() = 0;

  // Whether the head has gone out.
  virtual bool headers_sent() const = 0;
  // Body bytes accepted so far.
  virtual std::uint64_t bytes_written() const = 0;

  // The writer this one wraps, for a writer that wraps another (middleware); nullptr
  // for the server's own. ResponseController follows it to find optional powers.
  virtual ResponseWriter* unwrap() noexcept { return nullptr; }

  std::error_code write(const void* data, std::size_t len) {
    return write(std::string_view(static_cast<const char*>(data), len));
  }
  // Sets Content-Type (text/plain; charset=utf-8 / application/json) unless set, and
  // the status, and writes body.
  std::error_code text(std::string_view body, int status = 200);
  std::error_code json(std::string_view body, int status = 200);

 protected:
  ResponseWriter() = default;
};

}  // namespace goro::http
