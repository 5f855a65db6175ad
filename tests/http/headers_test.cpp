// goro::http::iequals, which compares eight and four bytes at a time: against the
// byte-by-byte reading of RFC 9110's case-insensitive match (ASCII letters only).
#include <gtest/gtest.h>

#include <string>

#include <goro/http/headers.hpp>

namespace goro::http {
namespace {

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Every pair of bytes at every offset of 12-byte strings (the 8-byte word, the 4-byte
// word and the byte tail), the rest of both strings the same mixed-case letters.
TEST(Iequals, EveryPairOfBytesAtEveryOffset) {
  const std::string base = "cOnTeNt-TyPe";
  std::string lowered = base;
  for (char& c : lowered) c = ascii_lower(c);
  for (std::size_t at = 0; at < base.size(); ++at) {
    for (int i = 0; i < 256; ++i) {
      for (int j = 0; j < 256; ++j) {
        std::string a = base, b = lowered;
        a[at] = static_cast<char>(i);
        b[at] = static_cast<char>(j);
        const bool want = ascii_lower(a[at]) == ascii_lower(b[at]);
        ASSERT_EQ(iequals(a, b), want) << "offset " << at << ", bytes " << i << " and " << j;
      }
    }
  }
}

TEST(Iequals, LengthsAndNonAsciiBytes) {
  EXPECT_TRUE(iequals("", ""));
  EXPECT_FALSE(iequals("a", ""));
  EXPECT_TRUE(iequals("Transfer-Encoding", "transfer-encoding"));
  EXPECT_FALSE(iequals("Transfer-Encoding", "transfer-encodinG "));
  EXPECT_FALSE(iequals("transfer-encodinh", "transfer-encoding"));
  // Only ASCII letters fold: '@' and '`', '[' and '{', 0xC1 and 0xE1 differ by 0x20 too.
  EXPECT_FALSE(iequals("@@@@@@@@", "````````"));
  EXPECT_FALSE(iequals("[[[[", "{{{{"));
  EXPECT_FALSE(iequals("\xC1\xC1\xC1\xC1\xC1\xC1\xC1\xC1", "\xE1\xE1\xE1\xE1\xE1\xE1\xE1\xE1"));
  EXPECT_TRUE(iequals("\xC1-HOST-\xE1", "\xC1-host-\xE1"));
}

}  // namespace
}  // namespace goro::http
