// parse_url and the URL arithmetic of redirects (url.hpp).
#include "client/url.hpp"

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include <goro/http/errors.hpp>
#include <goro/http/headers.hpp>
#include <goro/net/addr.hpp>

namespace goro::http {

Result<Url> parse_url(std::string_view url) {
  Url u;
  std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) return errc::bad_url;
  std::string_view scheme = url.substr(0, colon);
  if (iequals(scheme, "http")) {
    u.scheme = "http";
    u.port = 80;
  } else if (iequals(scheme, "https")) {
    u.scheme = "https";
    u.port = 443;
  } else {
    return errc::bad_url;
  }
  std::string_view rest = url.substr(colon + 3);
  std::size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view target =
      path_start == std::string_view::npos ? std::string_view{} : rest.substr(path_start);
  if (std::size_t hash = target.find('#'); hash != std::string_view::npos)
    target = target.substr(0, hash);
  if (authority.find('@') != std::string_view::npos || authority.empty()) return errc::bad_url;
  std::string_view host = authority, port;
  if (authority.front() == '[') {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return errc::bad_url;
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return errc::bad_url;
      port = after.substr(1);
    }
  } else if (std::size_t c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
  }
  if (host.empty()) return errc::bad_url;
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return errc::bad_url;
    }
    u.port = static_cast<std::uint16_t>(value);
  }
  u.host = std::string(host);
  // Control characters would split the request line (Go refuses them too); a space and
  // bytes a URI cannot hold are %-escaped, existing escapes are kept.
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : target) {
    if (c < 0x20 || c == 0x7f) return errc::bad_url;
    if (c > 0x7e ||
        std::string_view(" \"<>\\^`{|}").find(static_cast<char>(c)) != std::string_view::npos) {
      u.target.push_back('%');
      u.target.push_back(kHex[c >> 4]);
      u.target.push_back(kHex[c & 15]);
    } else {
      u.target.push_back(static_cast<char>(c));
    }
  }
  // The host goes into the Host header: only what RFC 3986 allows there (a reg-name,
  // an IP literal in brackets), as Go's client checks. A name in Unicode is given in
  // its ASCII form ("xn--..."); a ':' outside brackets is not a host.
  const bool literal = authority.front() == '[';
  for (unsigned char c : host) {
    const bool allowed =
        (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        std::string_view("-._~!$&'()*+,;=%").find(static_cast<char>(c)) != std::string_view::npos ||
        (c == ':' && literal);
    if (!allowed) return errc::bad_url;
  }
  if (u.target.empty() || u.target.front() == '?') u.target.insert(u.target.begin(), '/');
  return u;
}

namespace detail {
namespace {

// RFC 3986 5.2.4.
std::string remove_dot_segments(std::string_view in) {
  std::string out;
  while (!in.empty()) {
    if (in.starts_with("../")) {
      in.remove_prefix(3);
    } else if (in.starts_with("./")) {
      in.remove_prefix(2);
    } else if (in.starts_with("/./")) {
      in.remove_prefix(2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.starts_with("/../") || in == "/..") {
      in = in.size() == 3 ? std::string_view("/") : in.substr(3);
      std::size_t slash = out.rfind('/');
      out.erase(slash == std::string::npos ? 0 : slash);
    } else if (in == "." || in == "..") {
      in = {};
    } else {
      std::size_t next = in.find('/', in.front() == '/' ? 1 : 0);
      out.append(in.substr(0, next));
      in = next == std::string_view::npos ? std::string_view{} : in.substr(next);
    }
  }
  return out;
}

// Whether ref starts with a scheme ("http:", "mailto:"): ALPHA *( ALPHA / DIGIT / "+" /
// "-" / "." ) ":" before any '/', '?' or '#'.
bool has_scheme(std::string_view ref) {
  std::size_t colon = ref.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  if (ref.substr(0, colon).find_first_of("/?#") != std::string_view::npos) return false;
  for (std::size_t i = 0; i < colon; ++i) {
    unsigned char c = static_cast<unsigned char>(ref[i]);
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!(alpha || (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))))
      return false;
  }
  return true;
}

}  // namespace

std::string resolve_reference(const Url& base, std::string_view ref) {
  if (std::size_t hash = ref.find('#'); hash != std::string_view::npos) ref = ref.substr(0, hash);
  if (has_scheme(ref)) return std::string(ref);
  if (ref.starts_with("//")) return base.scheme + ":" + std::string(ref);
  std::string origin = base.scheme + "://" + net::join_host_port(base.host, base.port);
  const std::size_t base_query = base.target.find('?');
  const std::string base_path = base.target.substr(0, base_query);
  if (ref.empty()) return origin + base.target;
  if (ref.front() == '?') return origin + base_path + std::string(ref);
  std::size_t q = ref.find('?');
  std::string_view path = ref.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view{} : ref.substr(q);
  std::string merged;
  if (path.front() == '/') {
    merged = remove_dot_segments(path);
  } else {
    merged = remove_dot_segments(base_path.substr(0, base_path.rfind('/') + 1) + std::string(path));
  }
  if (merged.empty() || merged.front() != '/') merged.insert(merged.begin(), '/');
  return origin + merged + std::string(query);
}

bool same_or_subdomain(std::string_view to, std::string_view from) {
  if (iequals(to, from)) return true;
  return to.size() > from.size() && to[to.size() - from.size() - 1] == '.' &&
         iequals(to.substr(to.size() - from.size()), from);
}

}  // namespace detail
}  // namespace goro::http
