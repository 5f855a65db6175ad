// Validators and the conditional requests of RFC 9110 §13, as the file server uses them:
// entity-tag lists (If-Match, If-None-Match, If-Range) and the order in which the
// preconditions are evaluated (§13.2.2). Pure functions of header values, so that the
// fuzz target (fuzz/targets/http_conditional.cpp) reaches all of them.
#pragma once

#include <string_view>

namespace goro::http::detail {

// How a field's entity-tag list relates to one entity tag.
enum class TagListMatch { match, no_match, malformed };

// Whether the list (If-Match / If-None-Match: "*" or entity tags separated by commas)
// holds etag, a tag as sent in ETag ("\"abc\"" or "W/\"abc\""). Strong comparison
// (If-Match, If-Range): both tags strong and their opaque parts equal; weak comparison
// (If-None-Match): the opaque parts equal. "*" matches any current representation.
// malformed: the value is not such a list (the caller ignores the field, as Go does).
TagListMatch match_entity_tags(std::string_view list, std::string_view etag, bool strong);

// The validators of the representation selected: its entity tag and its last
// modification in seconds since the epoch.
struct Validators {
  std::string_view etag;
  long long modified = 0;
};

// The conditional fields of a request; empty when absent.
struct Conditions {
  std::string_view if_match;
  std::string_view if_none_match;
  std::string_view if_modified_since;
  std::string_view if_unmodified_since;
};

// What the preconditions decide: go on, answer 304 (GET/HEAD only), or answer 412.
enum class Precondition { proceed, not_modified, failed };

// RFC 9110 §13.2.2 in its order: If-Match (412), else If-Unmodified-Since (412); then
// If-None-Match (304 for GET and HEAD, 412 for other methods), else If-Modified-Since
// (304, GET and HEAD only). A field whose value cannot be read (a malformed list, a
// date in no HTTP form) is ignored.
Precondition evaluate_preconditions(const Conditions& c, const Validators& v, bool get_or_head);

// Whether a Range may be honoured given If-Range (RFC 9110 §13.1.5): absent, or an
// entity tag that matches v.etag strongly, or an HTTP date equal to v.modified. Anything
// else (a weak tag, another date, junk) means the whole representation is sent.
bool if_range_allows(std::string_view if_range, const Validators& v);

}  // namespace goro::http::detail
