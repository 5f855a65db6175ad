// trace_context: the W3C traceparent and tracestate parsers (http/trace.hpp).
//
// The whole input is tried as a traceparent value, checked against a reading written
// differently (split on '-', rather than fields at fixed offsets), and as tracestate
// header lines (split on '\n'), whose result must be a list the parser keeps as it is,
// within the spec's limits, made of members the input held.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/trace.hpp>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

bool lower_hex(std::string_view s, std::size_t size) {
  return s.size() == size && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const std::size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

std::string check_traceparent(std::string_view input) {
  const std::vector<std::string_view> parts = split(trim(input), '-');
  bool valid = parts.size() >= 4 && lower_hex(parts[0], 2) && parts[0] != "ff" &&
               (parts[0] != "00" || parts.size() == 4) && lower_hex(parts[1], 32) &&
               lower_hex(parts[2], 16) && lower_hex(parts[3], 2) &&
               parts[1] != std::string(32, '0') && parts[2] != std::string(16, '0');
  std::optional<http::TraceParent> parsed = http::parse_traceparent(input);
  if (parsed.has_value() != valid) {
    return parsed ? "traceparent: accepted an invalid value" : "traceparent: refused a valid value";
  }
  if (!parsed) return {};
  if (parsed->trace_id != parts[1] || parsed->parent_id != parts[2])
    return "traceparent: ids are not the value's";
  const int flags = std::stoi(std::string(parts[3]), nullptr, 16);
  if (parsed->sampled != ((flags & 1) != 0)) return "traceparent: wrong sampled flag";
  std::optional<http::TraceParent> again = http::parse_traceparent(
      http::format_traceparent(parsed->trace_id, parsed->parent_id, parsed->sampled));
  if (!again || again->trace_id != parsed->trace_id || again->parent_id != parsed->parent_id ||
      again->sampled != parsed->sampled)
    return "traceparent: what format_traceparent writes does not parse back";
  return {};
}

std::string check_tracestate(std::string_view input) {
  const std::vector<std::string_view> lines = split(input, '\n');
  const std::string kept = http::parse_tracestate(lines);
  if (kept.empty()) return {};
  if (kept.size() > http::kMaxTraceState) return "tracestate: longer than the limit";
  const std::string_view one[] = {kept};
  if (http::parse_tracestate(one) != kept)
    return "tracestate: the kept list does not parse as itself";
  std::vector<std::string_view> members = split(kept, ',');
  if (members.size() > 32) return "tracestate: more than 32 members";
  std::vector<std::string_view> given;
  for (std::string_view line : lines) {
    for (std::string_view m : split(line, ',')) given.push_back(trim(m));
  }
  std::vector<std::string_view> keys;
  for (std::string_view m : members) {
    if (std::find(given.begin(), given.end(), m) == given.end())
      return "tracestate: a member the input did not hold";
    keys.push_back(m.substr(0, m.find('=')));
  }
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
    return "tracestate: a repeated key";
  return {};
}

}  // namespace

std::string trace_context(std::string_view input) {
  if (std::string failure = check_traceparent(input); !failure.empty()) return failure;
  return check_tracestate(input);
}

}  // namespace goro::fuzz
