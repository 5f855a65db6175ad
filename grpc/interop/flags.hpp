// The command-line flags of goro's interop programs, spelled as grpc-go's interop server
// and client spell them: --name=value or --name value, and a bare --name for a bool
// (true). Only what the two programs need; anything else is a clear error.
#pragma once

#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace goro_interop {

class Flags {
 public:
  // known: flag name -> default value ("true"/"false" marks a bool). Returns nullopt
  // (after printing why and the known flags) on an unknown flag or a missing value.
  static std::optional<Flags> parse(int argc, char** argv, std::map<std::string, std::string> known) {
    Flags flags;
    flags.values_ = std::move(known);
    for (int i = 1; i < argc; i++) {
      std::string_view arg = argv[i];
      if (!arg.starts_with("-")) return usage(flags, "unexpected argument", arg);
      arg.remove_prefix(arg.starts_with("--") ? 2 : 1);
      std::string name(arg.substr(0, arg.find('=')));
      auto it = flags.values_.find(name);
      if (it == flags.values_.end()) return usage(flags, "unknown flag", name);
      const bool is_bool = it->second == "true" || it->second == "false";
      if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
        it->second = std::string(arg.substr(eq + 1));
      } else if (is_bool) {
        it->second = "true";
      } else if (i + 1 < argc) {
        it->second = argv[++i];
      } else {
        return usage(flags, "missing value of", name);
      }
      if (is_bool && it->second != "true" && it->second != "false") {
        return usage(flags, "not true or false:", it->second);
      }
    }
    return flags;
  }

  const std::string& str(const std::string& name) const { return values_.at(name); }
  bool boolean(const std::string& name) const { return values_.at(name) == "true"; }
  // The flag as an integer in [0, 65535] (a port); nullopt when it is not one.
  std::optional<int> port(const std::string& name) const {
    const std::string& text = values_.at(name);
    int value = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > 65535) {
      std::fprintf(stderr, "--%s=%s is not a port number\n", name.c_str(), text.c_str());
      return std::nullopt;
    }
    return value;
  }

 private:
  static std::optional<Flags> usage(const Flags& flags, std::string_view what, std::string_view arg) {
    std::fprintf(stderr, "%.*s %.*s\nflags:", static_cast<int>(what.size()), what.data(),
                 static_cast<int>(arg.size()), arg.data());
    for (const auto& [name, value] : flags.values_) {
      std::fprintf(stderr, " --%s=%s", name.c_str(), value.c_str());
    }
    std::fprintf(stderr, "\n");
    return std::nullopt;
  }

  std::map<std::string, std::string> values_;
};

}  // namespace goro_interop
