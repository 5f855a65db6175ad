// Building OpenSSL contexts from a TlsConfig: the settings every context of a TlsContext
// shares, the files of one generation (certificates, keys, CAs), and the callbacks a
// server's handshake runs (SNI picks the generation and certificate, ALPN the protocol).
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

#include "tls_internal.hpp"

namespace goro::net::detail {

namespace {

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

// Server, at the client hello (OpenSSL calls it whether or not SNI was sent): moves the
// SSL from the base context onto the current generation's context whose certificate
// matches the SNI host name, else its default. The generation is read here, not when
// the connection was accepted, so a handshake that starts after a reload gets the new
// certificate. A second client hello (after a HelloRetryRequest) keeps the first choice.
int select_certificate(SSL* ssl, int*, void* arg) {
  auto* impl = static_cast<TlsContext::Impl*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  const int answer = name != nullptr ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_NOACK;
  if (SSL_get_SSL_CTX(ssl) != impl->base) return answer;
  std::shared_ptr<const TlsGeneration> gen = impl->current.load();
  SSL_CTX* chosen = gen->ctxs.front();
  if (name != nullptr) {
    for (SSL_CTX* c : gen->ctxs) {
      X509* leaf = SSL_CTX_get0_certificate(c);
      if (leaf != nullptr && X509_check_host(leaf, name, 0, 0, nullptr) == 1) {
        chosen = c;
        break;
      }
    }
  }
  // The SSL takes its own reference to chosen: the generation may go before it does.
  if (SSL_set_SSL_CTX(ssl, chosen) == nullptr) return SSL_TLSEXT_ERR_ALERT_FATAL;
  return answer;
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

// The same for every session context of a server, so that a session made under one
// generation resumes under the next, and so that OpenSSL accepts resuming a session
// whose client certificate was verified.
constexpr unsigned char kSessionIdContext[] = "goro";

// An error naming file: "cert.pem: PEM routines: no start line".
goro::Error file_error(const std::string& file, std::error_code fallback) {
  std::error_code ec = take_openssl_error(fallback);
  return goro::Error(ec, file + ": " + ec.message());
}

}  // namespace

SSL_CTX* new_ssl_ctx(const TlsContext::Impl& impl) {
  const TlsConfig& config = impl.config;
  const bool server = impl.server;
  SSL_CTX* c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (c == nullptr) return nullptr;
  const char* list = !config.ciphers.empty() ? config.ciphers.c_str()
                     : server                ? kServerCiphers
                                             : kClientCiphers;
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
  if (server) {
    // An SSL takes its verify mode from the context it is made from (the base), its CA
    // store from the one it ends on (a generation's): every context gets both.
    int mode = SSL_VERIFY_NONE;
    if (config.client_auth == TlsClientAuth::request) mode = SSL_VERIFY_PEER;
    if (config.client_auth == TlsClientAuth::require)
      mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(c, mode, nullptr);
    SSL_CTX_set_session_id_context(c, kSessionIdContext, sizeof kSessionIdContext - 1);
    SSL_CTX_set_alpn_select_cb(c, select_alpn, const_cast<TlsContext::Impl*>(&impl));
    // For the ticket callback, which finds the context from whichever SSL_CTX the SSL
    // is on at the time.
    SSL_CTX_set_app_data(c, const_cast<TlsContext::Impl*>(&impl));
  } else {
    SSL_CTX_set_verify(c, config.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (!impl.alpn_wire.empty() &&
        SSL_CTX_set_alpn_protos(c, impl.alpn_wire.data(),
                                static_cast<unsigned>(impl.alpn_wire.size())) != 0) {
      SSL_CTX_free(c);
      return nullptr;
    }
  }
  return c;
}

void install_sni_callback(TlsContext::Impl& impl) {
  SSL_CTX_set_tlsext_servername_callback(impl.base, select_certificate);
  SSL_CTX_set_tlsext_servername_arg(impl.base, &impl);
}

goro::Error load_generation(const TlsContext::Impl& impl,
                            std::shared_ptr<const TlsGeneration>& out) {
  const TlsConfig& config = impl.config;
  auto gen = std::make_shared<TlsGeneration>();
  ERR_clear_error();
  const std::size_t count = impl.server ? config.certificates.size() : 1;
  for (std::size_t i = 0; i < count; ++i) {
    SSL_CTX* c = new_ssl_ctx(impl);
    if (c == nullptr) {
      std::error_code ec = take_openssl_error(kInvalid);
      return goro::Error(ec, "TLS settings: " + ec.message());
    }
    gen->ctxs.push_back(c);
    if (impl.server && config.client_auth != TlsClientAuth::none) {
      const std::string& file = config.client_ca_file;
      if (SSL_CTX_load_verify_locations(c, file.c_str(), nullptr) != 1)
        return file_error(file, kInvalid);
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(file.c_str());
      if (names == nullptr) return file_error(file, kInvalid);
      SSL_CTX_set_client_CA_list(c, names);
    }
    if (!impl.server && config.verify) {
      int ok = config.ca_file.empty()
                   ? SSL_CTX_set_default_verify_paths(c)
                   : SSL_CTX_load_verify_locations(c, config.ca_file.c_str(), nullptr);
      if (ok != 1) return file_error(config.ca_file.empty() ? "system CA store" : config.ca_file,
                                     kInvalid);
    }
    if (i >= config.certificates.size()) continue;  // a client without a certificate
    const TlsCertificate& cert = config.certificates[i];
    if (SSL_CTX_use_certificate_chain_file(c, cert.cert_file.c_str()) != 1)
      return file_error(cert.cert_file, kInvalid);
    // OpenSSL finds a key of another certificate either as it loads it or in the check.
    const bool loaded = SSL_CTX_use_PrivateKey_file(c, cert.key_file.c_str(), SSL_FILETYPE_PEM) == 1;
    const unsigned long why = ERR_peek_error();
    const bool mismatch = loaded ? SSL_CTX_check_private_key(c) != 1
                                 : ERR_GET_LIB(why) == ERR_LIB_X509 &&
                                       ERR_GET_REASON(why) == X509_R_KEY_VALUES_MISMATCH;
    if (mismatch) {
      ERR_clear_error();
      return goro::Error(kInvalid,
                         cert.key_file + ": key does not match certificate " + cert.cert_file);
    }
    if (!loaded) return file_error(cert.key_file, kInvalid);
  }
  out = std::move(gen);
  return {};
}

}  // namespace goro::net::detail
