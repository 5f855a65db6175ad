// Short byte strings compared and hashed a word at a time: the paths, route patterns
// and methods a request is looked up by are a few to a few dozen bytes, where a call to
// memcmp or std::hash costs more than the work. Every load stays inside the string.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace goro::http::detail {

inline std::uint64_t load64(const char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// The n <= 8 bytes at p as the low bytes of a word, in memory order on a little-endian
// machine, the rest zero. Two loads that may overlap (the overlap holds the same bytes in
// the same places, so or-ing them is exact), or two bytes and the last below 4.
inline std::uint64_t load_tail(const char* p, std::size_t n) noexcept {
  if (n >= 4) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return lo | (std::uint64_t{hi} << (8 * (n - 4)));
  }
  if (n == 0) return 0;
  const std::uint64_t last = static_cast<unsigned char>(p[n - 1]);
  if (n == 1) return last;
  std::uint16_t first;
  std::memcpy(&first, p, 2);
  return first | (last << (8 * (n - 1)));
}

// Whether a and b hold the same bytes: up to 16 of them in two loads of a size that may
// overlap in the middle, more a word at a time, beyond 32 by memcmp.
inline bool same_bytes(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  const auto same = [p, q]<class Word>(Word, std::size_t at) {
    Word x, y;
    std::memcpy(&x, p + at, sizeof x);
    std::memcpy(&y, q + at, sizeof y);
    return x == y;
  };
  if (n <= 16) {
    if (n >= 8) return same(std::uint64_t{}, 0) && same(std::uint64_t{}, n - 8);
    if (n >= 4) return same(std::uint32_t{}, 0) && same(std::uint32_t{}, n - 4);
    if (n >= 2) return same(std::uint16_t{}, 0) && p[n - 1] == q[n - 1];
    return n == 0 || p[0] == q[0];
  }
  if (n > 32) return std::memcmp(p, q, n) == 0;
  for (std::size_t at = 0; at + 8 < n; at += 8) {
    if (!same(std::uint64_t{}, at)) return false;
  }
  return same(std::uint64_t{}, n - 8);
}

// A hash for tables of short strings: a multiply and a shift per eight bytes, the length
// and seed mixed in first, and a finalizer that spreads every byte over the low bits.
// Not for keys an adversary chooses to collide: use it where the table holds the
// program's own strings (routes, label sets) and an input only looks one up.
inline std::uint64_t hash_bytes(std::string_view s, std::uint64_t seed = 0) noexcept {
  constexpr std::uint64_t k = 0x9e3779b97f4a7c15ull;
  std::uint64_t h = (seed ^ s.size()) * k;
  const char* p = s.data();
  std::size_t n = s.size();
  if (n >= 8) {
    for (; n > 8; p += 8, n -= 8) {
      h = (h ^ load64(p)) * k;
      h ^= h >> 32;
    }
    h ^= load64(s.data() + s.size() - 8);  // the last eight, overlapping the word before
  } else {
    h ^= load_tail(p, n);
  }
  // splitmix64's finalizer: a product's low bits depend only on its factors' low bits,
  // so the high bits are folded down twice before the table takes the low ones.
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace goro::http::detail
