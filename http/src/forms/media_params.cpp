#include "forms/media_params.hpp"

#include <cstring>

namespace goro::http::detail {
namespace {

bool token_char(char c) {
  return c > 32 && c < 127 && std::strchr("()<>@,;:\\\"/[]?={}", c) == nullptr;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

void skip_space(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
}

// Reads a token into out (lower-cased when asked); false when there is none.
bool read_token(std::string_view& s, std::string& out, bool lower_case) {
  std::size_t n = 0;
  while (n < s.size() && token_char(s[n])) ++n;
  if (n == 0) return false;
  out.clear();
  for (char c : s.substr(0, n)) out.push_back(lower_case ? lower(c) : c);
  s.remove_prefix(n);
  return true;
}

// Reads a quoted-string (s at its opening quote), its escapes undone.
bool read_quoted(std::string_view& s, std::string& out) {
  out.clear();
  for (std::size_t i = 1; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      s.remove_prefix(i + 1);
      return true;
    }
    if (c == '\\') {
      if (++i == s.size()) return false;
      c = s[i];
    }
    if (c == '\r' || c == '\n' || c == '\0') return false;
    out.push_back(c);
  }
  return false;
}

}  // namespace

const std::string* MediaType::param(std::string_view name) const noexcept {
  for (const auto& [key, value] : params) {
    if (key == name) return &value;
  }
  return nullptr;
}

bool parse_media_type(std::string_view value, MediaType& out, bool is_media_type) {
  out.type.clear();
  out.params.clear();
  skip_space(value);
  if (!read_token(value, out.type, true)) return false;
  if (is_media_type) {
    std::string subtype;
    if (value.empty() || value.front() != '/') return false;
    value.remove_prefix(1);
    if (!read_token(value, subtype, true)) return false;
    out.type.push_back('/');
    out.type.append(subtype);
  }
  while (true) {
    skip_space(value);
    if (value.empty()) return true;
    if (value.front() != ';') return false;
    value.remove_prefix(1);
    skip_space(value);
    if (value.empty()) return true;  // a trailing ';', as browsers accept
    std::string name, param_value;
    if (!read_token(value, name, true)) return false;
    skip_space(value);
    if (value.empty() || value.front() != '=') return false;
    value.remove_prefix(1);
    skip_space(value);
    if (!value.empty() && value.front() == '"') {
      if (!read_quoted(value, param_value)) return false;
    } else if (!read_token(value, param_value, false)) {
      return false;
    }
    if (out.param(name) != nullptr) return false;
    out.params.emplace_back(std::move(name), std::move(param_value));
  }
}

}  // namespace goro::http::detail
