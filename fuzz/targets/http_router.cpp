// http_router: pattern parsing, matching and path values.
//
// The input is text: lines up to the first empty line are patterns ("GET /a/{id}",
// "/static/"), registered in order (a pattern the router refuses is skipped); the lines
// after it are requests ("GET /a/7?x=1"; a line without a space is a GET of that target).
// Each request is dispatched, and the outcome checked against a matcher written from
// router.hpp's description: a 200 comes from a route that matches the method and the
// path, with the path values the path holds; a 404 only when no route matches the path
// (nor, for a 301, the path with a slash added); a 405 only when routes match the path
// but none the method, and its Allow header names their methods.
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <goro/http/router.hpp>

#include <goro/http/httptest.hpp>

#include "access.hpp"
#include "harness.hpp"
#include "h1/message_parser.hpp"

namespace goro::fuzz {
namespace {

constexpr std::size_t kMaxPatterns = 16;
constexpr std::size_t kMaxRequests = 16;

// A pattern as router.hpp describes it.
struct Pattern {
  std::string method;  // empty: any
  enum Kind { literal, wildcard, rest, end };
  struct Segment {
    Kind kind;
    std::string text;  // literal: decoded; wildcard, rest: the name ("" for a trailing '/')
  };
  std::vector<Segment> segments;
};

Pattern describe(std::string_view pattern) {
  Pattern p;
  std::size_t space = pattern.find(' ');
  if (space != std::string_view::npos) {
    p.method = std::string(pattern.substr(0, space));
    pattern.remove_prefix(space + 1);
    while (!pattern.empty() && pattern.front() == ' ') pattern.remove_prefix(1);
  }
  pattern.remove_prefix(1);  // the router accepted it: it starts with '/'
  std::string decoded;
  for (;;) {
    std::size_t slash = pattern.find('/');
    std::string_view seg = pattern.substr(0, slash);
    if (seg.empty()) {
      p.segments.push_back({Pattern::rest, ""});
    } else if (seg == "{$}") {
      p.segments.push_back({Pattern::end, ""});
    } else if (seg.front() == '{' && seg.ends_with("...}")) {
      p.segments.push_back({Pattern::rest, std::string(seg.substr(1, seg.size() - 5))});
    } else if (seg.front() == '{') {
      p.segments.push_back({Pattern::wildcard, std::string(seg.substr(1, seg.size() - 2))});
    } else {
      http::detail::percent_decode(seg, decoded, false);
      p.segments.push_back({Pattern::literal, decoded});
    }
    if (slash == std::string_view::npos) break;
    pattern.remove_prefix(slash + 1);
  }
  return p;
}

std::vector<std::string_view> split_path(std::string_view raw_path) {
  std::vector<std::string_view> segs;
  raw_path.remove_prefix(1);
  for (;;) {
    std::size_t slash = raw_path.find('/');
    segs.push_back(raw_path.substr(0, slash));
    if (slash == std::string_view::npos) return segs;
    raw_path.remove_prefix(slash + 1);
  }
}

// Whether p matches raw_path (still %-encoded); the named values it captures, decoded.
bool matches(const Pattern& p, std::string_view raw_path,
             std::vector<std::pair<std::string, std::string>>* values) {
  if (raw_path.empty() || raw_path.front() != '/') return false;
  std::vector<std::string_view> segs = split_path(raw_path);
  std::string decoded;
  for (std::size_t i = 0; i < p.segments.size(); ++i) {
    const Pattern::Segment& s = p.segments[i];
    switch (s.kind) {
      case Pattern::end: return segs.size() == i + 1 && segs[i].empty();
      case Pattern::rest: {
        if (segs.size() <= i) return false;
        std::string raw;
        for (std::size_t j = i; j < segs.size(); ++j) {
          if (j > i) raw.push_back('/');
          raw.append(segs[j]);
        }
        if (!http::detail::percent_decode(raw, decoded, false)) return false;
        if (values != nullptr && !s.text.empty()) values->emplace_back(s.text, decoded);
        return true;
      }
      case Pattern::literal:
        if (segs.size() <= i || !http::detail::percent_decode(segs[i], decoded, false) ||
            decoded != s.text)
          return false;
        break;
      case Pattern::wildcard:
        if (segs.size() <= i || segs[i].empty() ||
            !http::detail::percent_decode(segs[i], decoded, false))
          return false;
        if (values != nullptr) values->emplace_back(s.text, decoded);
        break;
    }
  }
  return segs.size() == p.segments.size();
}

bool method_matches(const Pattern& p, std::string_view method) {
  return p.method.empty() || p.method == method || (p.method == "GET" && method == "HEAD");
}

std::vector<std::string_view> lines_of(std::string_view input) {
  std::vector<std::string_view> lines;
  for (;;) {
    std::size_t nl = input.find('\n');
    lines.push_back(input.substr(0, nl));
    if (nl == std::string_view::npos) return lines;
    input.remove_prefix(nl + 1);
  }
}

// What the server would accept as a request target's bytes: no controls, no spaces.
bool plausible_target(std::string_view target) {
  return !target.empty() && std::none_of(target.begin(), target.end(), [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
  });
}

}  // namespace

std::string http_router(std::string_view input) {
  std::vector<std::string_view> lines = lines_of(input);
  http::Router router;
  std::vector<Pattern> patterns;
  int chosen = -1;  // the route whose handler ran
  std::size_t line = 0;
  for (; line < lines.size() && !lines[line].empty(); ++line) {
    if (patterns.size() == kMaxPatterns) continue;
    const int index = static_cast<int>(patterns.size());
    try {
      router.handle(lines[line], [&chosen, index](http::Request&, http::ResponseWriter& w) {
        chosen = index;
        w.text("ok");
      });
    } catch (const std::invalid_argument&) {
      continue;
    }
    patterns.push_back(describe(lines[line]));
  }
  static const http::HeaderField host[] = {{"Host", "x"}};
  std::size_t requests = 0;
  for (++line; line < lines.size() && requests < kMaxRequests; ++line) {
    std::string_view method = "GET", target = lines[line];
    if (std::size_t space = target.find(' '); space != std::string_view::npos) {
      method = target.substr(0, space);
      target.remove_prefix(space + 1);
    }
    if (!http::detail::is_token(method) || !plausible_target(target)) continue;
    ++requests;
    http::Request req;
    // The server answers 400 to a path with a bad %-escape before any handler runs.
    if (!http::detail::RequestAccess::prepare(req, method, target, host, nullptr)) continue;
    http::httptest::ResponseRecorder w;
    chosen = -1;
    router(req, w);
    const std::string_view raw_path = req.raw_path();
    const std::string what = std::string(method) + " " + std::string(target) + ": ";
    std::vector<std::size_t> path_matches, full_matches;
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      if (!matches(patterns[i], raw_path, nullptr)) continue;
      path_matches.push_back(i);
      if (method_matches(patterns[i], method)) full_matches.push_back(i);
    }
    switch (w.status()) {
      case 200: {
        if (chosen < 0) return what + "200 without a route";
        const Pattern& p = patterns[static_cast<std::size_t>(chosen)];
        std::vector<std::pair<std::string, std::string>> values;
        if (!matches(p, raw_path, &values) || !method_matches(p, method))
          return what + "answered by route " + std::to_string(chosen) + ", which does not match";
        for (const auto& [name, value] : values) {
          if (req.path_value(name) != value)
            return what + "path value " + name + " is \"" + std::string(req.path_value(name)) +
                   "\", the path holds \"" + value + "\"";
        }
        break;
      }
      case 301: {
        if (!path_matches.empty()) return what + "redirected although a route matches";
        std::string slashed = std::string(raw_path) + "/";
        bool subtree = std::any_of(patterns.begin(), patterns.end(), [&](const Pattern& p) {
          return method_matches(p, method) && matches(p, slashed, nullptr);
        });
        if (!subtree) return what + "redirected to a path no route takes";
        if (!req.raw_query().empty()) slashed += "?" + std::string(req.raw_query());
        if (w.header().get("Location") != slashed) return what + "redirected elsewhere";
        break;
      }
      case 404:
        if (!path_matches.empty()) return what + "404 although a route matches the path";
        break;
      case 405: {
        if (path_matches.empty() || !full_matches.empty())
          return what + "405 although the method is not the problem";
        std::set<std::string> allowed;
        for (std::size_t i : path_matches) {
          allowed.insert(patterns[i].method);
          if (patterns[i].method == "GET") allowed.insert("HEAD");
        }
        std::string allow;
        for (const std::string& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
        if (w.header().get("Allow") != allow) return what + "Allow does not list the methods";
        break;
      }
      default: return what + "unexpected status " + std::to_string(w.status());
    }
    if (w.status() != 200 && !full_matches.empty()) return what + "a matching route was not used";
  }
  return {};
}

}  // namespace goro::fuzz
