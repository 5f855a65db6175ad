// Middleware: functions that wrap a Handler in another Handler.
//
//   Handler app = chain(router, {recover(), access_log(), timeout(std::chrono::seconds(5))});
//
// chain() applies the list outside-in: the first middleware sees the request first.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include <goro/http/server.hpp>

namespace goro::http {

using Middleware = std::function<Handler(Handler)>;

// Wraps handler in middlewares, the first outermost.
Handler chain(Handler handler, std::initializer_list<Middleware> middlewares);

// Where middleware writes its lines: one call per line, the line whole and without its
// newline, from many goroutines at once. Empty: stderr, each line with its newline in one
// write(2) (in goro::blocking), so lines from many threads never run together.
using LogSink = std::function<void(std::string_view line)>;

// A sink appending to the file at path (created 0644 if missing; opened O_APPEND), each
// line with its newline in one write(2) as on stderr; the file closes with the last copy
// of the sink. Errors: the open's (errno).
Result<LogSink> open_log_file(const std::string& path);

// How access_log writes its line.
enum class AccessLogFormat {
  // 127.0.0.1:51234 "GET /users/7 HTTP/1.1" 200 42 0.153ms 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7
  // (remote address, request line, status, body bytes, time in the handler, trace id
  // and span id or "-")
  common,
  // time=2026-11-25T19:45:01.123Z method=GET path=/users/7 status=200 bytes=42
  //   duration_ms=0.153 remote=127.0.0.1:51234 request_id=4f1c2a9e0b7d3c55
  //   trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7
  // (one line; a value with a space, a quote or '=' is quoted; "-" when absent)
  logfmt,
  // {"time":"2026-11-25T19:45:01.123Z","method":"GET","path":"/users/7","status":200,
  //  "bytes":42,"duration_ms":0.153,"remote":"127.0.0.1:51234","request_id":"...",
  //  "trace_id":"...","span_id":"..."}   (null when absent)
  json,
};

struct AccessLogOptions {
  AccessLogFormat format = AccessLogFormat::logfmt;
  LogSink sink{};  // empty: stderr
};

// Logs one line per request after it is answered, in the chosen format. The request id
// is the X-Request-Id of the response (set by request_id()), else of the request. The
// trace and span ids are those of trace() (goro/http/trace.hpp), which must come
// before access_log in the chain for the log to see them. Access
// logging is off unless this middleware is in the chain (goro::App: --access-log).
Middleware access_log(AccessLogOptions options);
// The common format to sink.
Middleware access_log(LogSink sink = {});

// The same lines for the replies the server makes on its own (400, 408, 413, ...: see
// ErrorReply), which no middleware sees: set it as ServerOptions::on_error_reply. The
// path is "-" when the request's head could not be read; duration_ms is absent; the
// trace id is the request's traceparent's, if valid, and the span id absent.
ErrorReplyHook log_error_replies(AccessLogOptions options);

// Gives every request an id: the client's X-Request-Id when it is 1 to 128 characters
// of [A-Za-z0-9._-], else 16 random hex digits. It is set on the response, and on the
// request's context under request_id_key, for handlers and their backend calls. Where
// the server gives ids itself (ServerOptions::request_ids, which also puts them on the
// server's own replies) this passes the request through.
Middleware request_id();
extern const goro::ContextKey<std::string> request_id_key;
// The request's id (request_id() in the chain), or "" when none.
std::string_view request_id_of(Request& req);

// Catches any exception from the handler (std::exception or not): logs it and answers
// 500 if nothing was sent, keeping the headers already set except those that described
// the abandoned body (Content-*, ETag, Last-Modified); if the response had started,
// rethrows so the server closes the connection.
Middleware recover(LogSink sink = {});

// Bounds the time a handler may take to answer. The handler runs in its own goroutine
// under a request context with `limit` as its deadline, and its response is held in
// memory (flush() does nothing); if it finishes within `limit` the response is sent as
// it made it. Otherwise the client gets 503 with Connection: close at once, the
// handler's context is cancelled (deadline_exceeded: its sleeps, backend calls and
// reads under it return), a body read waiting at that moment fails with a timeout, as
// do later ones, and its writes fail with errc::handler_timeout.
// The connection goroutine waits for the handler to return before it closes the
// connection, since the request's data lives in the connection's buffers.
Middleware timeout(std::chrono::nanoseconds limit,
                   std::string_view message = "503 handler timeout\n");

}  // namespace goro::http
