// goro::Error and Result<T, Error>: the server's words ride along with the code, and the
// code still compares and converts as a std::error_code does.
#include <goro/base/error.hpp>
#include <goro/base/result.hpp>

#include <gtest/gtest.h>

#include <string>
#include <system_error>

namespace goro {
namespace {

TEST(Error, CarriesWordsAndFieldsBesideItsCode) {
  const Error e(std::make_error_code(std::errc::invalid_argument),
                "duplicate key value violates unique constraint \"users_pkey\"",
                {{"sqlstate", "23505"}, {"detail", "Key (id)=(1) already exists."}});
  EXPECT_TRUE(e);
  EXPECT_EQ(e, std::errc::invalid_argument);
  EXPECT_EQ(e.what(), "duplicate key value violates unique constraint \"users_pkey\"");
  EXPECT_EQ(e.field("sqlstate"), "23505");
  EXPECT_EQ(e.field("hint"), "");
  EXPECT_EQ(e.fields().size(), 2u);
  // Interop: a function that takes a std::error_code gets the code.
  const std::error_code ec = e;
  EXPECT_EQ(ec, std::make_error_code(std::errc::invalid_argument));
  // Copies share the words.
  const Error copy = e;
  EXPECT_EQ(copy.field("detail"), "Key (id)=(1) already exists.");
}

TEST(Error, WithoutWordsSaysWhatItsCodeSays) {
  const Error none;
  EXPECT_FALSE(none);
  const Error timeout = std::make_error_code(std::errc::timed_out);
  EXPECT_EQ(timeout.what(), std::make_error_code(std::errc::timed_out).message());
  EXPECT_TRUE(timeout.fields().empty());
}

Result<int, Error> parse_port(const std::string& s) {
  if (s.empty()) return std::make_error_code(std::errc::invalid_argument);
  if (s == "x") return Error(std::make_error_code(std::errc::invalid_argument), "port 'x' is not a number");
  return std::stoi(s);
}

TEST(Error, ResultOfErrorHoldsAValueOrTheError) {
  auto ok = parse_port("80");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 80);
  EXPECT_FALSE(ok.error());

  auto bare = parse_port("");
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error(), std::errc::invalid_argument);

  auto worded = parse_port("x");
  ASSERT_FALSE(worded);
  EXPECT_EQ(worded.error().what(), "port 'x' is not a number");
  EXPECT_THROW((void)worded.value(), std::system_error);
  EXPECT_EQ(worded.value_or(8080), 8080);
}

}  // namespace
}  // namespace goro
