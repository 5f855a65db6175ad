// What tls.cpp (the TLS session) and tls_context.cpp (contexts, errors) share.
// Internal to goro::net.
#pragma once

#include <openssl/ssl.h>

#include <string>
#include <system_error>
#include <vector>

#include <goro/net/tls.hpp>

namespace goro::net {

struct TlsContext::Impl {
  TlsConfig config;
  bool server = false;
  std::vector<SSL_CTX*> ctxs;            // server: one per certificate, [0] the default
  std::vector<unsigned char> alpn_wire;  // ALPN list, each name prefixed by its length

  ~Impl() {
    for (SSL_CTX* c : ctxs) SSL_CTX_free(c);
  }
};

namespace detail {

// The oldest error of this thread's OpenSSL error queue (then clears it), or `fallback`.
std::error_code take_openssl_error(std::error_code fallback);

inline const std::error_code kNoMemory = std::make_error_code(std::errc::not_enough_memory);
inline const std::error_code kInvalid = std::make_error_code(std::errc::invalid_argument);

}  // namespace detail
}  // namespace goro::net
