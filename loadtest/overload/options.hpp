// overload_openloop's command line (openloop.cpp says what each option does).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace openloop {

[[noreturn]] inline void fail(const std::string& message) {
  std::fprintf(stderr, "overload_openloop: %s\n", message.c_str());
  std::exit(2);
}

struct Options {
  std::string host = "127.0.0.1";
  std::string port = "80";
  std::string path = "/";
  double rate = 0;
  std::size_t conns = 100;
  double duration = 8;
  double warmup = 2;
  double timeout = 2;
  bool json = false;
  std::vector<int> rss_pids;
};

inline void parse_url(std::string_view url, Options& o) {
  constexpr std::string_view scheme = "http://";
  if (url.substr(0, scheme.size()) != scheme) fail("--url must start with http://");
  url.remove_prefix(scheme.size());
  const std::size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  o.path = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  const std::size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    o.port = std::string(authority.substr(colon + 1));
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) fail("--url has no host");
  o.host = std::string(authority);
}

inline double parse_number(const char* flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= 0)) {
    fail(std::string(flag) + " wants a non-negative number, not '" + text + "'");
  }
  return v;
}

inline Options parse_options(int argc, char** argv) {
  Options o;
  bool have_url = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string value;
    if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
      arg = arg.substr(0, eq);
    } else if (arg != "--json" && arg != "--help") {
      if (i + 1 >= argc) fail(std::string(arg) + " wants a value");
      value = argv[++i];
    }
    if (arg == "--url") {
      parse_url(value, o);
      have_url = true;
    } else if (arg == "--rate") {
      o.rate = parse_number("--rate", value.c_str());
    } else if (arg == "--conns") {
      o.conns = static_cast<std::size_t>(parse_number("--conns", value.c_str()));
    } else if (arg == "--duration") {
      o.duration = parse_number("--duration", value.c_str());
    } else if (arg == "--warmup") {
      o.warmup = parse_number("--warmup", value.c_str());
    } else if (arg == "--timeout") {
      o.timeout = parse_number("--timeout", value.c_str());
    } else if (arg == "--rss-pids") {
      for (std::size_t at = 0; at < value.size();) {
        std::size_t comma = value.find(',', at);
        if (comma == std::string::npos) comma = value.size();
        const double pid = parse_number("--rss-pids", value.substr(at, comma - at).c_str());
        if (pid < 1) fail("--rss-pids wants process ids above 0");
        o.rss_pids.push_back(static_cast<int>(pid));
        at = comma + 1;
      }
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--help") {
      std::puts("overload_openloop --url http://HOST:PORT/PATH --rate R [--conns N] "
                "[--duration S] [--warmup S] [--timeout S] [--rss-pids P,Q] [--json]");
      std::exit(0);
    } else {
      fail("unknown option " + std::string(arg) + " (--help)");
    }
  }
  if (!have_url) fail("--url is required");
  if (o.rate <= 0) fail("--rate must be above 0");
  if (o.conns == 0) fail("--conns must be at least 1");
  if (o.duration <= 0 || o.timeout <= 0) fail("--duration and --timeout must be above 0");
  return o;
}

}  // namespace openloop
