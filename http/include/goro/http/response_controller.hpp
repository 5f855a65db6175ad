// Optional powers of a ResponseWriter, and ResponseController, which finds them (Go's
// http.ResponseController).
//
//   http::ResponseController rc(w);
//   rc.write_informational(103, hints);         // 103 Early Hints before the answer
//   rc.set_write_deadline(net::deadline_after(30s));
//   if (Headers* t = rc.trailer()) t->set("Checksum", sum);   // after the body
//
// Each power is an interface a writer may implement besides ResponseWriter. The server's
// writer implements them all (a power its protocol lacks fails with errc::not_supported:
// HTTP/2 cannot hand its connection over). A middleware writer that wraps another need
// implement none: ResponseController asks each writer of the chain in turn, following
// unwrap(), and uses the first that has the power. A wrapper that must not let a power
// through (one that changes the body, say, and so cannot let a handler write raw bytes
// after taking the connection) implements it itself and refuses.
#pragma once

#include <cstdint>
#include <string>
#include <memory>
#include <system_error>

#include <goro/http/headers.hpp>
#include <goro/http/response.hpp>
#include <goro/net/stream.hpp>
#include <goro/base/result.hpp>

namespace goro::http {

// The connection, handed to the handler (Go's Hijack): the stream, with no deadline set,
// and the bytes the server had already read past the request. From then on the server
// writes nothing on it. It closes when the handler returns, unless `owner` is kept.
struct TakenConnection {
  net::Stream* stream = nullptr;
  std::string early{};
  // Keeps the connection open past the handler's return: while a copy lives, the stream
  // stays open (it points at `stream`); the last copy to go closes it. The server still
  // counts the connection (max_connections, /metrics) and closes it at a shutdown's
  // deadline, like a connection whose handler still runs. Empty where the connection
  // must end with the handler (a connection served by Server::serve_conn, whose caller
  // waits for its end).
  std::shared_ptr<net::Stream> owner{};
};

// A writer that can hand its connection over (HTTP/1.1: a WebSocket, a tunnel). Fails
// when the response has begun, the request body is not read to its end, or the
// connection was taken already.
class ConnectionTaker {
 public:
  virtual Result<TakenConnection> take_over() = 0;

 protected:
  ~ConnectionTaker() = default;
};

// A writer whose connection deadlines a handler may move: for this request's body reads
// and response writes (a long download, an upload); a deadline in the past makes a read
// or write waiting now return a timeout error.
class DeadlineSetter {
 public:
  virtual std::error_code set_read_deadline(net::Deadline d) = 0;
  virtual std::error_code set_write_deadline(net::Deadline d) = 0;

 protected:
  ~DeadlineSetter() = default;
};

// A writer that can send informational (1xx) responses before the final one, such as
// 103 Early Hints with Link fields. Not after the head of the final response.
class InformationalWriter {
 public:
  virtual std::error_code write_informational(int status, const Headers& fields) = 0;

 protected:
  ~InformationalWriter() = default;
};

// A writer that can send trailer fields after the body: on HTTP/1.1 a chunked body's
// trailer section, on HTTP/2 a closing HEADERS frame. Fields set here before the
// response ends are sent; a response that is not chunked on HTTP/1.1 (its length was
// known) has no trailer section, and its trailers are dropped.
class TrailerWriter {
 public:
  virtual Headers& trailer() = 0;

 protected:
  ~TrailerWriter() = default;
};

// A writer whose response, not yet begun, can be dropped: the status, the buffered body
// and the headers that describe that body (Content-*, ETag, Last-Modified) are forgotten,
// the other headers kept, so that error-handling middleware can answer instead (recover).
// false once the head has gone out.
class ResponseDiscarder {
 public:
  virtual bool discard_response() = 0;

 protected:
  ~ResponseDiscarder() = default;
};

// A writer that can complete its response before the handler returns: what is buffered
// goes out with its length and the body ends, so the client has its whole answer now;
// later writes fail with errc::response_finished. For middleware that answers in the
// handler's place while the handler still runs (timeout).
class ResponseFinisher {
 public:
  virtual std::error_code finish_response() = 0;

 protected:
  ~ResponseFinisher() = default;
};

// A writer that can send bytes of an open file as body straight from the file to the
// connection (sendfile(2): no copy through user space), as Go's response implements
// io.ReaderFrom. The server's writer can on plain-TCP HTTP/1.1 connections; on TLS and
// HTTP/2 it refuses, and the caller copies. Unlike the other powers it is not looked
// for through unwrap(): the bytes would pass under a wrapper that does not know of it
// (one that compresses or counts the body), so a wrapper that forwards the body
// unchanged and wants the zero-copy path implements FileSender itself, forwarding to
// ResponseController(inner).send_file.
class FileSender {
 public:
  // Sends count bytes of the regular file fd, from offset, as the next bytes of the
  // body; the head first when it has not gone, and it must then declare a
  // Content-Length (a streamed body cannot carry file bytes). errc::not_supported,
  // with nothing sent, when this writer cannot; then the caller writes the bytes
  // itself. Parks (never blocks the thread) while the client reads slowly, up to the
  // write deadline. A file that turns out shorter fails with errc::unexpected_eof,
  // after which the connection closes. Does not move fd's file offset.
  virtual std::error_code send_file(int fd, std::uint64_t offset, std::uint64_t count) = 0;

 protected:
  ~FileSender() = default;
};

// Finds the powers of a writer chain: the first writer, from w down through unwrap(), that
// has the one asked for. Every call fails with errc::not_supported (or returns nullptr)
// when none has it.
class ResponseController {
 public:
  explicit ResponseController(ResponseWriter& w) noexcept : w_(&w) {}

  std::error_code flush() { return w_->flush(); }
  Result<TakenConnection> take_over();
  std::error_code set_read_deadline(net::Deadline d);
  std::error_code set_write_deadline(net::Deadline d);
  std::error_code write_informational(int status, const Headers& fields);
  // The trailer fields to send after the body; nullptr when no writer can send them.
  Headers* trailer();
  // See ResponseDiscarder; false when no writer can.
  bool discard_response();
  // See ResponseFinisher; flushes instead when no writer can.
  std::error_code finish_response();
  // See FileSender: w itself, not the writers it wraps; errc::not_supported when w
  // cannot.
  std::error_code send_file(int fd, std::uint64_t offset, std::uint64_t count);

  // The first writer of the chain that implements Power, or nullptr.
  template <class Power>
  Power* find() const {
    for (ResponseWriter* w = w_; w != nullptr; w = w->unwrap()) {
      if (auto* p = dynamic_cast<Power*>(w)) return p;
    }
    return nullptr;
  }

 private:
  ResponseWriter* w_;
};

}  // namespace goro::http
