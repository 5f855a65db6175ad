// goro::FlagSet: definitions, parsing and the help text (see flags.hpp).
#include <goro/flags.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace goro {

struct FlagSet::Flag {
  std::string name;
  std::string usage;         // back-quotes removed
  std::string value_name;    // "DIR", "string", "int"...; for a flag that stands alone,
                             // empty unless its usage names an optional value
  std::string default_text;  // "" when the help shows no default
  bool is_bool = false;
  bool set = false;
  std::function<std::string(std::string_view)> assign;
};

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

std::optional<bool> parse_bool(std::string_view s) {
  if (s == "1" || iequals(s, "true") || iequals(s, "yes")) return true;
  if (s == "0" || iequals(s, "false") || iequals(s, "no")) return false;
  return std::nullopt;
}

template <class Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  const char* end = s.data() + s.size();
  const char* first = s.data();
  if (!s.empty() && s[0] == '+') ++first;
  auto [p, ec] = std::from_chars(first, end, v);
  if (ec != std::errc() || p != end || first == end) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  // strtod wants a terminated string and accepts leading spaces; neither is a number here.
  if (s.empty() || s.front() == ' ') return std::nullopt;
  std::string copy(s);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string format_duration(std::chrono::nanoseconds d) {
  // Go's String(): "1h30m0s", "2.5s", "250ms", "0s".
  std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  std::string sign = ns < 0 ? "-" : "";
  const std::uint64_t u =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  auto fraction = [](std::uint64_t whole, std::uint64_t part, int digits) {
    std::string s = std::to_string(whole);
    if (part == 0) return s;
    std::string f = std::to_string(part);
    f.insert(0, static_cast<std::size_t>(digits) - f.size(), '0');
    while (!f.empty() && f.back() == '0') f.pop_back();
    return s + "." + f;
  };
  if (u < 1000) return sign + std::to_string(u) + "ns";
  if (u < 1000'000) return sign + fraction(u / 1000, u % 1000, 3) + "us";
  if (u < 1000'000'000) return sign + fraction(u / 1000'000, u % 1000'000, 6) + "ms";
  const std::uint64_t seconds = u / 1000'000'000;
  std::string out = sign;
  if (seconds >= 3600) out += std::to_string(seconds / 3600) + "h";
  if (seconds >= 60) out += std::to_string(seconds / 60 % 60) + "m";
  out += fraction(seconds % 60, u % 1000'000'000, 9) + "s";
  return out;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  out.append(s);
  out.push_back('"');
  return out;
}

std::string to_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  if (auto seconds = parse_double(s)) {
    // A bare number counts seconds.
    const double ns = *seconds * 1e9;
    if (!(std::fabs(ns) < 9.2e18)) return std::nullopt;
    const auto v = static_cast<std::int64_t>(std::llround(ns));
    return std::chrono::nanoseconds(negative ? -v : v);
  }
  long double total = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == 0) return std::nullopt;
    const std::optional<double> number = parse_double(s.substr(0, i));
    if (!number) return std::nullopt;
    s.remove_prefix(i);
    std::size_t u = 0;
    while (u < s.size() && !((s[u] >= '0' && s[u] <= '9') || s[u] == '.')) ++u;
    const std::string_view unit = s.substr(0, u);
    s.remove_prefix(u);
    long double scale = 0;
    if (unit == "ns") {
      scale = 1;
    } else if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs") {
      scale = 1e3;
    } else if (unit == "ms") {
      scale = 1e6;
    } else if (unit == "s") {
      scale = 1e9;
    } else if (unit == "m") {
      scale = 60e9;
    } else if (unit == "h") {
      scale = 3600e9;
    } else {
      return std::nullopt;
    }
    total += static_cast<long double>(*number) * scale;
    if (total >= 9.2e18L) return std::nullopt;
  }
  const auto v = static_cast<std::int64_t>(std::llround(static_cast<double>(total)));
  return std::chrono::nanoseconds(negative ? -v : v);
}

FlagSet::FlagSet(std::string program) : program_(std::move(program)) {}
FlagSet::~FlagSet() = default;

FlagSet::Flag& FlagSet::define(std::string_view name, std::string_view usage, std::string type,
                               std::string default_text, bool is_bool,
                               std::function<std::string(std::string_view)> set) {
  while (name.starts_with('-')) name.remove_prefix(1);
  auto flag = std::make_unique<Flag>();
  flag->name = std::string(name);
  // A back-quoted word names the value: "serve files from `DIR`".
  std::string text(usage);
  bool named = false;
  if (const std::size_t open = text.find('`'); open != std::string::npos) {
    if (const std::size_t close = text.find('`', open + 1); close != std::string::npos) {
      type = text.substr(open + 1, close - open - 1);
      text.erase(close, 1);
      text.erase(open, 1);
      named = true;
    }
  }
  flag->usage = std::move(text);
  // A flag that stands alone shows a value only when its usage names one ("--x[=V]").
  flag->value_name = !is_bool || named ? std::move(type) : std::string();
  flag->default_text = std::move(default_text);
  flag->is_bool = is_bool;
  flag->assign = std::move(set);
  if (name.empty() || name.find('=') != std::string_view::npos) {
    definition_error_ = "flag name '" + std::string(name) + "' is not valid";
  } else if (find(name) != nullptr) {
    definition_error_ = "flag --" + std::string(name) + " is defined twice";
  }
  flags_.push_back(std::move(flag));
  return *flags_.back();
}

FlagSet::Flag* FlagSet::find(std::string_view name) {
  for (auto& f : flags_) {
    if (f->name == name) return f.get();
  }
  return nullptr;
}

const FlagSet::Flag* FlagSet::find(std::string_view name) const {
  return const_cast<FlagSet*>(this)->find(name);
}

void FlagSet::var(std::string_view name, bool& target, std::string_view usage) {
  define(name, usage, "", target ? "true" : "", true, [&target](std::string_view v) {
    std::optional<bool> b = v.empty() ? std::optional<bool>(true) : parse_bool(v);
    if (!b) return std::string("takes true or false");
    target = *b;
    return std::string();
  });
}

void FlagSet::var(std::string_view name, int& target, std::string_view usage) {
  define(name, usage, "int", target != 0 ? std::to_string(target) : "", false,
         [&target](std::string_view v) {
           std::optional<int> n = parse_int<int>(v);
           if (!n) return std::string("takes a whole number");
           target = *n;
           return std::string();
         });
}

void FlagSet::var(std::string_view name, std::int64_t& target, std::string_view usage) {
  define(name, usage, "int", target != 0 ? std::to_string(target) : "", false,
         [&target](std::string_view v) {
           std::optional<std::int64_t> n = parse_int<std::int64_t>(v);
           if (!n) return std::string("takes a whole number");
           target = *n;
           return std::string();
         });
}

void FlagSet::var(std::string_view name, double& target, std::string_view usage) {
  define(name, usage, "float", target != 0 ? to_text(target) : "", false,
         [&target](std::string_view v) {
           std::optional<double> n = parse_double(v);
           if (!n) return std::string("takes a number");
           target = *n;
           return std::string();
         });
}

void FlagSet::var(std::string_view name, std::string& target, std::string_view usage) {
  define(name, usage, "string", target.empty() ? "" : quoted(target), false,
         [&target](std::string_view v) {
           target = std::string(v);
           return std::string();
         });
}

void FlagSet::var(std::string_view name, std::chrono::nanoseconds& target, std::string_view usage) {
  define(name, usage, "duration", target.count() != 0 ? format_duration(target) : "", false,
         [&target](std::string_view v) {
           std::optional<std::chrono::nanoseconds> d = parse_duration(v);
           if (!d) return std::string("takes a duration such as 2.5s, 300ms or 1h30m");
           target = *d;
           return std::string();
         });
}

void FlagSet::func(std::string_view name, std::string_view usage,
                   std::function<std::string(std::string_view)> set, bool takes_value,
                   std::string_view default_text) {
  define(name, usage, "value", std::string(default_text), !takes_value, std::move(set));
}

namespace {

// Keeps value for the FlagSet's life and binds a flag to it.
template <class T>
T& add_stored(FlagSet& flags, std::vector<std::shared_ptr<void>>& storage, std::string_view name,
              T value, std::string_view usage) {
  auto p = std::make_shared<T>(std::move(value));
  T& ref = *p;
  storage.push_back(std::move(p));
  flags.var(name, ref, usage);
  return ref;
}

}  // namespace

bool& FlagSet::add(std::string_view name, bool value, std::string_view usage) {
  return add_stored(*this, storage_, name, value, usage);
}
int& FlagSet::add(std::string_view name, int value, std::string_view usage) {
  return add_stored(*this, storage_, name, value, usage);
}
std::int64_t& FlagSet::add(std::string_view name, std::int64_t value, std::string_view usage) {
  return add_stored(*this, storage_, name, value, usage);
}
double& FlagSet::add(std::string_view name, double value, std::string_view usage) {
  return add_stored(*this, storage_, name, value, usage);
}
std::string& FlagSet::add(std::string_view name, std::string value, std::string_view usage) {
  return add_stored(*this, storage_, name, std::move(value), usage);
}
std::string& FlagSet::add(std::string_view name, const char* value, std::string_view usage) {
  return add(name, std::string(value != nullptr ? value : ""), usage);
}
std::chrono::nanoseconds& FlagSet::add(std::string_view name, std::chrono::nanoseconds value,
                                       std::string_view usage) {
  return add_stored(*this, storage_, name, value, usage);
}

void FlagSet::set_description(std::string_view text) { description_ = std::string(text); }

bool FlagSet::was_set(std::string_view name) const {
  const Flag* f = find(name);
  return f != nullptr && f->set;
}

FlagSet::Outcome FlagSet::parse_args(std::span<const std::string> args) {
  if (!definition_error_.empty()) return {Outcome::error, definition_error_};
  args_.clear();
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      args_.insert(args_.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      args_.emplace_back(arg);
      continue;
    }
    std::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string_view name = body;
    std::optional<std::string_view> value;
    if (const std::size_t eq = body.find('='); eq != std::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
    }
    Flag* flag = find(name);
    if (flag == nullptr) {
      if (name == "help" || name == "h") return {Outcome::help, {}};
      const std::string_view dashes = arg.substr(0, arg.size() - body.size());
      return {Outcome::error, "unknown flag " + std::string(dashes) + std::string(name)};
    }
    if (!flag->is_bool && !value) {
      if (i + 1 >= args.size()) return {Outcome::error, "flag --" + flag->name + " needs a value"};
      value = std::string_view(args[++i]);
    }
    if (std::string problem = flag->assign(value.value_or("")); !problem.empty()) {
      return {Outcome::error, "flag --" + flag->name + " " + problem + ", not '" +
                                  std::string(value.value_or("")) + "'"};
    }
    flag->set = true;
  }
  return {Outcome::ok, {}};
}

std::optional<int> FlagSet::parse(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  const Outcome outcome = parse_args(args);
  switch (outcome.kind) {
    case Outcome::ok: return std::nullopt;
    case Outcome::help: {
      const std::string text = usage();
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return 0;
    }
    case Outcome::error:
      std::fprintf(stderr, "%s: %s (see %s --help)\n", program_.c_str(), outcome.message.c_str(),
                   program_.c_str());
      return 2;
  }
  return 2;
}

std::string FlagSet::usage() const {
  std::string out = "Usage: " + program_ + " [flags]";
  out.append(" [arguments]\n");
  if (!description_.empty()) {
    out.append("\n").append(description_);
    if (!description_.ends_with('\n')) out.push_back('\n');
  }
  if (flags_.empty()) return out;
  out.append("\nFlags:\n");
  std::vector<const Flag*> sorted;
  for (const auto& f : flags_) sorted.push_back(f.get());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Flag* a, const Flag* b) { return a->name < b->name; });
  for (const Flag* f : sorted) {
    std::string head = "  --" + f->name;
    if (!f->value_name.empty()) {
      if (f->is_bool) {
        head.append("[=").append(f->value_name).append("]");
      } else {
        head.append(" ").append(f->value_name);
      }
    }
    out.append(head).append("\n");
    out.append("        ").append(f->usage);
    if (!f->default_text.empty()) out.append(" (default ").append(f->default_text).append(")");
    out.append("\n");
  }
  out.append("  --help\n        print this help and exit\n");
  return out;
}

}  // namespace goro
