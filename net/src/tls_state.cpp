// What a handshake leaves to read: certificate details and a connection's state
// (TlsCertificateInfo, TlsConnectionState); and the session ticket keys a server
// encrypts its tickets with, rotated on a period or on a call.
//
// Ticket keys: OpenSSL's own are made once per SSL_CTX and never change, so a stolen
// key opens every session since the server started. Here a key encrypts new tickets for
// TlsConfig::session_ticket_rotation, then the next one takes over and it only
// decrypts, one period more; a ticket it opens is replaced by one under the current key.
// Rotation is checked whenever a ticket is made or opened: no timer needed.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

#include "tls_internal.hpp"

namespace goro::net::detail {

namespace {

std::string name_text(const X509_NAME* name) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len > 0 ? len : 0));
  BIO_free(bio);
  return out;
}

std::string asn1_text(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<std::size_t>(ASN1_STRING_length(s)));
}

std::chrono::system_clock::time_point asn1_time(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string hex(const unsigned char* p, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

void add_alt_names(X509* cert, TlsCertificateInfo& info) {
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    switch (n->type) {
      case GEN_DNS: info.dns_names.push_back(asn1_text(n->d.dNSName)); break;
      case GEN_URI: info.uris.push_back(asn1_text(n->d.uniformResourceIdentifier)); break;
      case GEN_EMAIL: info.emails.push_back(asn1_text(n->d.rfc822Name)); break;
      case GEN_IPADD: {
        const int len = ASN1_STRING_length(n->d.iPAddress);
        char text[INET6_ADDRSTRLEN] = {};
        if ((len == 4 || len == 16) &&
            inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(n->d.iPAddress), text,
                      sizeof text) != nullptr)
          info.ip_addresses.push_back(text);
        break;
      }
      default: break;
    }
  }
  GENERAL_NAMES_free(names);
}

}  // namespace

TlsCertificateInfo certificate_info(X509* cert) {
  TlsCertificateInfo info;
  info.subject = name_text(X509_get_subject_name(cert));
  info.issuer = name_text(X509_get_issuer_name(cert));
  const X509_NAME* subject = X509_get_subject_name(cert);
  int last = -1;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i))
    last = i;
  if (last >= 0)
    info.common_name = asn1_text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, last)));
  add_alt_names(cert, info);
  if (BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
    if (char* text = BN_bn2hex(serial)) {
      info.serial = text;
      OPENSSL_free(text);
    }
    BN_free(serial);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &len) == 1) info.sha256 = hex(digest, len);
  info.not_before = asn1_time(X509_get0_notBefore(cert));
  info.not_after = asn1_time(X509_get0_notAfter(cert));
  return info;
}

void fill_connection_state(SSL* ssl, bool server, TlsConnectionState& out) {
  out.version = SSL_get_version(ssl);
  if (const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl)) out.cipher = SSL_CIPHER_get_name(cipher);
  const unsigned char* alpn = nullptr;
  unsigned int alpn_len = 0;
  SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
  if (alpn != nullptr) out.alpn.assign(reinterpret_cast<const char*>(alpn), alpn_len);
  if (server) {
    if (const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)) out.server_name = name;
  }
  out.resumed = SSL_session_reused(ssl) == 1;
  if (X509* peer = SSL_get0_peer_certificate(ssl)) {
    out.peer = certificate_info(peer);
    out.peer_verified = SSL_get_verify_result(ssl) == X509_V_OK &&
                        (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) != 0;
  }
}

// ---------------------------------------------------------------------------------
// Session ticket keys

namespace {

bool new_ticket_key(TicketKey& key) {
  return RAND_bytes(key.name, sizeof key.name) == 1 &&
         RAND_priv_bytes(key.aes_key, sizeof key.aes_key) == 1 &&
         RAND_priv_bytes(key.hmac_key, sizeof key.hmac_key) == 1;
}

// Publishes a new current key, the current one becoming the previous. Caller holds
// impl.ticket_mu.
bool publish_next_key(TlsContext::Impl& impl) {
  auto next = std::make_shared<TicketKeys>();
  if (!new_ticket_key(next->current)) return false;
  std::shared_ptr<const TicketKeys> now = impl.tickets.load();
  if (now) {
    next->previous = now->current;
    next->has_previous = true;
  }
  next->made = std::chrono::steady_clock::now();
  impl.tickets.store(std::move(next));
  return true;
}

// The keys to use now: rotated first when the current key has served its period.
std::shared_ptr<const TicketKeys> keys_now(TlsContext::Impl& impl) {
  std::shared_ptr<const TicketKeys> keys = impl.tickets.load();
  const auto period = impl.config.session_ticket_rotation;
  if (period.count() <= 0 || std::chrono::steady_clock::now() - keys->made < period) return keys;
  std::lock_guard lock(impl.ticket_mu);
  keys = impl.tickets.load();
  if (std::chrono::steady_clock::now() - keys->made >= period) {
    // Past two periods the previous key has expired too: both go.
    if (std::chrono::steady_clock::now() - keys->made >= 2 * period) (void)publish_next_key(impl);
    (void)publish_next_key(impl);
  }
  return impl.tickets.load();
}

bool init_ticket_crypto(const TicketKey& key, unsigned char* iv, EVP_CIPHER_CTX* cipher,
                        EVP_MAC_CTX* mac, bool encrypt) {
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(key.hmac_key),
                                        sizeof key.hmac_key),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(mac, params) != 1) return false;
  return encrypt ? EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes_key, iv) == 1
                 : EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes_key, iv) == 1;
}

// OpenSSL's ticket callback. encrypt: name the current key, make an IV, set up the
// cipher and MAC; returns 1 (or -1 on failure). Decrypt: find the key named; 0 when it
// is unknown (a full handshake follows), 1 for the current key, 2 for the previous one
// (the ticket is then replaced).
int ticket_key_callback(SSL* ssl, unsigned char name[16], unsigned char* iv,
                        EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
  auto* impl = static_cast<TlsContext::Impl*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  if (impl == nullptr) return -1;
  std::shared_ptr<const TicketKeys> keys = keys_now(*impl);
  if (encrypt == 1) {
    if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1) return -1;
    std::memcpy(name, keys->current.name, sizeof keys->current.name);
    return init_ticket_crypto(keys->current, iv, cipher, mac, true) ? 1 : -1;
  }
  if (std::memcmp(name, keys->current.name, 16) == 0)
    return init_ticket_crypto(keys->current, iv, cipher, mac, false) ? 1 : -1;
  if (keys->has_previous && std::memcmp(name, keys->previous.name, 16) == 0)
    return init_ticket_crypto(keys->previous, iv, cipher, mac, false) ? 2 : -1;
  return 0;
}

}  // namespace

bool install_ticket_keys(TlsContext::Impl& impl) {
  {
    std::lock_guard lock(impl.ticket_mu);
    if (!publish_next_key(impl)) return false;
  }
  SSL_CTX_set_tlsext_ticket_key_evp_cb(impl.base, ticket_key_callback);
  return true;
}

void rotate_ticket_keys(TlsContext::Impl& impl) {
  std::lock_guard lock(impl.ticket_mu);
  (void)publish_next_key(impl);
}

}  // namespace goro::net::detail
