// goro::http::ResponseWriter — how a handler answers.
//
// The writer buffers the body (up to ServerOptions::write_buffer_size) so that a
// response the handler finishes without flushing leaves in one writev, head and body
// together, with a Content-Length. flush() — or outgrowing the buffer — sends the head
// and streams from then on: with the Content-Length the handler set, else chunked
// (HTTP/1.1) or delimited by closing the connection (HTTP/1.0).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/headers.hpp>

namespace goro::http {

namespace detail {
// Where a response goes (the server's connection, or a test).
class ResponseSink {
 public:
  virtual std::error_code write_out(const iovec* iov, int count) = 0;
  // Asked as the head is built: whether the connection can carry another request after
  // this response (false adds "Connection: close").
  virtual bool reusable() = 0;

  // A sink that frames the response itself (HTTP/2) says so here; the writer then hands
  // it the head as fields through write_head, the body bytes unframed through
  // write_out, and the end through end_body, and never serialises an HTTP/1.1 head.
  virtual bool frames_response() const noexcept { return false; }
  // The head: status, the handler's fields (Content-Length, Transfer-Encoding and
  // Connection among them are the sink's to drop), the body length (-1: unknown), the
  // first body bytes, and whether the response ends with them.
  virtual std::error_code write_head(int status, const Headers& headers,
                                     std::int64_t content_length, std::string_view body, bool end) {
    (void)status, (void)headers, (void)content_length, (void)body, (void)end;
    return std::make_error_code(std::errc::operation_not_supported);
  }
  // The body is over; complete is false when it is shorter than the length announced.
  virtual std::error_code end_body(bool complete) {
    (void)complete;
    return {};
  }

 protected:
  ~ResponseSink() = default;
};
struct ResponseAccess;
}  // namespace detail

class ResponseWriter {
 public:
  ResponseWriter() = default;
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  // The status to send (default 200). Ignored once the head is sent.
  void set_status(int code) noexcept;
  int status() const noexcept { return status_; }
  // The response headers; changes after the head is sent have no effect. Date and
  // Server are added unless set; Content-Length / Transfer-Encoding and Connection
  // are managed by the server (a Content-Length set here is honoured for streaming).
  Headers& header() noexcept { return headers_; }

  // Appends to the body. May send the head and data (see above); parks while the
  // client is slow. Returns the write error, errc::content_length_exceeded, or
  // errc::response_finished when the server already answered on its own.
  std::error_code write(std::string_view data);
  std::error_code write(const void* data, std::size_t len) {
    return write(std::string_view(static_cast<const char*>(data), len));
  }
  // Sends the head (if not yet sent) and what is buffered; from then on the body is
  // streamed.
  std::error_code flush();

  // Sets Content-Type (text/plain; charset=utf-8 / application/json) and the status,
  // and writes body.
  std::error_code text(std::string_view body, int status = 200);
  std::error_code json(std::string_view body, int status = 200);

  bool headers_sent() const noexcept { return head_sent_; }
  // Body bytes accepted so far.
  std::uint64_t bytes_written() const noexcept { return body_bytes_; }

 private:
  friend struct detail::ResponseAccess;

  // framed: the sink frames the body (HTTP/2), declared_length_ says its length or -1.
  enum class Framing : std::uint8_t { none, length, chunked, close, framed };

  std::error_code send_head(bool final);
  std::error_code send_framed_head(bool final);
  std::error_code send_body(std::string_view data);
  std::error_code fail(std::error_code ec) noexcept;

  detail::ResponseSink* sink_ = nullptr;
  Headers headers_;
  std::string head_;    // the serialised head, reused
  std::string buffer_;  // body not yet sent, reused
  int status_ = 200;
  int request_minor_ = 1;
  bool head_request_ = false;
  bool keep_alive_ = true;
  bool head_sent_ = false;
  bool finished_ = false;
  bool hold_ = false;  // buffer everything, flush() does nothing (timeout middleware)
  Framing framing_ = Framing::none;
  std::int64_t declared_length_ = -1;
  std::uint64_t body_bytes_ = 0;
  std::size_t buffer_limit_ = 64 * 1024;
  std::error_code error_;
};

}  // namespace goro::http
