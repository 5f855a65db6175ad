#include "forms/media_params.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "access.hpp"

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

// An RFC 2231 / RFC 5987 ext-value, charset'language'%-encoded bytes, decoded; false
// when it is malformed or its charset is neither UTF-8 nor US-ASCII (Go drops those).
bool decode_ext_value(std::string_view v, std::string& out) {
  const std::size_t first = v.find('\'');
  if (first == std::string_view::npos || first == 0) return false;
  const std::size_t second = v.find('\'', first + 1);
  if (second == std::string_view::npos) return false;
  std::string charset;
  for (char c : v.substr(0, first)) charset.push_back(lower(c));
  if (charset != "utf-8" && charset != "us-ascii") return false;
  out.clear();
  return percent_decode(v.substr(second + 1), out, false);
}

// RFC 2231's parameters, as Go's mime.ParseMediaType reads them: name* (an ext-value)
// takes the place of name; without it, name*0, name*1, ... are joined in order up to the
// first number missing, a piece named with a trailing '*' (name*1*) being %-encoded, the
// first of them (name*0*) an ext-value. The starred parameters themselves are not kept.
void resolve_extended(std::vector<std::pair<std::string, std::string>>& params) {
  std::vector<std::pair<std::string, std::string>> plain;
  std::map<std::string, std::string, std::less<>> starred;
  std::vector<std::string> bases;  // in the order they first appear
  for (auto& [name, value] : params) {
    const std::size_t star = name.find('*');
    if (star == std::string::npos) {
      plain.emplace_back(std::move(name), std::move(value));
      continue;
    }
    std::string base = name.substr(0, star);
    if (std::find(bases.begin(), bases.end(), base) == bases.end()) bases.push_back(base);
    starred.emplace(std::move(name), std::move(value));
  }
  auto piece = [&](const std::string& name) -> const std::string* {
    auto at = starred.find(name);
    return at == starred.end() ? nullptr : &at->second;
  };
  for (const std::string& base : bases) {
    std::string value, decoded;
    bool found = false;
    if (const std::string* whole = piece(base + "*")) {
      found = decode_ext_value(*whole, value);
    } else {
      for (std::size_t n = 0;; ++n) {
        const std::string simple = base + "*" + std::to_string(n);
        if (const std::string* v = piece(simple)) {
          found = true;
          value.append(*v);
          continue;
        }
        const std::string* encoded = piece(simple + "*");
        if (encoded == nullptr) break;
        found = true;
        decoded.clear();
        if (n == 0 ? decode_ext_value(*encoded, decoded) : percent_decode(*encoded, decoded, false))
          value.append(decoded);
      }
    }
    if (!found) continue;
    auto at = std::find_if(plain.begin(), plain.end(), [&](const auto& p) { return p.first == base; });
    if (at != plain.end()) {
      at->second = std::move(value);
    } else {
      plain.emplace_back(base, std::move(value));
    }
  }
  params = std::move(plain);
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
    if (value.empty()) break;
    if (value.front() != ';') return false;
    value.remove_prefix(1);
    skip_space(value);
    if (value.empty()) break;  // a trailing ';', as browsers accept
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
  resolve_extended(out.params);
  return true;
}

}  // namespace goro::http::detail
