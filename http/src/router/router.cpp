#include <goro/http/router.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/error_reply.hpp>
#include <goro/http/status.hpp>

#include "access.hpp"
#include "bytes.hpp"

namespace goro::http {

namespace {

enum class SegmentKind : std::uint8_t { literal, end, wildcard, rest };

// Lower is more specific.
int rank(SegmentKind k) {
  switch (k) {
    case SegmentKind::literal:
    case SegmentKind::end: return 0;
    case SegmentKind::wildcard: return 1;
    case SegmentKind::rest: return 2;
  }
  return 2;
}

struct Segment {
  SegmentKind kind;
  std::string text;  // literal: its decoded text; wildcard / rest: the name
};

struct Route {
  std::string pattern;
  std::string method;  // empty: any
  std::vector<Segment> segments;
  std::size_t wildcards = 0;  // segments that capture a value ({name}, {name...})
  Handler handler;
};

// A value a match captured: the wildcard's name and the raw (still %-encoded) part of
// the path it matched.
struct Capture {
  const std::string* name;
  std::string_view raw;
};

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

Route parse_pattern(std::string_view pattern) {
  Route route;
  route.pattern = std::string(pattern);
  auto bad = [&](const char* why) {
    return std::invalid_argument("goro::http::Router: pattern \"" + route.pattern + "\": " + why);
  };
  std::string_view path = pattern;
  std::size_t space = pattern.find(' ');
  if (space != std::string_view::npos) {
    route.method = std::string(pattern.substr(0, space));
    path = pattern.substr(space + 1);
    while (!path.empty() && path.front() == ' ') path.remove_prefix(1);
    for (char c : route.method) {
      if (c < 'A' || c > 'Z') throw bad("the method must be upper-case letters");
    }
  }
  if (path.empty() || path.front() != '/') throw bad("the path must start with '/'");
  path.remove_prefix(1);
  std::string decoded;
  for (;;) {
    std::size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    bool last = slash == std::string_view::npos;
    if (seg.empty()) {
      if (!last) throw bad("empty segment");
      route.segments.push_back({SegmentKind::rest, ""});  // trailing '/': everything below
      break;
    }
    if (seg.front() == '{') {
      if (seg.back() != '}') throw bad("a wildcard must be a whole segment");
      std::string_view inner = seg.substr(1, seg.size() - 2);
      if (inner == "$") {
        if (!last) throw bad("{$} must end the pattern");
        route.segments.push_back({SegmentKind::end, ""});
      } else if (inner.size() > 3 && inner.substr(inner.size() - 3) == "...") {
        if (!last) throw bad("{name...} must end the pattern");
        inner.remove_suffix(3);
        if (!valid_name(inner)) throw bad("bad wildcard name");
        route.segments.push_back({SegmentKind::rest, std::string(inner)});
      } else {
        if (!valid_name(inner)) throw bad("bad wildcard name");
        route.segments.push_back({SegmentKind::wildcard, std::string(inner)});
      }
    } else {
      if (seg.find_first_of("{}") != std::string_view::npos)
        throw bad("a wildcard must be a whole segment");
      if (!detail::percent_decode(seg, decoded, false)) throw bad("bad %-escape");
      route.segments.push_back({SegmentKind::literal, decoded});
    }
    if (last) break;
    path.remove_prefix(slash + 1);
  }
  for (const Segment& a : route.segments) {
    if (a.kind != SegmentKind::wildcard && a.kind != SegmentKind::rest) continue;
    if (a.text.empty()) continue;
    int same = 0;
    for (const Segment& b : route.segments) {
      if ((b.kind == SegmentKind::wildcard || b.kind == SegmentKind::rest) && b.text == a.text)
        ++same;
    }
    if (same > 1) throw bad("wildcard name used twice");
    ++route.wildcards;
  }
  return route;
}

bool same_shape(const Route& a, const Route& b) {
  if (a.method != b.method || a.segments.size() != b.segments.size()) return false;
  for (std::size_t i = 0; i < a.segments.size(); ++i) {
    if (a.segments[i].kind != b.segments[i].kind) return false;
    if (a.segments[i].kind == SegmentKind::literal && a.segments[i].text != b.segments[i].text)
      return false;
  }
  return true;
}

// Whether a is preferred over b when both match (see router.hpp).
bool more_specific(const Route& a, const Route& b) {
  std::size_t n = std::min(a.segments.size(), b.segments.size());
  for (std::size_t i = 0; i < n; ++i) {
    int ra = rank(a.segments[i].kind), rb = rank(b.segments[i].kind);
    if (ra != rb) return ra < rb;
  }
  if (a.segments.size() != b.segments.size()) return a.segments.size() > b.segments.size();
  return !a.method.empty() && b.method.empty();
}

bool method_matches(const Route& r, std::string_view method) {
  return r.method.empty() || detail::same_bytes(r.method, method) ||
         (detail::same_bytes(method, "HEAD") && detail::same_bytes(r.method, "GET"));
}

// Compares a raw (encoded) path segment with decoded text; escaped: whether the path
// holds a '%' at all.
bool segment_equals(std::string_view raw, const std::string& text, bool escaped,
                    std::string& scratch) {
  if (!escaped || raw.find('%') == std::string_view::npos) return detail::same_bytes(raw, text);
  return detail::percent_decode(raw, scratch, false) && scratch == text;
}

bool has_escape(std::string_view raw_path) {
  return raw_path.find('%') != std::string_view::npos;
}

// Matches raw_path ("/a/b") against r. With captures (room for r.wildcards), records
// the value of each named wildcard there, in pattern order. escaped: has_escape(raw_path).
bool match(const Route& r, std::string_view raw_path, bool escaped, Capture* captures) {
  if (raw_path.empty() || raw_path.front() != '/') return false;
  std::string_view remaining = raw_path.substr(1);
  bool exhausted = false;
  std::string scratch;
  auto next = [&](std::string_view& seg) {
    if (exhausted) return false;
    std::size_t slash = remaining.find('/');
    if (slash == std::string_view::npos) {
      seg = remaining;
      exhausted = true;
    } else {
      seg = remaining.substr(0, slash);
      remaining.remove_prefix(slash + 1);
    }
    return true;
  };
  for (const Segment& s : r.segments) {
    std::string_view seg;
    switch (s.kind) {
      case SegmentKind::literal:
        if (!next(seg) || !segment_equals(seg, s.text, escaped, scratch)) return false;
        break;
      case SegmentKind::wildcard:
        if (!next(seg) || seg.empty()) return false;
        if (captures != nullptr) *captures++ = {&s.text, seg};
        break;
      case SegmentKind::end: return next(seg) && seg.empty() && exhausted;
      case SegmentKind::rest:
        if (exhausted) return false;
        if (captures != nullptr && !s.text.empty()) *captures = {&s.text, remaining};
        return true;
    }
  }
  return exhausted;
}

// Sets the captured values on req, decoded. The request's raw path has valid escapes
// only (RequestAccess::prepare refuses others, and the server answers 400), so every
// part of it decodes.
void set_path_values(Request& req, const Capture* captures, std::size_t count) {
  std::string decoded;
  for (std::size_t i = 0; i < count; ++i) {
    const Capture& c = captures[i];
    if (c.raw.find('%') == std::string_view::npos) {
      req.set_path_value(*c.name, c.raw);
    } else {
      detail::percent_decode(c.raw, decoded, false);
      req.set_path_value(*c.name, decoded);
    }
  }
}

// "/dir" when a route takes "/dir/": 301 to "/dir/" (with the query), as Go's ServeMux.
bool redirect_to_subtree(const std::vector<Route>& routes, Request& req, ResponseWriter& w) {
  std::string_view raw_path = req.raw_path();
  if (raw_path.empty() || raw_path.back() == '/') return false;
  std::string slashed(raw_path);
  slashed.push_back('/');
  bool found = false;
  for (const Route& r : routes) {
    if (method_matches(r, req.method()) && match(r, slashed, has_escape(slashed), nullptr)) {
      found = true;
      break;
    }
  }
  if (!found) return false;
  if (!req.raw_query().empty()) {
    slashed.push_back('?');
    slashed.append(req.raw_query());
  }
  w.header().set("Location", slashed);
  w.text("301 moved permanently: " + slashed + "\n", status::moved_permanently);
  return true;
}

// The one path a route of literal segments matches ("GET /a/b" matches "/a/b", "/a/{$}"
// matches "/a/"), or nothing for a route with a wildcard or a literal that holds a '/'
// (from "%2F": it must not match across segments).
std::optional<std::string> exact_path(const Route& r) {
  std::string path;
  for (const Segment& s : r.segments) {
    if (s.kind == SegmentKind::end) return path + "/";
    if (s.kind != SegmentKind::literal || s.text.find('/') != std::string::npos) return std::nullopt;
    path.push_back('/');
    path.append(s.text);
  }
  return path;
}

// The literal routes by their one path: open addressing over a power-of-two table, each
// entry with its path's hash, so a lookup hashes the request's path once and compares
// hashes before paths (std::unordered_map, not keeping the hashes of a hash it deems
// fast, hashes the keys of a bucket again to find where the bucket ends).
class ExactPaths {
 public:
  void clear() {
    entries_.clear();
    slots_.clear();
  }

  void add(std::string path, std::size_t route) {
    const std::size_t h = detail::hash_bytes(path);
    if (std::size_t same = find_entry(path, h); same != kNone) {
      entries_[same].routes.push_back(route);
      return;
    }
    entries_.push_back(Entry{h, std::move(path), {route}});
    // At most half full: a probe ends at an empty slot soon.
    if (2 * entries_.size() > slots_.size()) {
      slots_.assign(std::max<std::size_t>(8, 2 * slots_.size()), 0);
      for (std::size_t i = 0; i + 1 < entries_.size(); ++i) place(i);
    }
    place(entries_.size() - 1);
  }

  // The routes whose path is path, in the order of the routes, or nullptr.
  const std::vector<std::size_t>* find(std::string_view path) const noexcept {
    const std::size_t i = find_entry(path, detail::hash_bytes(path));
    return i == kNone ? nullptr : &entries_[i].routes;
  }

 private:
  static constexpr std::size_t kNone = ~std::size_t{0};

  std::size_t find_entry(std::string_view path, std::size_t h) const noexcept {
    if (slots_.empty()) return kNone;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t at = h & mask; slots_[at] != 0; at = (at + 1) & mask) {
      const Entry& e = entries_[slots_[at] - 1];
      if (e.hash == h && detail::same_bytes(e.path, path)) return slots_[at] - 1;
    }
    return kNone;
  }

  void place(std::size_t entry) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t at = entries_[entry].hash & mask;
    while (slots_[at] != 0) at = (at + 1) & mask;
    slots_[at] = static_cast<std::uint32_t>(entry + 1);
  }

  struct Entry {
    std::size_t hash;
    std::string path;
    std::vector<std::size_t> routes;
  };
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> slots_;  // 1 + an index into entries_; 0 is empty
};

void default_not_found(Request& req, ResponseWriter& w) {
  (void)detail::send_builtin_error(req, w, status::not_found, "404 page not found\n",
                                   "page not found", "router");
}

void default_method_not_allowed(Request& req, ResponseWriter& w) {
  FrameworkReply reply;
  reply.status = status::method_not_allowed;
  reply.body = "405 method not allowed\n";
  reply.message = "method not allowed";
  reply.origin = "router";
  reply.headers.set("Allow", w.header().get("allow"));
  (void)send_error(req, w, std::move(reply));
}

}  // namespace

// The routes are kept most specific first (more_specific; equally specific ones in the
// order they were added), so the first route that matches a request is the one that
// matches best, and dispatch stops there.
//
// exact indexes the routes of literal segments by the one path each matches, in the
// order of routes. When such a route matches a request, every route before it in that
// order that matches the path is one of them too: a route more specific than all
// literals, or as specific, is all literals, of the same length. So the first of them
// whose method fits is the answer, found with one hash instead of a walk over every
// route; requests that none fits take the walk.
struct Router::Impl {
  std::vector<Route> routes;
  ExactPaths exact;
  std::size_t max_wildcards = 0;
  Handler not_found = default_not_found;
  Handler method_not_allowed = default_method_not_allowed;

  void index() {
    exact.clear();
    for (std::size_t i = 0; i < routes.size(); ++i) {
      if (auto path = exact_path(routes[i])) exact.add(std::move(*path), i);
    }
  }

  void dispatch(const Route& r, Request& req, ResponseWriter& w, const Capture* captures) const {
    set_path_values(req, captures, r.wildcards);
    req.set_pattern(r.pattern);
    r.handler(req, w);
  }
};

Router::Router() : impl_(std::make_shared<Impl>()) {}

Router& Router::handle(std::string_view pattern, Handler handler) {
  Route route = parse_pattern(pattern);
  for (const Route& r : impl_->routes) {
    if (same_shape(r, route)) {
      throw std::invalid_argument("goro::http::Router: pattern \"" + route.pattern +
                                  "\" conflicts with \"" + r.pattern + "\"");
    }
  }
  route.handler = std::move(handler);
  impl_->max_wildcards = std::max(impl_->max_wildcards, route.wildcards);
  // After every route at least as specific: the first one less specific.
  auto at = std::upper_bound(impl_->routes.begin(), impl_->routes.end(), route, more_specific);
  impl_->routes.insert(at, std::move(route));
  impl_->index();
  return *this;
}

Router& Router::not_found(Handler handler) {
  impl_->not_found = std::move(handler);
  return *this;
}

Router& Router::method_not_allowed(Handler handler) {
  impl_->method_not_allowed = std::move(handler);
  return *this;
}

void Router::operator()(Request& req, ResponseWriter& w) const {
  std::string_view raw_path = req.raw_path();
  const bool escaped = has_escape(raw_path);
  // An escaped path may spell a literal differently ("%61" for "a"): it takes the walk.
  if (!escaped) {
    if (const std::vector<std::size_t>* exact = impl_->exact.find(raw_path)) {
      for (std::size_t i : *exact) {
        const Route& r = impl_->routes[i];
        if (method_matches(r, req.method())) return impl_->dispatch(r, req, w, nullptr);
      }
    }
  }
  std::array<Capture, 8> inline_captures;
  std::vector<Capture> heap_captures;
  Capture* captures = inline_captures.data();
  if (impl_->max_wildcards > inline_captures.size()) {
    heap_captures.resize(impl_->max_wildcards);
    captures = heap_captures.data();
  }
  // The method first: it is cheaper to compare than the path.
  for (const Route& r : impl_->routes) {
    if (method_matches(r, req.method()) && match(r, raw_path, escaped, captures))
      return impl_->dispatch(r, req, w, captures);
  }
  const bool path_matched =
      std::any_of(impl_->routes.begin(), impl_->routes.end(),
                  [&](const Route& r) { return match(r, raw_path, escaped, nullptr); });
  if (!path_matched) {
    if (!redirect_to_subtree(impl_->routes, req, w)) impl_->not_found(req, w);
    return;
  }
  std::vector<std::string> allowed;
  for (const Route& r : impl_->routes) {
    if (!match(r, raw_path, escaped, nullptr)) continue;
    allowed.push_back(r.method);
    if (r.method == "GET") allowed.emplace_back("HEAD");
  }
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  std::string allow;
  for (const std::string& m : allowed) {
    if (!allow.empty()) allow.append(", ");
    allow.append(m);
  }
  w.header().set("Allow", allow);
  impl_->method_not_allowed(req, w);
}

}  // namespace goro::http
