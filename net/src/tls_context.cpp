// TlsContext (making one, reloading its files, rotating its ticket keys) and the TLS
// error categories. How its OpenSSL contexts are built is in tls_load.cpp; the session
// over a stream in tls.cpp.
#include <goro/net/tls.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <mutex>
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

// Loads impl's first generation (file I/O in goro::blocking) and makes the context.
Result<std::shared_ptr<TlsContext>> make_context(std::unique_ptr<TlsContext::Impl> impl) {
  std::error_code ec = goro::blocking([&]() -> std::error_code {
    std::shared_ptr<const TlsGeneration> gen;
    if (goro::Error e = detail::load_generation(*impl, gen)) return e.code();
    impl->current.store(std::move(gen));
    if (!impl->server) return {};
    impl->base = detail::new_ssl_ctx(*impl);
    if (impl->base == nullptr) return take_openssl_error(kInvalid);
    detail::install_sni_callback(*impl);
    if (!detail::install_ticket_keys(*impl)) return take_openssl_error(kNoMemory);
    return {};
  });
  if (ec) return ec;
  return std::make_shared<TlsContext>(std::move(impl));
}

}  // namespace

TlsContext::TlsContext(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
TlsContext::~TlsContext() = default;
bool TlsContext::is_server() const noexcept { return impl_->server; }
const TlsConfig& TlsContext::config() const noexcept { return impl_->config; }

Result<std::shared_ptr<TlsContext>> TlsContext::server(const TlsConfig& config) {
  if (config.certificates.empty()) return std::errc::invalid_argument;
  if (config.client_auth != TlsClientAuth::none && config.client_ca_file.empty())
    return std::errc::invalid_argument;
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->server = true;
  impl->alpn_wire = alpn_wire(config.alpn);
  return make_context(std::move(impl));
}

Result<std::shared_ptr<TlsContext>> TlsContext::client(const TlsConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->server = false;
  impl->alpn_wire = alpn_wire(config.alpn);
  return make_context(std::move(impl));
}

goro::Error TlsContext::reload() {
  return goro::blocking([this]() -> goro::Error {
    std::lock_guard lock(impl_->reload_mu);
    std::shared_ptr<const TlsGeneration> gen;
    if (goro::Error e = detail::load_generation(*impl_, gen)) return e;
    impl_->current.store(std::move(gen));
    return {};
  });
}

std::vector<TlsCertificateInfo> TlsContext::certificates() const {
  std::shared_ptr<const TlsGeneration> gen = impl_->current.load();
  std::vector<TlsCertificateInfo> out;
  for (SSL_CTX* c : gen->ctxs) {
    if (X509* leaf = SSL_CTX_get0_certificate(c)) out.push_back(detail::certificate_info(leaf));
  }
  return out;
}

void TlsContext::rotate_session_ticket_keys() {
  if (impl_->server) detail::rotate_ticket_keys(*impl_);
}

}  // namespace goro::net
