// The replies goro writes by itself, and the one hook that shapes them all.
//
//   options.shape_reply = [](goro::http::FrameworkReply& r) {
//     r.content_type = "application/problem+json";
//     r.body = nlohmann::json{{"status", r.status}, {"detail", r.message},
//                             {"request_id", r.request_id}}.dump();
//   };
//
// goro answers on its own in these places, each through ServerOptions::shape_reply:
//  - the server, without the handler: a malformed or oversized request, a slow one
//    (400, 408, 413, 414, 417, 431, 501, 505; see ErrorReply), and a handler that threw
//    before its response started (500);
//  - the router: no route (404) and a route without the method (405, with Allow);
//  - decode_or_400 and read_json's callers (400, 413, 415), recover() (500),
//    timeout() (503), file_server (400, 403, 404, 405, 416), websocket::accept
//    (400, 426...), the metrics and debug handlers.
// Handlers and middleware may use the same path (send_error) so that every error a
// client sees has one shape.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/headers.hpp>

namespace goro::http {

class Request;
class ResponseWriter;

struct FrameworkReply {
  // What is sent. goro fills in its default; the hook may change each. A status outside
  // 400-599 set by the hook is ignored (goro's stays).
  int status = 0;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body{};
  // Fields added to the reply: goro's own (Allow on a 405, X-Request-Id) and the hook's.
  // Framing fields (Content-Length, Transfer-Encoding, Connection) are not taken.
  Headers headers{};

  // What happened, for the hook to read.
  std::string_view message{};     // names the problem: "method not allowed", "malformed
                                  // JSON at byte 12: ..."
  std::string_view request_id{};  // the request's id; "" when it has none
  std::string_view method{};      // "" when the request's head was not read that far
  std::string_view target{};
  // Who answered: "server" (its own replies, and the 500 for a handler that threw),
  // "router", "json", "recover", "timeout", "file_server", "websocket", "metrics",
  // "debug"; "handler" for send_error's short form, or what its caller names.
  std::string_view origin{};
};

// Set as ServerOptions::shape_reply. It runs on the request's goroutine (for the
// server's own replies, on the connection's), must not block, and an exception from it
// is reported on ServerOptions::error_log and the default reply sent.
using ReplyShaper = std::function<void(FrameworkReply&)>;

// Answers req with an error the way goro's own code does: reply (its status, message,
// origin, default body and fields) shaped by the server's shape_reply, with the
// request's id, then sent. Discards nothing already written: call it before the
// response starts. Returns the write's error.
std::error_code send_error(Request& req, ResponseWriter& w, FrameworkReply reply);
// The same with the default text body "404 Not Found: <message>\n" (message may be
// empty: "404 Not Found\n") and origin "handler".
std::error_code send_error(Request& req, ResponseWriter& w, int status, std::string_view message);

}  // namespace goro::http
