// negotiate_encoding and friends: what Accept-Encoding values browsers, curl and
// proxies send, and the RFC 9110 corner cases.
#include <array>
#include <string_view>

#include <gtest/gtest.h>

#include <goro/http/content_coding.hpp>

namespace goro::http {
namespace {

constexpr std::array<std::string_view, 3> kOurs = {"br", "zstd", "gzip"};

TEST(ContentCoding, ABrowserGetsTheServersFirstChoiceAmongEquals) {
  EXPECT_EQ(negotiate_encoding("gzip, deflate, br, zstd", kOurs), "br");
  EXPECT_EQ(negotiate_encoding("gzip, deflate", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding("deflate", kOurs), "");
}

TEST(ContentCoding, WeightsDecideBeforeTheServersOrder) {
  EXPECT_EQ(negotiate_encoding("br;q=0.5, gzip;q=0.9", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding("br;q=0.5, *;q=0.6", kOurs), "zstd");
  EXPECT_EQ(accept_weight("br;q=0.5, gzip", "gzip"), 1000);
  EXPECT_EQ(accept_weight("br;q=0.123", "br"), 123);
  EXPECT_EQ(accept_weight("br", "gzip"), -1);
}

TEST(ContentCoding, QZeroRefusesAndAnEmptyHeaderMeansNoCoding) {
  EXPECT_EQ(negotiate_encoding("gzip;q=0, br;q=0", kOurs), "");
  EXPECT_EQ(negotiate_encoding("*;q=0", kOurs), "");
  EXPECT_EQ(negotiate_encoding("", kOurs), "");
  EXPECT_EQ(negotiate_encoding("*, br;q=0", kOurs), "zstd");
}

TEST(ContentCoding, NamesAreCaseInsensitiveAndXGzipIsGzip) {
  EXPECT_EQ(negotiate_encoding("GZIP", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding("x-gzip", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding(" Br ; Q=1", kOurs), "br");
}

TEST(ContentCoding, AMalformedEntryIsSkippedNotTheWholeHeader) {
  EXPECT_EQ(negotiate_encoding("br;q=2, gzip", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding("br;q=0.1234, gzip;q=0.5", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding("br;q=, zstd;junk, gzip;q=1.000", kOurs), "gzip");
  EXPECT_EQ(negotiate_encoding(",,, ;q=1, gzip", kOurs), "gzip");
}

TEST(ContentCoding, IdentityIsAcceptableUnlessRefused) {
  EXPECT_TRUE(identity_acceptable(""));
  EXPECT_TRUE(identity_acceptable("gzip"));
  EXPECT_FALSE(identity_acceptable("identity;q=0"));
  EXPECT_FALSE(identity_acceptable("gzip, *;q=0"));
  EXPECT_TRUE(identity_acceptable("identity, *;q=0"));
}

}  // namespace
}  // namespace goro::http
