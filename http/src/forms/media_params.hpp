// A media type or disposition with its parameters (RFC 9110 5.6.6): "multipart/form-data;
// boundary=x", "form-data; name=\"f\"; filename=\"a.txt\"".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace goro::http::detail {

struct MediaType {
  std::string type;  // lower-cased: "multipart/form-data", "form-data"
  std::vector<std::pair<std::string, std::string>> params;  // names lower-cased, values unquoted

  // The value of parameter name (lower-case), or nullptr.
  const std::string* param(std::string_view name) const noexcept;
};

// Parses value into out: a type (with a '/' when is_media_type, a bare token otherwise),
// then "; name=value" pairs whose value is a token or a quoted-string. False when
// malformed or a parameter repeats.
bool parse_media_type(std::string_view value, MediaType& out, bool is_media_type = true);

}  // namespace goro::http::detail
