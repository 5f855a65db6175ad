// Errors of goro::http: std::error_code values in the "goro.http" category.
// Network failures underneath keep their own codes (goro::net::errc, std::errc).
#pragma once

#include <system_error>
#include <type_traits>

namespace goro::http {

enum class errc {
  // The request body (server) or response body (client) passed its size limit.
  body_too_large = 1,
  // The body's framing was invalid (a bad chunk size, a missing CRLF).
  malformed_body,
  // The peer closed the connection before the message ended.
  unexpected_eof,
  // The response was already completed (e.g. the server answered 413 on its own); the
  // write was dropped.
  response_finished,
  // A handler wrote more bytes than the Content-Length it declared.
  content_length_exceeded,
  // Client: the response could not be parsed.
  malformed_response,
  // Client: the URL is not http:// or https:// with a host.
  bad_url,
  // Client: more redirects than ClientOptions::max_redirects.
  too_many_redirects,
  // Server::serve after shutdown began (Go's ErrServerClosed).
  server_closed,
  // Server::shutdown: the deadline passed before every connection finished.
  shutdown_timeout,
  // Client: the response head (or its trailers) passed ClientOptions::max_header_bytes.
  header_too_large,
  // Client: the request's method, a header name or a header value holds characters
  // HTTP does not allow there (a CR or LF would split the request).
  invalid_request,
  // Server: http::timeout's limit passed and the client was answered 503; what the
  // handler writes afterwards is dropped.
  handler_timeout,
  // ResponseController: no writer of the chain has the power asked for (HTTP/2 cannot
  // hand its connection over), Go's ErrNotSupported.
  not_supported,
  // ResponseController::take_over: the response has begun, the request body was not
  // read to its end, or the connection was taken already.
  cannot_take_over,
  // ResponseController::write_informational: not a 1xx status (or 101, which only an
  // upgrade sends).
  invalid_status,
  // Client: open_stream on an origin that does not speak HTTP/2.
  http2_required,
  // Client, HTTP/2: the server reset the stream (RST_STREAM; ClientStream::reset_code() says
  // why) or refused it.
  stream_reset,
  // Client, HTTP/2: the connection ended (the server closed it, a protocol error, no
  // answer to a PING, the socket failed) before the stream did. (A stream past a
  // GOAWAY's last stream id fails with stream_reset, REFUSED_STREAM, instead.)
  connection_lost,
  // Client: a write after the request body ended.
  request_finished,
};

const std::error_category& http_category() noexcept;
std::error_code make_error_code(errc e) noexcept;

}  // namespace goro::http

template <>
struct std::is_error_code_enum<goro::http::errc> : std::true_type {};
