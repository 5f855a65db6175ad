// The word-at-a-time helpers of http/src/bytes.hpp that the router, the request metrics
// and the plain-head reader look strings up with: against memcmp and against each other.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "bytes.hpp"

namespace goro::http::detail {
namespace {

// Each length from 0 to 40 (the 8-byte loop, both tails, memcmp above 32), the byte at
// each offset changed to each of a few values, and the strings cut out of a larger
// buffer at every alignment so no load may stray past their ends unnoticed by ASan.
TEST(SameBytes, AgreesWithMemcmpAtEveryLengthOffsetAndAlignment) {
  const std::string text = "GET /users/{id}/orders/{order}/lines?all=1&x=2";
  for (std::size_t align = 0; align < 8; ++align) {
    for (std::size_t n = 0; n <= 40; ++n) {
      std::string a = text.substr(0, n);
      // Each string alone on the heap, exactly n bytes long: a load past its end is a
      // heap overflow.
      auto* pa = new char[n + align];
      auto* pb = new char[n];
      std::memcpy(pa + align, a.data(), n);
      std::memcpy(pb, a.data(), n);
      const std::string_view va(pa + align, n), vb(pb, n);
      ASSERT_TRUE(same_bytes(va, vb)) << n;
      for (std::size_t at = 0; at < n; ++at) {
        for (unsigned char c : {0x00, 0x01, 0x20, 0x7f, 0x80, 0xff}) {
          const char was = pb[at];
          pb[at] = static_cast<char>(c);
          const bool want = std::memcmp(pa + align, pb, n) == 0;
          ASSERT_EQ(same_bytes(va, vb), want) << "length " << n << ", offset " << at;
          ASSERT_EQ(same_bytes(vb, va), want);
          if (!want) {
            ASSERT_NE(hash_bytes(va), hash_bytes(vb)) << "length " << n << ", offset " << at;
          }
          pb[at] = was;
        }
      }
      if (n > 0) {
        EXPECT_FALSE(same_bytes(va, std::string_view(pb, n - 1)));
      }
      delete[] pa;
      delete[] pb;
    }
  }
}

TEST(LoadTail, HoldsTheBytesInOrderAndZerosAbove) {
  const char bytes[] = "\x01\x02\x03\x04\x05\x06\x07\x08";
  for (std::size_t n = 0; n <= 8; ++n) {
    std::uint64_t want = 0;
    for (std::size_t i = 0; i < n; ++i) want |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
    if (std::endian::native == std::endian::little) {
      EXPECT_EQ(load_tail(bytes, n), want) << n;
    }
  }
}

// Equal strings hash equally wherever they lie; the length and the seed are part of the
// hash, so "a", "a\0" and "a" with another seed differ; and the routes of a service
// spread over a table's low bits.
TEST(HashBytes, DependsOnBytesLengthAndSeedAndSpreadsLowBits) {
  const std::string a = "/plaintext", b = std::string("x/plaintext").substr(1);
  EXPECT_EQ(hash_bytes(a), hash_bytes(b));
  EXPECT_NE(hash_bytes(std::string_view("a", 1)), hash_bytes(std::string_view("a\0", 2)));
  EXPECT_NE(hash_bytes("", 0), hash_bytes("", 1));
  EXPECT_NE(hash_bytes("/x", 0), hash_bytes("/x", 1));
  // Routes that differ only in their last bytes, or only in one byte of the last word:
  // 64 keys fill about 256 * (1 - e^(-1/4)), some 57, of 256 slots when the hash is
  // uniform; a finalizer of one multiply and shift left "/api/v1/items/N" in 2.
  for (const std::string& prefix : {std::string("/api/v1/items/"), std::string("/a/"),
                                    std::string("GET /users/"), std::string("")}) {
    std::set<std::uint64_t> slots;
    for (int i = 0; i < 64; ++i) slots.insert(hash_bytes(prefix + std::to_string(i)) & 255);
    EXPECT_GE(slots.size(), 48u) << "64 keys \"" << prefix << "N\" in 256 slots";
  }
}

}  // namespace
}  // namespace goro::http::detail
