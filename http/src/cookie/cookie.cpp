// Cookies: the Cookie header read, Set-Cookie written (RFC 6265 4.1 and 5.4, with the
// leniency Go's net/http has for what browsers send).
#include <goro/http/cookie.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace goro::http {
namespace {

bool token_char(char c) {
  return c > 32 && c < 127 && std::strchr("()<>@,;:\\\"/[]?={}", c) == nullptr;
}

bool valid_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), token_char);
}

// RFC 6265's cookie-octet, plus space and comma, which browsers send and Go accepts
// (a value holding them is written quoted).
bool value_byte(char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != ';' && c != '\\'; }

bool path_byte(char c) { return c >= 0x20 && c < 0x7f && c != ';'; }

bool is_ipv4(const std::string& s) {
  in_addr addr{};
  return inet_pton(AF_INET, s.c_str(), &addr) == 1;
}

// A host name usable as a Domain attribute: dot-separated labels of letters, digits,
// '-' and '_' (not at a label's ends for '-'), at most 255 bytes, an optional leading
// dot; or an IPv4 address.
bool valid_domain(std::string_view domain) {
  if (domain.empty() || domain.size() > 255) return false;
  if (is_ipv4(std::string(domain))) return true;
  if (domain.front() == '.') domain.remove_prefix(1);
  if (domain.empty() || domain.back() == '.') return false;
  bool has_letter = false;
  std::size_t label = 0;
  char last = '.';
  for (char c : domain) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      has_letter = true;
      ++label;
    } else if (c >= '0' && c <= '9') {
      ++label;
    } else if (c == '-') {
      if (last == '.') return false;
      ++label;
    } else if (c == '.') {
      if (last == '.' || last == '-') return false;
      label = 0;
    } else {
      return false;
    }
    if (label > 63) return false;
    last = c;
  }
  return has_letter && last != '-';
}

bool valid_expiry(std::chrono::sys_seconds t) {
  // 1601-01-01T00:00:00Z, the earliest date RFC 6265's date parsing keeps.
  constexpr std::int64_t kYear1601 = -11644473600;
  return t.time_since_epoch().count() >= kYear1601;
}

void append_http_date(std::string& out, std::chrono::sys_seconds t) {
  static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t secs = static_cast<std::time_t>(t.time_since_epoch().count());
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  out.append(buf);
}

}  // namespace

std::string format_set_cookie(const Cookie& c) {
  if (!valid_name(c.name)) return {};
  std::string out = c.name;
  out.push_back('=');
  std::string value;
  for (char ch : c.value) {
    if (value_byte(ch)) value.push_back(ch);
  }
  bool quote = c.quoted || value.find_first_of(" ,") != std::string::npos;
  if (quote) out.push_back('"');
  out.append(value);
  if (quote) out.push_back('"');
  if (!c.path.empty()) {
    out.append("; Path=");
    for (char ch : c.path) {
      if (path_byte(ch)) out.push_back(ch);
    }
  }
  if (!c.domain.empty() && valid_domain(c.domain)) {
    out.append("; Domain=");
    out.append(c.domain.front() == '.' ? c.domain.substr(1) : c.domain);
  }
  if (c.expires && valid_expiry(*c.expires)) {
    out.append("; Expires=");
    append_http_date(out, *c.expires);
  }
  if (c.max_age > 0) {
    out.append("; Max-Age=");
    out.append(std::to_string(c.max_age));
  } else if (c.max_age < 0) {
    out.append("; Max-Age=0");
  }
  if (c.http_only) out.append("; HttpOnly");
  if (c.secure) out.append("; Secure");
  switch (c.same_site) {
    case SameSite::default_mode:
      break;
    case SameSite::lax:
      out.append("; SameSite=Lax");
      break;
    case SameSite::strict:
      out.append("; SameSite=Strict");
      break;
    case SameSite::none:
      out.append("; SameSite=None");
      break;
  }
  if (c.partitioned) out.append("; Partitioned");
  return out;
}

std::string validate_cookie(const Cookie& c) {
  if (!valid_name(c.name)) return "invalid cookie name \"" + c.name + "\"";
  for (char ch : c.value) {
    if (!value_byte(ch)) return "invalid byte in the value of cookie \"" + c.name + "\"";
  }
  for (char ch : c.path) {
    if (!path_byte(ch)) return "invalid byte in the path of cookie \"" + c.name + "\"";
  }
  if (!c.domain.empty() && !valid_domain(c.domain))
    return "invalid domain \"" + c.domain + "\" of cookie \"" + c.name + "\"";
  if (c.expires && !valid_expiry(*c.expires))
    return "cookie \"" + c.name + "\" expires before the year 1601";
  if (c.partitioned && !c.secure)
    return "partitioned cookie \"" + c.name + "\" must be set with Secure";
  return {};
}

bool set_cookie(ResponseWriter& w, const Cookie& c) {
  std::string value = format_set_cookie(c);
  if (value.empty()) return false;
  w.header().add("Set-Cookie", value);
  return true;
}

std::vector<Cookie> parse_cookie_header(std::string_view value) {
  std::vector<Cookie> out;
  while (!value.empty()) {
    std::size_t semi = value.find(';');
    std::string_view pair = value.substr(0, semi);
    value = semi == std::string_view::npos ? std::string_view{} : value.substr(semi + 1);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
    while (!pair.empty() && (pair.back() == ' ' || pair.back() == '\t')) pair.remove_suffix(1);
    if (pair.empty()) continue;
    std::size_t eq = pair.find('=');
    std::string_view name = pair.substr(0, eq);
    std::string_view raw = eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    if (!valid_name(name)) continue;
    bool quoted = false;
    if (raw.size() > 1 && raw.front() == '"' && raw.back() == '"') {
      raw = raw.substr(1, raw.size() - 2);
      quoted = true;
    }
    if (!std::all_of(raw.begin(), raw.end(), value_byte)) continue;
    Cookie c;
    c.name = name;
    c.value = raw;
    c.quoted = quoted;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Cookie> cookies(const Request& req) {
  std::vector<Cookie> out;
  for (const HeaderField& field : req.headers()) {
    if (!iequals(field.name, "cookie")) continue;
    std::vector<Cookie> line = parse_cookie_header(field.value);
    for (Cookie& c : line) out.push_back(std::move(c));
  }
  return out;
}

std::optional<Cookie> cookie(const Request& req, std::string_view name) {
  for (const HeaderField& field : req.headers()) {
    if (!iequals(field.name, "cookie")) continue;
    for (Cookie& c : parse_cookie_header(field.value)) {
      if (c.name == name) return std::move(c);
    }
  }
  return std::nullopt;
}

}  // namespace goro::http
