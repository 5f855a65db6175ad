// rate_limit_key: the X-Forwarded-For parser behind key_by_forwarded_for.
//
// The first input byte chooses trusted_proxies (0 to 7); the rest is the field's value.
// What comes back must be a piece of the input, an address inet_pton reads, without
// brackets, and the same element a plain reading of the field finds: split at commas,
// blanks trimmed, counted from the right, a bracketed IPv6 address (with or without a
// port) unwrapped.
#include <arpa/inet.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/overload.hpp>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_address(std::string_view s) {
  if (s.empty() || s.size() >= INET6_ADDRSTRLEN) return false;
  const std::string text(s);
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

// The element the field names, read the slow way.
std::optional<std::string_view> expected(std::string_view field, unsigned trusted) {
  if (trusted == 0) return std::nullopt;
  std::vector<std::string_view> elements;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = field.find(',', start);
    elements.push_back(field.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (field.empty() || elements.size() < trusted) return std::nullopt;
  std::string_view e = trim(elements[elements.size() - trusted]);
  if (!e.empty() && e.front() == '[') {
    const std::size_t close = e.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view port = e.substr(close + 1);
    if (!port.empty()) {
      if (port.size() < 2 || port.front() != ':') return std::nullopt;
      for (char c : port.substr(1)) {
        if (c < '0' || c > '9') return std::nullopt;
      }
    }
    e = e.substr(1, close - 1);
  }
  if (!is_address(e)) return std::nullopt;
  return e;
}

}  // namespace

std::string rate_limit_key(std::string_view input) {
  if (input.empty()) return {};
  const unsigned trusted = static_cast<unsigned char>(input.front()) % 8;
  const std::string_view field = input.substr(1);
  const std::optional<std::string_view> got = http::forwarded_address(field, trusted);
  const std::optional<std::string_view> want = expected(field, trusted);
  if (got.has_value() != want.has_value()) {
    return got ? "forwarded_address found an address where there is none: " + std::string(*got)
               : "forwarded_address missed the address " + std::string(*want);
  }
  if (!got) return {};
  if (*got != *want) return "forwarded_address chose " + std::string(*got) + ", not " + std::string(*want);
  if (got->data() < field.data() || got->data() + got->size() > field.data() + field.size())
    return "forwarded_address returned a view outside its input";
  if (!is_address(*got)) return "forwarded_address returned a non-address: " + std::string(*got);
  return {};
}

}  // namespace goro::fuzz
