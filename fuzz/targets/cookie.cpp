// cookie: parse_cookie_header (http/cookie.hpp) on any bytes, each cookie kept valid by
// RFC 6265's rules, and written by format_set_cookie then read back as itself. The
// input is also tried as a cookie's name, value, path and domain for format_set_cookie,
// whose output must hold no byte that could end the field or add an attribute.
#include <algorithm>
#include <string>
#include <string_view>

#include <goro/http/cookie.hpp>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

bool field_safe(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

std::string cookie(std::string_view input) {
  for (const http::Cookie& c : http::parse_cookie_header(input)) {
    if (!http::validate_cookie(c).empty()) return "a parsed cookie is not valid: " + c.name;
    http::Cookie plain{.name = c.name, .value = c.value, .quoted = c.quoted};
    std::string line = http::format_set_cookie(plain);
    std::vector<http::Cookie> back = http::parse_cookie_header(line);
    if (back.size() != 1 || back[0].name != c.name || back[0].value != c.value)
      return "a parsed cookie written back does not read as itself";
  }
  const std::size_t third = input.size() / 3;
  http::Cookie made{.name = std::string(input.substr(0, third)),
                    .value = std::string(input.substr(third, third)),
                    .path = std::string(input.substr(2 * third)),
                    .domain = std::string(input.substr(third))};
  std::string line = http::format_set_cookie(made);
  if (!field_safe(line)) return "Set-Cookie holds a control or non-ASCII byte";
  if (!line.empty()) {
    // The value ends at the first ';': what follows is attributes goro wrote.
    std::size_t semi = line.find(';');
    std::string_view pair = std::string_view(line).substr(0, semi);
    if (pair.substr(0, pair.find('=')) != made.name) return "Set-Cookie's name is not the cookie's";
    for (std::size_t at = semi; at != std::string::npos; at = line.find(';', at + 1)) {
      std::string_view attr = std::string_view(line).substr(at + 2);
      if (!(attr.starts_with("Path=") || attr.starts_with("Domain="))) {
        return "an attribute goro did not write: " + std::string(attr.substr(0, 20));
      }
    }
  }
  return {};
}

}  // namespace goro::fuzz
