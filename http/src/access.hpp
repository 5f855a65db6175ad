// What the server's parts share below the public headers: how an engine fills a Request,
// HTTP dates, percent-decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/request.hpp>
#include <goro/http/response.hpp>

namespace goro::http::detail {

class MessageParser;

struct RequestAccess {
  // Points req at the head parser holds, its body at body and its context and client
  // check at host. Returns false when the path holds an invalid %-escape (the server then
  // answers 400).
  static bool prepare(Request& req, const MessageParser& parser, std::string_view remote_addr,
                      BodyReader* body, RequestHost* host);
  // The same from parts (an HTTP/2 stream's head; tests and fuzz targets without a
  // connection).
  static bool prepare(Request& req, std::string_view method, std::string_view target,
                      std::span<const HeaderField> headers, BodyReader* body,
                      RequestHost* host = nullptr);
  // After prepare from parts: what the parts do not say (an HTTP/2 stream's request).
  static void set_origin(Request& req, std::string_view remote_addr, int version_major,
                         int version_minor, std::int64_t content_length) {
    req.remote_addr_ = remote_addr;
    req.version_major_ = version_major;
    req.version_minor_ = version_minor;
    req.content_length_ = content_length;
  }
  // Replaces the fields and declared length handlers further down see (decompress_requests
  // hides the coding it decodes); headers must outlive their use. Put back the old
  // ones before they go.
  static void set_headers(Request& req, std::span<const HeaderField> headers,
                          std::int64_t content_length) {
    req.headers_ = headers;
    req.content_length_ = content_length;
  }
  // The exchange req came from; nullptr for one made from parts without it.
  static RequestHost* host(Request& req) { return req.host_; }
  // Whether req's context exists yet (context() makes it on first use, which arms the
  // connection's hang-up wake-up): what only a context can hold is absent without one.
  static bool context_made(const Request& req) { return req.ctx_ready_; }
};

// send_error for goro's own handlers: status with body (their text since before
// shape_reply existed), the problem named by message, origin "router", "file_server"...
std::error_code send_builtin_error(Request& req, ResponseWriter& w, int status, std::string body,
                                   std::string_view message, std::string_view origin);

// The default body of a reply goro makes by itself: "404 Not Found: <message>\n".
std::string default_error_body(int status, std::string_view message);
// Adds field to the response's Vary unless a Vary value lists it (or "*") already, so
// that middleware and handlers that each vary on it do not repeat it.
void add_vary(Headers& h, std::string_view field);
// Content-Length, Transfer-Encoding, Connection: the fields a reply's framing owns.
bool framing_field_name(std::string_view name);

// Request ids (ServerOptions::request_ids, request_id()): the client's X-Request-Id when
// it is 1 to 128 characters of [A-Za-z0-9._-], else 16 random hex digits.
bool acceptable_request_id(std::string_view id);
std::string new_request_id();
std::string request_id_for(std::string_view sent);

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

// Calls f(pair, raw_key, raw_value) for each non-empty '&'-separated pair of an
// urlencoded text (a query, a form body), still escaped; raw_value is empty when the
// pair has no '='. Stops early when f returns false.
template <class F>
void for_each_urlencoded_pair(std::string_view text, F&& f) {
  while (!text.empty()) {
    const std::size_t amp = text.find('&');
    const std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view{} : text.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    if (!f(pair, pair.substr(0, eq), raw_value)) return;
  }
}

}  // namespace goro::http::detail
