// What tls.cpp (the TLS session), tls_context.cpp (contexts, errors), tls_load.cpp
// (building OpenSSL contexts from files) and tls_state.cpp (certificate details, ticket
// keys) share.
// Internal to goro::net.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <goro/net/tls.hpp>

namespace goro::net {

// One load of a context's files: OpenSSL contexts holding the certificates, keys and
// CAs as they were read. Immutable once published; a reload publishes a new one. An
// SSL that uses one of its SSL_CTXs holds its own reference (OpenSSL counts them), so a
// generation replaced while connections use it goes away without disturbing them.
struct TlsGeneration {
  std::vector<SSL_CTX*> ctxs;  // server: one per certificate, [0] the default; client: one

  TlsGeneration() = default;
  TlsGeneration(const TlsGeneration&) = delete;
  TlsGeneration& operator=(const TlsGeneration&) = delete;
  ~TlsGeneration() {
    for (SSL_CTX* c : ctxs) SSL_CTX_free(c);
  }
};

// A session ticket key (RFC 5077 layout: name, AES-256-CBC key, HMAC-SHA256 key).
struct TicketKey {
  unsigned char name[16];
  unsigned char aes_key[32];
  unsigned char hmac_key[32];
};

// The ticket keys in use: immutable once published; rotation publishes a new one.
struct TicketKeys {
  TicketKey current;
  TicketKey previous;
  bool has_previous = false;
  std::chrono::steady_clock::time_point made;  // when current took over
};

// A shared_ptr that one thread replaces while others read it. A copy under a short lock,
// not std::atomic<std::shared_ptr>: libstdc++ 12's releases a reader's hold on it with a
// relaxed store, which is a race by the memory model (ThreadSanitizer reports it).
// load: any thread; store: any thread, concurrently with loads.
template <class T>
class Published {
 public:
  std::shared_ptr<const T> load() const {
    std::lock_guard lock(mu_);
    return ptr_;
  }
  void store(std::shared_ptr<const T> next) {
    {
      std::lock_guard lock(mu_);
      ptr_.swap(next);
    }
    // next, the one replaced, goes here, outside the lock.
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const T> ptr_;
};

struct TlsContext::Impl {
  TlsConfig config;
  bool server = false;
  std::vector<unsigned char> alpn_wire;  // ALPN list, each name prefixed by its length
  // Server: what every server SSL is made from: the settings, the callbacks and the
  // session ticket keys, no certificate. Its SNI callback moves each SSL onto an SSL_CTX
  // of the current generation, which holds the certificate. OpenSSL keeps the SSL_CTX
  // an SSL was made from as its session context: tickets and the session cache stay
  // here, across reloads.
  SSL_CTX* base = nullptr;
  // The current generation: loaded by every handshake, on any thread; stored by reload
  // once fully built.
  Published<TlsGeneration> current;
  std::mutex reload_mu;  // serialises reloads

  // Session ticket keys, loaded by every ticket made or opened; rotations store under
  // ticket_mu.
  Published<TicketKeys> tickets;
  std::mutex ticket_mu;

  ~Impl() {
    if (base != nullptr) SSL_CTX_free(base);
  }

  // The SSL_CTX a new connection's SSL is made from.
  SSL_CTX* ssl_ctx_for_new() const {
    return server ? base : current.load()->ctxs.front();
  }
};

namespace detail {

// The oldest error of this thread's OpenSSL error queue (then clears it), or `fallback`.
std::error_code take_openssl_error(std::error_code fallback);

// A context with impl's settings and callbacks, no files loaded; nullptr with the
// reason in OpenSSL's error queue (an unknown cipher list included).
SSL_CTX* new_ssl_ctx(const TlsContext::Impl& impl);
// Server: the SNI callback that moves each handshake onto the current generation.
void install_sni_callback(TlsContext::Impl& impl);

// Loads the files impl.config names into a new generation, configured as impl says
// (blocking file I/O: call it in goro::blocking). On failure the error names the file.
goro::Error load_generation(const TlsContext::Impl& impl,
                            std::shared_ptr<const TlsGeneration>& out);

// What cert says (tls_state.cpp).
TlsCertificateInfo certificate_info(X509* cert);
// The state of ssl after a successful handshake. Caller holds the connection's ssl_mu.
void fill_connection_state(SSL* ssl, bool server, TlsConnectionState& out);

// Session ticket keys (tls_state.cpp): installs the ticket callback on a server's base
// context and makes the first key.
bool install_ticket_keys(TlsContext::Impl& impl);
void rotate_ticket_keys(TlsContext::Impl& impl);

inline const std::error_code kNoMemory = std::make_error_code(std::errc::not_enough_memory);
inline const std::error_code kInvalid = std::make_error_code(std::errc::invalid_argument);

}  // namespace detail
}  // namespace goro::net
