// http_conditional: the file server's readers of conditional requests
// (http/src/files/conditional.hpp) and of HTTP dates. The input's lines are an
// entity-tag list, an HTTP date and an If-Range value; each also goes in as every
// conditional field at once.
//
// A strong match is also a weak one; a list of tags that reads at all still reads with
// our tag added, and then matches it; a date that parses formats back to the same instant; and
// If-Range takes our own tag and date and refuses a weak tag.
#include <string>
#include <string_view>

#include "access.hpp"
#include "files/conditional.hpp"
#include "harness.hpp"

namespace goro::fuzz {

std::string http_conditional(std::string_view input) {
  using namespace http::detail;
  std::string_view lines[3];
  for (std::string_view& line : lines) {
    const std::size_t end = input.find('\n');
    line = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
  }
  const std::string_view list = lines[0], date = lines[1], if_range = lines[2];
  constexpr std::string_view ours = "\"5d-17a3c2b1-2a\"";

  const TagListMatch strong = match_entity_tags(list, ours, true);
  const TagListMatch weak = match_entity_tags(list, ours, false);
  if ((strong == TagListMatch::malformed) != (weak == TagListMatch::malformed))
    return "strong and weak comparison disagree on whether the list is malformed";
  if (strong == TagListMatch::match && weak != TagListMatch::match)
    return "a strong match that is not a weak one";
  std::string_view trimmed = list;
  while (!trimmed.empty() && (trimmed.front() == ' ' || trimmed.front() == '\t'))
    trimmed.remove_prefix(1);
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t'))
    trimmed.remove_suffix(1);
  if (strong != TagListMatch::malformed && trimmed != "*") {  // "*" stands alone
    const std::string more = std::string(list) + ", " + std::string(ours);
    if (match_entity_tags(more, ours, true) != TagListMatch::match)
      return "a list with our tag added does not match it";
  }

  const long long t = parse_http_date(date);
  if (t >= 0 && t < 253402300800LL) {  // before the year 10000: four digits
    char formatted[30];
    format_http_date(t, formatted);
    if (parse_http_date(std::string_view(formatted, 29)) != t)
      return "a parsed date does not survive formatting";
  }

  const Validators v{ours, 1700000000};
  for (std::string_view value : {list, date, if_range}) {
    const Conditions c{value, value, value, value};
    const Precondition get = evaluate_preconditions(c, v, true);
    const Precondition put = evaluate_preconditions(c, v, false);
    if (put == Precondition::not_modified) return "304 for a method other than GET or HEAD";
    if (get == Precondition::failed && put != Precondition::failed)
      return "a GET precondition failed that passes for another method";
    (void)if_range_allows(value, v);
  }
  char own_date[30];
  format_http_date(v.modified, own_date);
  if (!if_range_allows(ours, v) || !if_range_allows(std::string_view(own_date, 29), v))
    return "If-Range refuses our own validator";
  if (if_range_allows("W/" + std::string(ours), v)) return "If-Range took a weak tag";
  return "";
}

}  // namespace goro::fuzz
