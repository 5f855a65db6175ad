#include "files/conditional.hpp"

#include "access.hpp"

namespace goro::http::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

// etagc (RFC 9110 §8.8.3): "!", '#' to '~', and obs-text; not the quote, not controls.
bool is_etagc(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == 0x21 || (u >= 0x23 && u <= 0x7e) || u >= 0x80;
}

// One entity tag at the front of s: its opaque part (quotes included) and whether it is
// weak. s is advanced past it; false when none is there.
bool take_entity_tag(std::string_view& s, std::string_view& opaque, bool& weak) {
  weak = false;
  std::string_view rest = s;
  if (rest.starts_with("W/")) {
    weak = true;
    rest.remove_prefix(2);
  }
  if (rest.empty() || rest.front() != '"') return false;
  std::size_t end = 1;
  while (end < rest.size() && rest[end] != '"') {
    if (!is_etagc(rest[end])) return false;
    ++end;
  }
  if (end == rest.size()) return false;
  opaque = rest.substr(0, end + 1);
  s = rest.substr(end + 1);
  return true;
}

}  // namespace

TagListMatch match_entity_tags(std::string_view list, std::string_view etag, bool strong) {
  std::string_view ours;
  bool ours_weak = false;
  std::string_view e = etag;
  if (!take_entity_tag(e, ours, ours_weak) || !e.empty()) return TagListMatch::no_match;

  std::string_view s = list;
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  if (s == "*") return TagListMatch::match;
  bool found = false, any = false;
  while (!s.empty()) {
    // List elements may be empty (RFC 9110 §5.6.1): "a, , b" is two elements.
    if (s.front() == ',' || is_space(s.front())) {
      s.remove_prefix(1);
      continue;
    }
    std::string_view opaque;
    bool weak = false;
    if (!take_entity_tag(s, opaque, weak)) return TagListMatch::malformed;
    any = true;
    if (opaque == ours && (!strong || (!weak && !ours_weak))) found = true;
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    if (!s.empty() && s.front() != ',') return TagListMatch::malformed;
  }
  if (!any) return TagListMatch::malformed;
  return found ? TagListMatch::match : TagListMatch::no_match;
}

Precondition evaluate_preconditions(const Conditions& c, const Validators& v, bool get_or_head) {
  // 1. If-Match, else 2. If-Unmodified-Since.
  if (!c.if_match.empty()) {
    if (match_entity_tags(c.if_match, v.etag, true) == TagListMatch::no_match)
      return Precondition::failed;
  } else if (!c.if_unmodified_since.empty()) {
    const long long since = parse_http_date(c.if_unmodified_since);
    if (since >= 0 && v.modified > since) return Precondition::failed;
  }
  // 3. If-None-Match, else 4. If-Modified-Since.
  if (!c.if_none_match.empty()) {
    if (match_entity_tags(c.if_none_match, v.etag, false) == TagListMatch::match)
      return get_or_head ? Precondition::not_modified : Precondition::failed;
  } else if (!c.if_modified_since.empty() && get_or_head) {
    const long long since = parse_http_date(c.if_modified_since);
    if (since >= 0 && v.modified <= since) return Precondition::not_modified;
  }
  return Precondition::proceed;
}

bool if_range_allows(std::string_view if_range, const Validators& v) {
  while (!if_range.empty() && is_space(if_range.front())) if_range.remove_prefix(1);
  while (!if_range.empty() && is_space(if_range.back())) if_range.remove_suffix(1);
  if (if_range.empty()) return true;
  if (if_range.front() == '"' || if_range.starts_with("W/")) {
    std::string_view s = if_range, opaque;
    bool weak = false;
    if (!take_entity_tag(s, opaque, weak) || !s.empty() || weak) return false;
    return match_entity_tags(if_range, v.etag, true) == TagListMatch::match;
  }
  const long long date = parse_http_date(if_range);
  return date >= 0 && date == v.modified;
}

}  // namespace goro::http::detail
