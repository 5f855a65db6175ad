// form_urlencoded: parse_urlencoded (http/form.hpp) on any bytes, and its Values written
// back with encode(), which must parse again, without error, to the same pairs sorted by
// name (a name's values in their order), and encode to the same text again.
#include <algorithm>
#include <string>
#include <string_view>

#include <goro/http/form.hpp>

#include "harness.hpp"

namespace goro::fuzz {

std::string form_urlencoded(std::string_view input) {
  http::Values values;
  http::FormError error;
  const bool valid = http::parse_urlencoded(input, values, &error);
  if (!valid && (error.status != 400 || error.message.empty()))
    return "a refused form without a 400 and a message";
  std::size_t bytes = 0;
  for (const auto& [key, value] : values.entries()) bytes += key.size() + value.size();
  if (bytes > input.size()) return "the values hold more bytes than the input";
  const std::string encoded = values.encode();
  http::Values again;
  if (!http::parse_urlencoded(encoded, again))
    return "what encode() writes does not parse";
  // Empty names with empty values ("=") are written as "=" and read back; nothing is lost.
  auto sorted = values.entries();
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (again.entries() != sorted) return "encode() then parse does not give the same pairs, sorted";
  if (again.encode() != encoded) return "encode() of what it wrote gives another text";
  return {};
}

}  // namespace goro::fuzz
