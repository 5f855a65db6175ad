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
// then "; name=value" pairs whose value is a token or a quoted-string, RFC 2231's
// extended and continued parameters (filename*=UTF-8''%E2%82%AC.txt, name*0, name*1*)
// decoded into their plain names as Go's mime.ParseMediaType does. False when
// malformed or a parameter repeats.
bool parse_media_type(std::string_view value, MediaType& out, bool is_media_type = true);

}  // namespace goro::http::detail
