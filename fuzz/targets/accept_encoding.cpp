// accept_encoding: an Accept-Encoding value through negotiate_encoding, accept_weight
// and identity_acceptable (http/content_coding.hpp).
//
// The chosen coding must be one offered, weighed above zero and highest, the earliest
// offered among equals; no coding may be chosen when every weight is zero or less.
#include <array>
#include <string>
#include <string_view>

#include <goro/http/content_coding.hpp>

#include "harness.hpp"

namespace goro::fuzz {

std::string accept_encoding(std::string_view input) {
  static constexpr std::array<std::string_view, 5> offered = {"br", "zstd", "gzip", "deflate",
                                                              "identity"};
  std::array<int, offered.size()> weights{};
  int top = 0;
  for (std::size_t i = 0; i < offered.size(); ++i) {
    weights[i] = http::accept_weight(input, offered[i]);
    if (weights[i] < -1 || weights[i] > 1000) return "a weight outside -1..1000";
    if (weights[i] > top) top = weights[i];
  }
  const std::string_view chosen = http::negotiate_encoding(input, offered);
  if (top == 0) return chosen.empty() ? "" : "a coding chosen though none weighs above zero";
  for (std::size_t i = 0; i < offered.size(); ++i) {
    if (weights[i] != top) continue;
    if (chosen != offered[i]) return "not the earliest offered coding of the top weight";
    break;
  }
  if (http::identity_acceptable(input) != (weights[4] != 0)) {
    return "identity_acceptable disagrees with identity's weight";
  }
  return "";
}

}  // namespace goro::fuzz
