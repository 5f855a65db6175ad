// Private access to Request and ResponseWriter for the server, the router and tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/request.hpp>
#include <goro/http/response.hpp>

namespace goro::http::detail {

class MessageParser;

struct RequestAccess {
  // Points req at the head parser holds. Returns false when the path holds an invalid
  // %-escape (the server then answers 400).
  static bool prepare(Request& req, const MessageParser& parser, std::string_view remote_addr,
                      BodySource* source);
  // The same from parts, for tests and the client-free unit tests of the router.
  static bool prepare(Request& req, std::string_view method, std::string_view target,
                      std::span<const HeaderField> headers, BodySource* source);
  static void set_pattern(Request& req, std::string_view pattern) { req.pattern_ = pattern; }
  // After prepare from parts: what the parts do not say (an HTTP/2 stream's request).
  static void set_origin(Request& req, std::string_view remote_addr, int version_major,
                         int version_minor, std::int64_t content_length) {
    req.remote_addr_ = remote_addr;
    req.version_major_ = version_major;
    req.version_minor_ = version_minor;
    req.content_length_ = content_length;
  }
  // Where req's body comes from (nullptr for a request no server made).
  static BodySource* source(const Request& req) { return req.source_; }
  // Replaces where req's body comes from; returns the previous source.
  static BodySource* swap_source(Request& req, BodySource* source) {
    BodySource* old = req.source_;
    req.source_ = source;
    return old;
  }
};

struct ResponseAccess {
  // Readies w for a new response on sink. keep_alive: what the request allows.
  static void begin(ResponseWriter& w, ResponseSink* sink, int request_minor, bool head_request,
                    bool keep_alive, std::size_t buffer_limit);
  // Completes the response: sends what is buffered (with Content-Length) or ends the
  // stream. Idempotent.
  static std::error_code finish(ResponseWriter& w);
  // Whether the connection may carry another request after this response.
  static bool keep_alive(const ResponseWriter& w) { return w.keep_alive_; }
  static void set_keep_alive(ResponseWriter& w, bool on) { w.keep_alive_ = on; }
  // The server answered on its own (413, 500): later writes fail with response_finished.
  static void mark_finished(ResponseWriter& w) { w.finished_ = true; }
  // The response cannot be completed (the handler failed mid-stream): nothing more is
  // sent, not even the end of a chunked body, and the connection is to be closed.
  static void abandon(ResponseWriter& w) {
    w.finished_ = true;
    w.keep_alive_ = false;
  }
  // Forgets the body buffered so far, the status and the headers that describe that body
  // (Content-*, ETag, Last-Modified), to answer 500 instead; the other headers stay (a
  // request id, CORS or cache headers a middleware set before the handler failed).
  static void discard(ResponseWriter& w);
  // Makes w keep the whole response in memory: flush() does nothing, and each write or
  // flush first calls its sink's write_out(nullptr, 0), failing with that call's error.
  static void hold(ResponseWriter& w);
  // Copies the status, headers and body held by `from` (see hold) into `to`.
  static std::error_code replay(ResponseWriter& from, ResponseWriter& to);
};

// Appends "Date: <IMF-fixdate>\r\n" for now; the text is formatted once per second.
void append_date_header(std::string& out);
inline constexpr std::size_t kHttpDateSize = 29;
// The current time as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") into
// out[kHttpDateSize].
void http_date_now(char* out);
// Formats t (seconds since the epoch) as an IMF-fixdate into out[kHttpDateSize], then a
// NUL (kHttpDateSize + 1 bytes in all).
void format_http_date(long long t, char* out);
// Parses an HTTP date (IMF-fixdate, RFC 850 or asctime form); -1 when invalid.
long long parse_http_date(std::string_view s);

// Decodes %XX escapes of in into out ('+' into a space when plus_is_space). Returns
// false for a malformed escape.
bool percent_decode(std::string_view in, std::string& out, bool plus_is_space);

// Serialises a complete error response (status, short text, Connection: close); for a
// HEAD request, the head alone (its Content-Length still that of the text).
void build_error_response(std::string& out, int status, std::string_view message,
                          bool head = false, const Headers* extra = nullptr);

}  // namespace goro::http::detail
