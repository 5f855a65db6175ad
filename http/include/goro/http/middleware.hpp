// Middleware: functions that wrap a Handler in another Handler.
//
//   Handler app = chain(router, {recover(), access_log(), timeout(std::chrono::seconds(5))});
//
// chain() applies the list outside-in: the first middleware sees the request first.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <string_view>

#include <goro/http/server.hpp>

namespace goro::http {

using Middleware = std::function<Handler(Handler)>;

// Wraps handler in middlewares, the first outermost.
Handler chain(Handler handler, std::initializer_list<Middleware> middlewares);

// Where middleware writes its lines; empty: stderr (written in goro::blocking).
using LogSink = std::function<void(std::string_view line)>;

// Logs one line per request after it is answered:
//   127.0.0.1:51234 "GET /users/7 HTTP/1.1" 200 42 0.153ms
// (remote address, request line, status, body bytes, time in the handler).
Middleware access_log(LogSink sink = {});

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
