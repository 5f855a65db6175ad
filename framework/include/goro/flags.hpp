// goro::FlagSet: a program's command-line flags, typed, with defaults and help text, read
// the way Go's flag package reads them.
//
//   goro::FlagSet flags("hello");
//   std::string& root = flags.add("root", "./public", "serve files from `DIR`");
//   int& workers = flags.add("workers", 4, "background workers");
//   bool& debug = flags.add("debug", false, "serve /debug/goro/");
//   if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
//   // root, workers and debug now hold what the command line said, or their defaults.
//
// Syntax: --name=value or --name value; one dash works too (-name). A bool flag takes no
// separate value: --debug sets it, --debug=false clears it. "--" ends the flags. Every
// other argument is positional and lands in args(), in order; flags may come before,
// between or after positional arguments.
//
// --help (or -h) prints the usage on stdout and parse() returns 0; an unknown flag, a
// missing value or a value that does not parse prints the problem and a hint on stderr
// and parse() returns 2. goro::App holds a FlagSet with its own flags already in it
// (App::flags()).
//
// Values: bool (true/false, 1/0, yes/no), int, std::int64_t, double, std::string,
// durations (Go's syntax: "1h30m", "2.5s", "250ms", "10us", "100ns"; a bare number is
// seconds), and anything else through func().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace goro {

class FlagSet {
 public:
  // program names the program in the usage and in error messages.
  explicit FlagSet(std::string program = "program");
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;
  ~FlagSet();

  // Defines a flag and returns where its value lives (the default until parse() sets
  // it); the reference stays valid as long as the FlagSet. A back-quoted word in usage
  // names the value in the help ("serve files from `DIR`" shows "--root DIR").
  bool& add(std::string_view name, bool value, std::string_view usage);
  int& add(std::string_view name, int value, std::string_view usage);
  std::int64_t& add(std::string_view name, std::int64_t value, std::string_view usage);
  double& add(std::string_view name, double value, std::string_view usage);
  std::string& add(std::string_view name, std::string value, std::string_view usage);
  std::string& add(std::string_view name, const char* value, std::string_view usage);
  std::chrono::nanoseconds& add(std::string_view name, std::chrono::nanoseconds value,
                                std::string_view usage);
  template <class Rep, class Period>
  std::chrono::nanoseconds& add(std::string_view name, std::chrono::duration<Rep, Period> value,
                                std::string_view usage) {
    return add(name, std::chrono::duration_cast<std::chrono::nanoseconds>(value), usage);
  }

  // Defines a flag stored in a variable of the caller's (which must outlive the
  // FlagSet's parse()); its value when var() is called is the default shown in the help.
  void var(std::string_view name, bool& target, std::string_view usage);
  void var(std::string_view name, int& target, std::string_view usage);
  void var(std::string_view name, std::int64_t& target, std::string_view usage);
  void var(std::string_view name, double& target, std::string_view usage);
  void var(std::string_view name, std::string& target, std::string_view usage);
  void var(std::string_view name, std::chrono::nanoseconds& target, std::string_view usage);

  // Defines a flag whose value set() takes: it returns "" when the value is good, else a
  // message naming the problem. With takes_value false the flag stands alone like a bool
  // flag (set() gets "" then, or what follows '=' when given as --name=value).
  // default_text is shown in the help as the default ("" shows none).
  void func(std::string_view name, std::string_view usage,
            std::function<std::string(std::string_view value)> set, bool takes_value = true,
            std::string_view default_text = "");

  // A paragraph printed under the usage line of the help, before the flags.
  void set_description(std::string_view text);

  // What parse_args() found.
  struct Outcome {
    enum Kind { ok, help, error };
    Kind kind = ok;
    std::string message{};  // for error: names the problem
  };
  // Parses args (the program's arguments, without argv[0]) and prints nothing.
  Outcome parse_args(std::span<const std::string> args);
  // Parses argv[1..argc) and reports as described at the top of this file: nullopt to go
  // on, else the exit code the program should return.
  std::optional<int> parse(int argc, const char* const* argv);

  // The positional arguments, in order.
  const std::vector<std::string>& args() const noexcept { return args_; }
  // Whether the command line gave flag `name` (a default does not count).
  bool was_set(std::string_view name) const;
  // The help text --help prints.
  std::string usage() const;
  const std::string& program() const noexcept { return program_; }

 private:
  struct Flag;
  Flag& define(std::string_view name, std::string_view usage, std::string type,
               std::string default_text, bool is_bool,
               std::function<std::string(std::string_view)> set);
  Flag* find(std::string_view name);
  const Flag* find(std::string_view name) const;

  std::string program_;
  std::string description_;
  std::vector<std::unique_ptr<Flag>> flags_;
  std::vector<std::shared_ptr<void>> storage_;
  std::vector<std::string> args_;
  std::string definition_error_;
};

// Reads a duration in Go's syntax ("1h30m", "2.5s", "250ms", "1us", "100ns"; a bare
// number is seconds); nullopt when s is not one or does not fit.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view s);

}  // namespace goro
