// What the form, cookie and CORS tests share: curl as the client (curl_util.hpp), a
// checksum.
#pragma once

#include <cstdint>
#include <string_view>

#include "curl_util.hpp"

namespace goro::http::test {

// FNV-1a, 64 bits: a checksum the server computes over what it streamed.
struct Fnv1a {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  void update(std::string_view bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
  }
};

}  // namespace goro::http::test
