// Response: the server's ResponseWriter, one for every protocol (userver's way: one
// response object, a writer per protocol). It keeps what the rules of HTTP say whatever
// the framing: the status and headers until the head goes, the body buffered up to the
// limit, a HEAD response's body counted but not sent, no body for 1xx/204/304, and a
// body held to the Content-Length the handler declared. What goes on the wire is its
// sink's: the HTTP/1.1 engine serialises a head and chunks (h1/conn.cpp), the HTTP/2
// engine makes HEADERS and DATA frames (h2/stream.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/errors.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/response.hpp>
#include <goro/http/response_controller.hpp>

namespace goro::http::detail {

// The status codes whose responses have no body.
inline bool body_forbidden(int status) { return status < 200 || status == 204 || status == 304; }

// Where a Response goes: the protocol's framing of it.
class ResponseSink {
 public:
  // The head: status and the handler's fields (the sink drops those it manages:
  // Content-Length, Transfer-Encoding, Connection on HTTP/2), the body's length when known
  // (-1: the body is streamed; ignored when the status forbids a body), and the first body
  // bytes. end: nothing follows (no body, or this is all of it).
  virtual std::error_code send_head(int status, const Headers& fields, std::int64_t length,
                                    std::string_view body, bool end) = 0;
  // More of a streamed body.
  virtual std::error_code send_body(std::string_view data) = 0;
  // The end of a streamed body; complete is false when it is shorter than the length
  // announced. trailers: sent where the framing can (HTTP/1.1 chunked, HTTP/2).
  virtual std::error_code end_body(bool complete, const Headers& trailers) = 0;
  // A 1xx response before the head.
  virtual std::error_code send_informational(int status, const Headers& fields) = 0;
  // The connection, handed over (HTTP/1.1 only).
  virtual Result<TakenConnection> take_over() = 0;
  // This request's read and write deadlines.
  virtual std::error_code set_deadline(net::IoMode mode, net::Deadline d) = 0;
  // Whether send_file works here (HTTP/1.1 on plain TCP).
  virtual bool can_send_file() const { return false; }
  // count bytes of the file fd from offset, as body bytes of a response whose length
  // the head announced (the framing adds nothing around them).
  virtual std::error_code send_file(int fd, std::uint64_t offset, std::uint64_t count) {
    (void)fd;
    (void)offset;
    (void)count;
    return errc::not_supported;
  }

 protected:
  ~ResponseSink() = default;
};

class Response final : public ResponseWriter,
                       public ConnectionTaker,
                       public DeadlineSetter,
                       public InformationalWriter,
                       public TrailerWriter,
                       public ResponseDiscarder,
                       public ResponseFinisher,
                       public FileSender {
 public:
  Response() = default;

  // Readies the writer for a new response on sink (the objects are reused from one
  // request to the next, their memory kept). head_request: the request was HEAD.
  void begin(ResponseSink* sink, bool head_request, std::size_t buffer_limit);
  // Completes the response: sends what is buffered (with its length), or ends the
  // streamed body. Idempotent.
  std::error_code finish();
  // The server answered on its own (413 mid-body): later writes fail with
  // errc::response_finished.
  void mark_finished() noexcept { finished_ = true; }
  // The response cannot be completed (the handler failed mid-stream): nothing more is
  // sent, not even the end of the body.
  void abandon() noexcept { finished_ = true; }
  bool finished() const noexcept { return finished_; }
  bool taken_over() const noexcept { return taken_over_; }
  // The body length announced (Content-Length), or -1; meaningful once the head is sent.
  std::int64_t announced_length() const noexcept { return length_; }

  // ResponseWriter
  using ResponseWriter::write;
  Headers& header() noexcept override { return headers_; }
  void set_status(int code) noexcept override;
  int status() const noexcept override { return status_; }
  std::error_code write(std::string_view data) override;
  std::error_code flush() override;
  bool headers_sent() const noexcept override { return head_sent_; }
  std::uint64_t bytes_written() const noexcept override { return body_bytes_; }

  // The powers (response_controller.hpp)
  Result<TakenConnection> take_over() override;
  std::error_code set_read_deadline(net::Deadline d) override;
  std::error_code set_write_deadline(net::Deadline d) override;
  std::error_code write_informational(int status, const Headers& fields) override;
  Headers& trailer() noexcept override { return trailers_; }
  bool discard_response() override;
  std::error_code finish_response() override { return finish(); }
  std::error_code send_file(int fd, std::uint64_t offset, std::uint64_t count) override;

 private:
  std::error_code send_head(bool final);
  std::error_code send_body(std::string_view data);
  std::error_code fail(std::error_code ec) noexcept;

  ResponseSink* sink_ = nullptr;
  Headers headers_;
  Headers trailers_;
  std::string buffer_;  // body not yet sent, reused
  int status_ = 200;
  bool head_request_ = false;
  bool head_sent_ = false;
  bool finished_ = false;
  bool taken_over_ = false;
  std::int64_t length_ = -1;  // announced with the head; -1: streamed, or no body
  std::uint64_t body_bytes_ = 0;
  std::size_t buffer_limit_ = 64 * 1024;
  std::error_code error_;
};

}  // namespace goro::http::detail
