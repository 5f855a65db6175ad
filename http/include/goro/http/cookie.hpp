// HTTP cookies (RFC 6265), as Go's net/http has them: the Cookie request header read
// into Cookie values, and Set-Cookie written from one.
//
//   http::set_cookie(w, {.name = "session", .value = id, .path = "/", .max_age = 3600,
//                        .secure = true, .http_only = true, .same_site = http::SameSite::lax});
//   if (auto c = http::cookie(req, "session")) use(c->value);
//
// Ordinary code over Request::header and ResponseWriter::header: nothing in the server
// knows about cookies.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/request.hpp>
#include <goro/http/response.hpp>

namespace goro::http {

// The SameSite attribute. default_mode writes none, leaving the browser's default (Lax
// in current browsers).
enum class SameSite { default_mode, lax, strict, none };

// A cookie to set, or one a request sent (then only name, value and quoted are filled).
struct Cookie {
  std::string name{};
  std::string value{};
  // Whether the value is (or was sent) in double quotes. A value holding a space or a
  // comma is written quoted anyway, as Go does.
  bool quoted = false;

  std::string path{};    // "" : no Path attribute
  std::string domain{};  // "" : no Domain attribute (a host-only cookie)
  // Expires, in whole seconds (std::chrono::floor<std::chrono::seconds>(t) of a
  // system_clock time); before the year 1601 (or absent) it is not written.
  std::optional<std::chrono::sys_seconds> expires{};
  // Max-Age: 0 writes none; > 0 that many seconds; < 0 "Max-Age=0", which deletes the
  // cookie at once.
  int max_age = 0;
  bool secure = false;
  bool http_only = false;
  SameSite same_site = SameSite::default_mode;
  // CHIPS: a cookie kept per top-level site. Browsers require Secure with it.
  bool partitioned = false;
};

// The Set-Cookie value for c (Go's Cookie.String): "" when the name is not a valid
// token, so nothing is set. Invalid value bytes (outside 0x20-0x7e, '"', ';', '\\') are
// dropped, as are invalid Path bytes (';' and controls); an invalid Domain is left out.
std::string format_set_cookie(const Cookie& c);

// What is wrong with c, or "" when it is valid (Go's Cookie.Valid): the name, a value or
// path byte, the domain, an expiry before 1601, Partitioned without Secure.
std::string validate_cookie(const Cookie& c);

// Adds a Set-Cookie field for c to w's headers (Go's http.SetCookie). False when c's
// name is invalid and nothing was added; validate_cookie says what else was dropped.
bool set_cookie(ResponseWriter& w, const Cookie& c);

// The cookies of one Cookie header value ("a=1; b=\"x\""), in order. Pairs with an
// invalid name or value are dropped, as Go drops them.
std::vector<Cookie> parse_cookie_header(std::string_view value);

// Every cookie the request sent, across its Cookie fields (Go's Request.Cookies).
std::vector<Cookie> cookies(const Request& req);
// The first cookie named name (Go's Request.Cookie), or nullopt.
std::optional<Cookie> cookie(const Request& req, std::string_view name);

}  // namespace goro::http
