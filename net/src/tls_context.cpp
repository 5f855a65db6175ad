// TLS contexts (certificates, SNI, ALPN, verification) and the TLS error categories;
// the session over a stream is in tls.cpp.
#include <goro/net/tls.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

#include <goro/scheduler/runtime.hpp>

#include "internal.hpp"
#include "tls_internal.hpp"

namespace goro::net {

using detail::kInvalid;
using detail::kNoMemory;
using detail::take_openssl_error;

// ---------------------------------------------------------------------------------
// Error categories

namespace {

class TlsCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.tls"; }
  std::string message(int value) const override {
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(value));
    const char* lib = ERR_lib_error_string(static_cast<unsigned long>(value));
    std::string s = lib ? lib : "TLS";
    s += ": ";
    s += reason ? reason : ("error " + std::to_string(value));
    return s;
  }
};

class X509Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.x509"; }
  std::string message(int value) const override {
    return std::string("certificate verification failed: ") + X509_verify_cert_error_string(value);
  }
};

}  // namespace

namespace detail {

std::error_code take_openssl_error(std::error_code fallback) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  if (ERR_SYSTEM_ERROR(e)) return errno_code(static_cast<int>(ERR_GET_REASON(e)));
  return std::error_code(static_cast<int>(e & 0x7fffffffUL), tls_category());
}

}  // namespace detail

const std::error_category& tls_category() noexcept {
  static const TlsCategory category;
  return category;
}

const std::error_category& x509_category() noexcept {
  static const X509Category category;
  return category;
}


// ---------------------------------------------------------------------------------
// TlsContext


namespace {

std::vector<unsigned char> alpn_wire(const std::vector<std::string>& protocols) {
  std::vector<unsigned char> wire;
  for (const std::string& p : protocols) {
    if (p.empty() || p.size() > 255) continue;
    wire.push_back(static_cast<unsigned char>(p.size()));
    wire.insert(wire.end(), p.begin(), p.end());
  }
  return wire;
}

// Server: the protocol of ours, in our order of preference, that the client offered.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void* arg) {
  auto* impl = static_cast<TlsContext::Impl*>(arg);
  if (impl->alpn_wire.empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, impl->alpn_wire.data(),
                            static_cast<unsigned>(impl->alpn_wire.size()), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// Server: switches to the certificate whose names match the SNI host name.
int select_certificate(SSL* ssl, int*, void* arg) {
  auto* impl = static_cast<TlsContext::Impl*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr) return SSL_TLSEXT_ERR_NOACK;
  for (SSL_CTX* c : impl->ctxs) {
    X509* leaf = SSL_CTX_get0_certificate(c);
    if (leaf != nullptr && X509_check_host(leaf, name, 0, 0, nullptr) == 1) {
      if (c != impl->ctxs.front()) SSL_set_SSL_CTX(ssl, c);
      return SSL_TLSEXT_ERR_OK;
    }
  }
  return SSL_TLSEXT_ERR_OK;  // no match: the default certificate
}

// TLS 1.2 suites when TlsConfig::ciphers is empty. No static RSA key exchange (no
// forward secrecy), no CBC on a server (LUCKY13 and kin); OpenSSL's default list has
// both. A client keeps ECDHE-CBC last so it still reaches old servers.
constexpr const char* kServerCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char* kClientCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES256-SHA";

// A new context, or nullptr with the reason in OpenSSL's error queue (an unknown
// cipher list included).
SSL_CTX* new_ctx(bool server, const std::string& ciphers) {
  SSL_CTX* c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (c == nullptr) return nullptr;
  const char* list = !ciphers.empty() ? ciphers.c_str() : server ? kServerCiphers : kClientCiphers;
  if (SSL_CTX_set_cipher_list(c, list) != 1) {
    SSL_CTX_free(c);
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  // IGNORE_UNEXPECTED_EOF: an EOF without close_notify ends a read (see docs/net.md).
  uint64_t options = SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF;
  // Server order, except that a client preferring ChaCha20 (no AES hardware, as on
  // many phones) gets it.
  if (server) options |= SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA;
  SSL_CTX_set_options(c, options);
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);  // idle connections keep no record buffers
  return c;
}

}  // namespace

TlsContext::TlsContext(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
TlsContext::~TlsContext() = default;
bool TlsContext::is_server() const noexcept { return impl_->server; }
const TlsConfig& TlsContext::config() const noexcept { return impl_->config; }

Result<std::shared_ptr<TlsContext>> TlsContext::server(const TlsConfig& config) {
  if (config.certificates.empty()) return std::errc::invalid_argument;
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->server = true;
  impl->alpn_wire = alpn_wire(config.alpn);
  // Reading PEM files may block on the disk.
  std::error_code ec = goro::blocking([&]() -> std::error_code {
    ERR_clear_error();
    for (const TlsCertificate& cert : config.certificates) {
      SSL_CTX* c = new_ctx(true, config.ciphers);
      if (c == nullptr) return take_openssl_error(kInvalid);
      impl->ctxs.push_back(c);
      if (SSL_CTX_use_certificate_chain_file(c, cert.cert_file.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(c, cert.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
          SSL_CTX_check_private_key(c) != 1)
        return take_openssl_error(kInvalid);
    }
    return {};
  });
  if (ec) return ec;
  for (SSL_CTX* c : impl->ctxs) SSL_CTX_set_alpn_select_cb(c, select_alpn, impl.get());
  SSL_CTX_set_tlsext_servername_callback(impl->ctxs.front(), select_certificate);
  SSL_CTX_set_tlsext_servername_arg(impl->ctxs.front(), impl.get());
  return std::make_shared<TlsContext>(std::move(impl));
}

Result<std::shared_ptr<TlsContext>> TlsContext::client(const TlsConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->server = false;
  impl->alpn_wire = alpn_wire(config.alpn);
  std::error_code ec = goro::blocking([&]() -> std::error_code {
    ERR_clear_error();
    SSL_CTX* c = new_ctx(false, config.ciphers);
    if (c == nullptr) return take_openssl_error(kInvalid);
    impl->ctxs.push_back(c);
    if (config.verify) {
      SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
      int ok = config.ca_file.empty()
                   ? SSL_CTX_set_default_verify_paths(c)
                   : SSL_CTX_load_verify_locations(c, config.ca_file.c_str(), nullptr);
      if (ok != 1) return take_openssl_error(kInvalid);
    } else {
      SSL_CTX_set_verify(c, SSL_VERIFY_NONE, nullptr);
    }
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (!impl->alpn_wire.empty() &&
        SSL_CTX_set_alpn_protos(c, impl->alpn_wire.data(),
                                static_cast<unsigned>(impl->alpn_wire.size())) != 0)
      return take_openssl_error(kInvalid);
    return {};
  });
  if (ec) return ec;
  return std::make_shared<TlsContext>(std::move(impl));
}

}  // namespace goro::net
