// goro::FlagSet: what a program's command line turns into, and what its user is told
// when it is wrong.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <goro/flags.hpp>

namespace goro {
namespace {

using namespace std::chrono_literals;
using Outcome = FlagSet::Outcome;

Outcome parse(FlagSet& flags, std::vector<std::string> args) { return flags.parse_args(args); }

TEST(Flags, DefaultsHoldUntilTheCommandLineSaysOtherwise) {
  FlagSet flags("prog");
  std::string& root = flags.add("root", "./public", "serve `DIR`");
  int& workers = flags.add("workers", 4, "workers");
  std::int64_t& big = flags.add("big", std::int64_t{1} << 40, "a large number");
  double& ratio = flags.add("ratio", 0.5, "a ratio");
  bool& debug = flags.add("debug", false, "debug");
  std::chrono::nanoseconds& grace = flags.add("grace", 10s, "grace");
  ASSERT_EQ(parse(flags, {}).kind, Outcome::ok);
  EXPECT_EQ(root, "./public");
  EXPECT_EQ(workers, 4);
  EXPECT_EQ(big, std::int64_t{1} << 40);
  EXPECT_EQ(ratio, 0.5);
  EXPECT_FALSE(debug);
  EXPECT_EQ(grace, 10s);
  EXPECT_FALSE(flags.was_set("root"));

  ASSERT_EQ(parse(flags, {"--root=/srv", "-workers", "16", "--big=-3", "--ratio", "1e-3", "--debug",
                          "--grace=1m30s"})
                .kind,
            Outcome::ok);
  EXPECT_EQ(root, "/srv");
  EXPECT_EQ(workers, 16);
  EXPECT_EQ(big, -3);
  EXPECT_EQ(ratio, 1e-3);
  EXPECT_TRUE(debug);
  EXPECT_EQ(grace, 90s);
  EXPECT_TRUE(flags.was_set("root"));
  EXPECT_TRUE(flags.was_set("grace"));
}

TEST(Flags, ABoolFlagStandsAloneOrTakesAnExplicitValue) {
  FlagSet flags;
  bool& on = flags.add("on", true, "on");
  ASSERT_EQ(parse(flags, {"--on=false", "rest"}).kind, Outcome::ok);
  EXPECT_FALSE(on);
  // A bool takes no separate value: "true" here is an argument.
  ASSERT_EQ(parse(flags, {"--on", "false"}).kind, Outcome::ok);
  EXPECT_TRUE(on);
  EXPECT_EQ(flags.args(), std::vector<std::string>{"false"});
  Outcome bad = parse(flags, {"--on=maybe"});
  EXPECT_EQ(bad.kind, Outcome::error);
  EXPECT_EQ(bad.message, "flag --on takes true or false, not 'maybe'");
}

TEST(Flags, ArgumentsStayInOrderAroundTheFlagsAndAfterDoubleDash) {
  FlagSet flags;
  std::string& name = flags.add("name", "", "name");
  ASSERT_EQ(parse(flags, {"a", "--name", "x", "b", "-", "--", "--name=y", "c"}).kind, Outcome::ok);
  EXPECT_EQ(name, "x");
  EXPECT_EQ(flags.args(), (std::vector<std::string>{"a", "b", "-", "--name=y", "c"}));
  // A value may itself start with a dash.
  ASSERT_EQ(parse(flags, {"--name", "-x"}).kind, Outcome::ok);
  EXPECT_EQ(name, "-x");
}

TEST(Flags, MistakesAreNamed) {
  FlagSet flags("prog");
  flags.add("count", 1, "count");
  flags.add("wait", 1s, "wait");
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--colour=red"}, "unknown flag --colour"},
           {{"-x"}, "unknown flag -x"},
           {{"--count"}, "flag --count needs a value"},
           {{"--count=ten"}, "flag --count takes a whole number, not 'ten'"},
           {{"--count=99999999999"}, "flag --count takes a whole number, not '99999999999'"},
           {{"--count", "1.5"}, "flag --count takes a whole number, not '1.5'"},
           {{"--wait=soon"},
            "flag --wait takes a duration such as 2.5s, 300ms or 1h30m, not 'soon'"},
       }) {
    Outcome o = parse(flags, c.args);
    EXPECT_EQ(o.kind, Outcome::error) << c.args[0];
    EXPECT_EQ(o.message, c.message);
  }
}

TEST(Flags, HelpListsEveryFlagWithItsValueNameAndDefault) {
  FlagSet flags("prog");
  flags.set_description("Serves things.");
  flags.add("root", "./public", "serve files from `DIR`");
  flags.add("verbose", false, "say more");
  flags.add("grace", 2500ms, "time to finish");
  EXPECT_EQ(parse(flags, {"--help"}).kind, Outcome::help);
  EXPECT_EQ(parse(flags, {"-h"}).kind, Outcome::help);
  const std::string usage = flags.usage();
  EXPECT_EQ(usage.rfind("Usage: prog [flags]", 0), 0u) << usage;
  EXPECT_NE(usage.find("Serves things."), std::string::npos) << usage;
  EXPECT_NE(usage.find("  --root DIR\n        serve files from DIR (default \"./public\")"),
            std::string::npos)
      << usage;
  EXPECT_NE(usage.find("  --verbose\n        say more\n"), std::string::npos) << usage;
  EXPECT_NE(usage.find("  --grace duration\n        time to finish (default 2.5s)"),
            std::string::npos)
      << usage;
  // Sorted by name.
  EXPECT_LT(usage.find("--grace"), usage.find("--root"));
  EXPECT_LT(usage.find("--root"), usage.find("--verbose"));
}

TEST(Flags, AFunctionFlagChecksItsOwnValue) {
  FlagSet flags;
  std::string format = "text";
  flags.func("format", "`FORMAT`: text or json", [&](std::string_view v) {
    if (v != "text" && v != "json") return std::string("takes text or json");
    format = std::string(v);
    return std::string();
  });
  ASSERT_EQ(parse(flags, {"--format", "json"}).kind, Outcome::ok);
  EXPECT_EQ(format, "json");
  EXPECT_EQ(parse(flags, {"--format=yaml"}).message,
            "flag --format takes text or json, not 'yaml'");
}

TEST(Flags, AFlagDefinedTwiceIsAnError) {
  FlagSet flags;
  flags.add("port", 1, "port");
  flags.add("port", 2, "port again");
  Outcome o = parse(flags, {});
  EXPECT_EQ(o.kind, Outcome::error);
  EXPECT_EQ(o.message, "flag --port is defined twice");
}

TEST(Flags, VarBindsAnExistingVariable) {
  FlagSet flags;
  std::string addr = "127.0.0.1:8080";
  flags.var("addr", addr, "listen on `HOST:PORT`");
  EXPECT_NE(flags.usage().find("(default \"127.0.0.1:8080\")"), std::string::npos);
  ASSERT_EQ(parse(flags, {"--addr=:9000"}).kind, Outcome::ok);
  EXPECT_EQ(addr, ":9000");
}

TEST(ParseDuration, ReadsGoSyntaxAndBareSeconds) {
  EXPECT_EQ(parse_duration("1h30m"), std::chrono::nanoseconds(90min));
  EXPECT_EQ(parse_duration("2.5s"), std::chrono::nanoseconds(2500ms));
  EXPECT_EQ(parse_duration("250ms"), std::chrono::nanoseconds(250ms));
  EXPECT_EQ(parse_duration("10us"), std::chrono::nanoseconds(10us));
  EXPECT_EQ(parse_duration("100ns"), std::chrono::nanoseconds(100));
  EXPECT_EQ(parse_duration("1m0.5s"), std::chrono::nanoseconds(60500ms));
  EXPECT_EQ(parse_duration("-1s"), std::chrono::nanoseconds(-1s));
  EXPECT_EQ(parse_duration("3"), std::chrono::nanoseconds(3s));
  EXPECT_EQ(parse_duration("0.25"), std::chrono::nanoseconds(250ms));
  for (const char* bad : {"", "s", "1x", "1 s", "1s2", "h1", "--1s", "1e400", "3000000h"})
    EXPECT_FALSE(parse_duration(bad)) << bad;
}

}  // namespace
}  // namespace goro
