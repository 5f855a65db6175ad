// goro::net TLS (OpenSSL 3): TlsContext, TlsConn over any Stream, TlsListener.
//
//   auto ctx = TlsContext::server({.certificates = {{"cert.pem", "key.pem"}}});
//   auto ln = tls_listen("tcp", ":8443", *ctx);
//   for (;;) {
//     auto c = ln->accept();                 // no handshake yet
//     goro::go([c = std::move(*c)]() mutable {
//       char buf[4096];
//       auto n = c.read(buf, sizeof buf);    // handshakes first, in this goroutine
//     });
//   }
//   ...
//   if (goro::Error e = ctx->reload()) log(e.what());  // new files; old ones kept on error
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <goro/base/error.hpp>
#include <goro/base/result.hpp>
#include <goro/net/conn.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/stream.hpp>

namespace goro::net {

// A certificate chain and its private key, both PEM files.
struct TlsCertificate {
  std::string cert_file{};  // leaf first, then intermediates
  std::string key_file{};
};

// Whether a server asks the client for a certificate (Go's tls.ClientAuthType).
enum class TlsClientAuth {
  none,     // asks for none
  request,  // asks; a client may send none, but one it sends must verify
  require,  // asks and requires one that verifies against client_ca_file
};

struct TlsConfig {
  // Server: the certificates to present. The one whose names match the client's SNI
  // is chosen (wildcards allowed); the first is the default. Client: the first, if
  // any, is presented when a server asks for one.
  std::vector<TlsCertificate> certificates{};
  // Both: ALPN protocols in order of preference ("h2", "http/1.1"). A server picks its
  // most preferred one the client offers, and negotiates none if there is no overlap.
  std::vector<std::string> alpn{};
  // Client: the name sent as SNI and checked against the server's certificate. When
  // empty, tls_dial uses the host part of the address.
  std::string server_name{};
  // Client: PEM file of trusted CAs; empty: the system's store.
  std::string ca_file{};
  // Client: verify the server's certificate chain and name. Off only for tests.
  bool verify = true;
  // Both: the TLS 1.2 cipher suites, in OpenSSL's cipher-list syntax. Empty: forward
  // secret AEAD suites only (ECDHE with AES-GCM or ChaCha20-Poly1305, the ECDHE part
  // of Mozilla's "intermediate" profile); a client also accepts ECDHE with AES-CBC, last, for old
  // servers. TLS 1.3 suites are OpenSSL's (all AEAD).
  std::string ciphers{};
  // Server: client certificates (mTLS). With request or require, client_ca_file (PEM,
  // one or more CAs) is what a client certificate must chain to; its names are sent
  // in the CertificateRequest.
  TlsClientAuth client_auth = TlsClientAuth::none;
  std::string client_ca_file{};
  // Server: how long a session ticket key encrypts new tickets before the next one
  // takes over. A ticket is accepted while its key is the current or the previous
  // one, so for up to twice this (and never past the session's lifetime, 2 h). Zero:
  // keys change only on TlsContext::rotate_session_ticket_keys().
  std::chrono::seconds session_ticket_rotation = std::chrono::hours(12);
};

// What one certificate says, as a log or an authorisation check wants it.
struct TlsCertificateInfo {
  std::string subject;      // RFC 2253: "CN=alice,O=Example"
  std::string issuer;
  std::string common_name;  // the subject's last CN, "" if none
  std::vector<std::string> dns_names;     // subjectAltName entries, by kind
  std::vector<std::string> uris;          // "spiffe://example.org/ns/web/sa/api"
  std::vector<std::string> emails;
  std::vector<std::string> ip_addresses;  // "10.0.0.1", "::1"
  std::string serial;  // hexadecimal, upper case
  std::string sha256;  // of the DER encoding, 64 lower-case hex digits
  std::chrono::system_clock::time_point not_before{};
  std::chrono::system_clock::time_point not_after{};
};

// A connection's TLS state after its handshake (Go's tls.ConnectionState).
struct TlsConnectionState {
  std::string version;      // "TLSv1.3"
  std::string cipher;       // "TLS_AES_128_GCM_SHA256"
  std::string alpn;         // "" if none agreed
  std::string server_name;  // SNI received (server) or sent (client); "" if none
  bool resumed = false;     // an earlier session was resumed (a ticket)
  // The peer's leaf certificate: on a client the server's; on a server the client's,
  // when it sent one. peer_verified: its chain was verified against the trusted CAs
  // (on a server, client_ca_file). A resumed session carries the peer certificate of
  // the handshake that made it.
  std::optional<TlsCertificateInfo> peer{};
  bool peer_verified = false;
};

// Certificates and settings shared by many connections, safe to share between
// goroutines. TLS 1.2 is the minimum version; ciphers as TlsConfig::ciphers says;
// compression and renegotiation are disabled.
//
// The files (certificates, keys, CA files) can be read again while serving: reload()
// loads them into a new set of OpenSSL contexts and publishes it in one atomic step. A
// server's handshake picks the set current when the client hello arrives; connections
// made before keep theirs. Session tickets outlive a reload (their keys belong to the
// TlsContext, not to the files).
class TlsContext {
 public:
  struct Impl;

  // Loads the certificates (file I/O in goro::blocking). Fails if none is given, a
  // file cannot be read or a key does not match its certificate.
  static Result<std::shared_ptr<TlsContext>> server(const TlsConfig& config);
  // Loads the trusted CAs (file I/O in goro::blocking).
  static Result<std::shared_ptr<TlsContext>> client(const TlsConfig& config);

  explicit TlsContext(std::unique_ptr<Impl> impl) noexcept;
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool is_server() const noexcept;
  const TlsConfig& config() const noexcept;

  // Reads the files config() names again (in goro::blocking) and, if every one loads
  // and every key matches its certificate, makes them the ones new handshakes use.
  // Otherwise nothing changes and the error names the file at fault ("key.pem: ...").
  // Safe while handshakes run on other threads; reloads are serialised.
  goro::Error reload();
  // The certificates new handshakes present now (server: in config order; client: the
  // client certificate, if any).
  std::vector<TlsCertificateInfo> certificates() const;
  // Server: a new session ticket key encrypts tickets from now on; the one before it
  // still decrypts (and its tickets are replaced on use), older ones no longer do.
  void rotate_session_ticket_keys();
  Impl& impl() const noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// TLS over an inner Stream (a Conn, or anything else), which it owns; move-only.
// The handshake runs explicitly with handshake() or implicitly on the first read or
// write, in the calling goroutine. Concurrency as for Stream: one reader, one writer
// and a closer at once. Deadlines are those of the inner stream. After a failed write
// the connection is unusable: later writes return the same error. A peer that closes
// during the handshake gives std::errc::connection_aborted (Go says io.EOF); a stream
// cut inside a record later gives is_unexpected_eof (below).
// Unlike Conn::close, close() does not wait for a read or write on another goroutine
// to leave the TlsConn: destroy it only after those calls have returned.
class TlsConn final : public Stream {
 public:
  struct Impl;

  // A server side connection on inner, not yet handshaken.
  static Result<TlsConn> server(std::unique_ptr<Stream> inner, std::shared_ptr<TlsContext> ctx);
  // A client side connection on inner, not yet handshaken. server_name (else the
  // context's) is sent as SNI and verified; with verification on, one is required.
  static Result<TlsConn> client(std::unique_ptr<Stream> inner, std::shared_ptr<TlsContext> ctx,
                                std::string_view server_name = {});

  TlsConn() noexcept;
  explicit TlsConn(std::unique_ptr<Impl> impl) noexcept;
  TlsConn(TlsConn&&) noexcept;
  TlsConn& operator=(TlsConn&&) noexcept;
  ~TlsConn() override;

  // Runs the handshake if it has not run; returns its result (failures are sticky).
  // Certificate failures are in x509_category(), protocol failures in tls_category().
  // Blocks until done, a deadline of the inner stream or close().
  std::error_code handshake();
  // The handshake, given up with ctx.err() when ctx is cancelled first.
  std::error_code handshake(const Context& ctx);

  using Stream::read;  // the overloads taking a Context
  using Stream::write;
  Result<std::size_t> read(void* buf, std::size_t len) override;
  Result<std::size_t> write(const void* buf, std::size_t len) override;
  Result<std::size_t> writev(const struct iovec* iov, int count) override;
  // Sends close_notify (unless a write is in progress, the handshake did not finish or
  // shutdown_write() sent it already; waits at most 5 s for it), then closes the inner
  // stream.
  std::error_code close() override;
  // Sends close_notify (unless a write is in progress, the handshake did not finish or
  // a write failed), then half-closes the inner stream, so that the peer reads a clean
  // end of stream while this end still reads: what a lingering close needs. Later
  // writes fail with std::errc::broken_pipe. Blocks until close_notify is handed to the
  // inner stream (its write deadline applies).
  std::error_code shutdown_write() override;
  // True once a read has met the peer's close_notify or the end of the inner stream,
  // or when the inner stream's peer_closed() is.
  bool peer_closed() const override;

  std::error_code set_read_deadline(Deadline d) override;
  std::error_code set_write_deadline(Deadline d) override;
  std::error_code set_deadline(Deadline d) override;
  Addr remote_addr() const override;
  Addr local_addr() const override;
  // Wake::hangup is the stream underneath's; Wake::readable cannot be armed (decrypted
  // bytes may wait in the TLS stream where no poll sees them).
  bool start_on(Wake what, const WakeCall& call) override;
  bool cancel_start(Wake what) override;
  std::chrono::steady_clock::time_point readable_at() const override;

  // After the handshake: the ALPN protocol agreed ("" if none), the SNI name the
  // client sent ("" if none; on a client, the name it sent), and "TLSv1.3" etc.
  std::string negotiated_alpn() const;
  std::string server_name() const;
  std::string version() const;
  // After a successful handshake, its state (peer identity, version, cipher, ALPN,
  // SNI), fixed for the connection's life; nullptr before, or when it failed.
  const TlsConnectionState* connection_state() const noexcept;

  Stream& inner() noexcept;

 private:
  std::unique_ptr<Impl> impl_;
};

// A Listener whose accept() returns server TlsConns. accept() does not handshake, so
// a slow or hostile client cannot stall the accept loop: the handshake runs on the
// connection's first read/write (or handshake()), in the goroutine serving it.
class TlsListener {
 public:
  TlsListener(Listener inner, std::shared_ptr<TlsContext> ctx) noexcept;
  // Waits for the next TCP connection (as Listener::accept); no handshake.
  Result<TlsConn> accept();
  Result<TlsConn> accept(const Context& ctx);
  const Addr& addr() const noexcept { return inner_.addr(); }
  std::error_code close() { return inner_.close(); }
  std::error_code set_deadline(Deadline d) { return inner_.set_deadline(d); }
  Listener& inner() noexcept { return inner_; }

 private:
  Listener inner_;
  std::shared_ptr<TlsContext> ctx_;
};

// Reloads ctx (TlsContext::reload) whenever a file its config names changes: a
// goroutine of its own looks at their inode, size and modification time every
// interval, until stop is cancelled or ctx has no other owner. on_reload, if given,
// hears each reload's outcome (an empty Error on success) on that goroutine. A reload
// that fails is tried again only once the files change again. Returns once it has
// looked at the files a first time (in goro::blocking): later changes are seen.
void watch_files(std::shared_ptr<TlsContext> ctx, std::chrono::nanoseconds interval,
                 Context stop = Context(),
                 std::function<void(const goro::Error&)> on_reload = {});

// listen() plus a server context. Blocks only to resolve a host name.
Result<TlsListener> tls_listen(std::string_view network, std::string_view address,
                               std::shared_ptr<TlsContext> ctx, ListenOptions options = {});

// dial() then a client handshake; the SNI / verified name is the context's
// server_name, else the host part of address. timeout bounds dial and handshake.
// Blocks (parks) until the handshake is done or failed.
Result<TlsConn> tls_dial(std::string_view network, std::string_view address,
                         std::shared_ptr<TlsContext> ctx, std::chrono::nanoseconds timeout = {});
// The same under `cancel`: its deadline and cancellation end the dial and the
// handshake, which then return cancel.err().
Result<TlsConn> tls_dial(std::string_view network, std::string_view address,
                         std::shared_ptr<TlsContext> ctx, std::chrono::nanoseconds timeout,
                         const Context& cancel);

// Errors of OpenSSL's library ("goro.tls"; messages from ERR_error_string_n) and of
// certificate verification ("goro.x509"; values are X509_V_ERR_*, e.g. 62 for a host
// name mismatch).
const std::error_category& tls_category() noexcept;
const std::error_category& x509_category() noexcept;

// True for the error a TlsConn read returns when the stream ended inside a record: it
// was cut, by an attacker or a broken peer (Go's io.ErrUnexpectedEOF). An end between
// records, with or without close_notify, is a read of 0 instead.
bool is_unexpected_eof(std::error_code ec) noexcept;

}  // namespace goro::net
