// TLS on OpenSSL 3 over any goro::net::Stream.
//
// OpenSSL never touches the inner stream. Its BIO is a pair of memory queues owned by
// the connection: ciphertext received (in_) and ciphertext to send (out_). An SSL call
// that needs more input fails with WANT_READ; the caller then reads the inner stream
// (parking its goroutine as any read does) into in_ and retries. Output is queued in
// out_ and written to the inner stream by whoever holds the write lock. So no SSL call
// ever parks, and the SSL object can sit under a short lock (ssl_mu) while a reader and
// a writer use the connection at once: the reader parks in the inner read without
// holding ssl_mu, the writer in the inner write.
//
// Locks (a goroutine takes them in this order): hs_mu (the handshake), read_mu (one
// reader; guards read_buf), write_mu (one writer; guards send_buf, write_error),
// ssl_mu (the SSL object, in_, out_, in_eof; held only around SSL calls and queue
// operations, never across a park). OpenSSL's error queue is per thread and a goroutine
// may change threads when it parks, so errors are read right after the SSL call,
// under ssl_mu.
#include <goro/net/tls.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <goro/net/dial.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/detail/waitq.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>

#include "internal.hpp"
#include "tls_internal.hpp"

namespace goro::net {

using detail::kInvalid;
using detail::kNoMemory;
using detail::take_openssl_error;

namespace {
const std::error_code kUnexpectedEof(static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0,
                                                               SSL_R_UNEXPECTED_EOF_WHILE_READING)),
                                     tls_category());
}  // namespace

bool is_unexpected_eof(std::error_code ec) noexcept { return ec == kUnexpectedEof; }

// ---------------------------------------------------------------------------------
// TlsConn

struct TlsConn::Impl {
  std::unique_ptr<Stream> inner;
  std::shared_ptr<TlsContext> ctx;
  std::string sent_server_name;  // client: the SNI name sent
  SSL* ssl = nullptr;

  goro::Mutex hs_mu;
  goro::Mutex read_mu;
  goro::Mutex write_mu;
  goro::Mutex ssl_mu;

  // Guarded by ssl_mu.
  std::vector<unsigned char> in;  // ciphertext received, from in_pos on not yet consumed
  std::size_t in_pos = 0;
  bool in_eof = false;
  // Where the ciphertext handed to OpenSSL stands in the record framing: header bytes
  // of the next record seen, then body bytes still to come. An end of stream in the
  // middle of a record is a truncation, not an end (OpenSSL, told to ignore a missing
  // close_notify, reports both as the end).
  unsigned char rec_hdr[5] = {};
  std::size_t rec_hdr_have = 0;
  std::size_t rec_left = 0;
  bool first_record = true;  // a server's may be an SSLv2-format ClientHello
  bool truncated = false;
  std::vector<unsigned char> out;  // ciphertext to send

  std::vector<unsigned char> read_buf;  // guarded by read_mu
  std::vector<unsigned char> send_buf;  // guarded by write_mu
  std::error_code write_error;          // guarded by write_mu; sticky

  std::atomic<bool> handshake_done{false};
  std::error_code handshake_error;  // written under hs_mu before handshake_done
  TlsConnectionState state;         // the same
  std::atomic<bool> closed{false};
  // Public calls in progress (CallScope), and the closer's wait for them: close()
  // returns only once none is left inside, as Conn::close does, so the owner may
  // destroy the connection then.
  std::atomic<int> calls{0};
  std::atomic<bool> close_waiting{false};
  goro::detail::Semaphore calls_done;

  ~Impl() {
    if (ssl != nullptr) SSL_free(ssl);
  }

  std::error_code handshake();
  std::error_code fill();
  std::error_code flush();                                     // caller holds write_mu
  std::error_code encrypt(const void* data, std::size_t len);  // caller holds write_mu
  std::error_code ssl_failure(int ret, bool in_handshake);     // caller holds ssl_mu
  void track_records(const unsigned char* p, std::size_t n);   // caller holds ssl_mu
};

namespace {

// Counts a public call on c for close() to wait out. seq_cst with close()'s store and
// load: either the closer sees this call and waits, or this call, leaving, sees the
// closer and wakes it (a token nobody takes is harmless).
struct CallScope {
  explicit CallScope(TlsConn::Impl& c) noexcept : c(c) { c.calls.fetch_add(1); }
  ~CallScope() {
    if (c.calls.fetch_sub(1) == 1 && c.close_waiting.load()) c.calls_done.release();
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  TlsConn::Impl& c;
};

}  // namespace

void TlsConn::Impl::track_records(const unsigned char* p, std::size_t n) {
  while (n > 0) {
    if (rec_left == 0) {  // in a header: type (1), version (2), length (2)
      // OpenSSL still takes an SSLv2-format ClientHello as a server's first record:
      // a 2-byte header, high bit set, then 15 bits of length.
      const bool v2 =
          first_record && ctx->is_server() && (rec_hdr_have > 0 ? rec_hdr[0] : p[0]) & 0x80;
      const std::size_t hdr_len = v2 ? 2 : sizeof rec_hdr;
      std::size_t take = std::min(hdr_len - rec_hdr_have, n);
      std::memcpy(rec_hdr + rec_hdr_have, p, take);
      rec_hdr_have += take;
      p += take;
      n -= take;
      if (rec_hdr_have == hdr_len) {
        rec_left = v2 ? static_cast<std::size_t>(rec_hdr[0] & 0x7f) << 8 | rec_hdr[1]
                      : static_cast<std::size_t>(rec_hdr[3]) << 8 | rec_hdr[4];
        rec_hdr_have = 0;
        first_record = false;
      }
    } else {
      std::size_t take = std::min(rec_left, n);
      rec_left -= take;
      p += take;
      n -= take;
    }
  }
}

namespace {

constexpr std::size_t kReadChunk = 16 * 1024 + 512;  // a full record and its overhead
constexpr std::size_t kFlushThreshold = 64 * 1024;

using ImplT = TlsConn::Impl;

int bio_write(BIO* bio, const char* data, int len) {
  auto* c = static_cast<ImplT*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  c->out.insert(c->out.end(), data, data + len);
  return len;
}

int bio_read(BIO* bio, char* data, int len) {
  auto* c = static_cast<ImplT*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  std::size_t avail = c->in.size() - c->in_pos;
  if (avail == 0) {
    if (c->in_eof) {
      if (c->rec_hdr_have != 0 || c->rec_left != 0) c->truncated = true;
      return 0;
    }
    BIO_set_retry_read(bio);
    return -1;
  }
  std::size_t n = std::min(avail, static_cast<std::size_t>(len));
  std::memcpy(data, c->in.data() + c->in_pos, n);
  c->track_records(c->in.data() + c->in_pos, n);
  c->in_pos += n;
  if (c->in_pos == c->in.size()) {
    c->in.clear();
    c->in_pos = 0;
  }
  return static_cast<int>(n);
}

long bio_ctrl(BIO* bio, int cmd, long, void*) {
  auto* c = static_cast<ImplT*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;  // out_ is sent by the write path
    case BIO_CTRL_EOF: return c->in_eof && c->in_pos == c->in.size() ? 1 : 0;
    case BIO_CTRL_PENDING: return static_cast<long>(c->in.size() - c->in_pos);
    case BIO_CTRL_WPENDING: return static_cast<long>(c->out.size());
    default: return 0;
  }
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int bio_destroy(BIO*) { return 1; }

const BIO_METHOD* queue_bio_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "goro queue");
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    BIO_meth_set_destroy(m, bio_destroy);
    return m;
  }();
  return method;
}

const std::error_code kNotOpen = std::make_error_code(std::errc::bad_file_descriptor);

}  // namespace

std::error_code TlsConn::Impl::ssl_failure(int ret, bool in_handshake) {
  int err = SSL_get_error(ssl, ret);
  if (err == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    return std::make_error_code(std::errc::connection_aborted);
  }
  if (in_handshake) {
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      ERR_clear_error();
      return std::error_code(static_cast<int>(verify), x509_category());
    }
  }
  // SSL_ERROR_SYSCALL with an empty queue: the peer closed in the middle.
  return take_openssl_error(std::make_error_code(std::errc::connection_aborted));
}

std::error_code TlsConn::Impl::fill() {
  if (read_buf.size() < kReadChunk) read_buf.resize(kReadChunk);
  auto n = inner->read(read_buf.data(), read_buf.size());
  if (!n) return n.error();
  std::lock_guard lock(ssl_mu);
  if (*n == 0) {
    in_eof = true;
    return {};
  }
  if (in_pos > 0 && in_pos == in.size()) {
    in.clear();
    in_pos = 0;
  }
  in.insert(in.end(), read_buf.data(), read_buf.data() + *n);
  return {};
}

std::error_code TlsConn::Impl::flush() {
  if (write_error) return write_error;
  for (;;) {
    {
      std::lock_guard lock(ssl_mu);
      if (out.empty()) return {};
      send_buf.swap(out);
    }
    auto n = inner->write(send_buf.data(), send_buf.size());
    send_buf.clear();
    if (!n) {
      write_error = n.error();
      return write_error;
    }
  }
}

std::error_code TlsConn::Impl::encrypt(const void* data, std::size_t len) {
  while (len > 0) {
    std::size_t written = 0;
    std::error_code ec;
    {
      std::lock_guard lock(ssl_mu);
      ERR_clear_error();
      // At most kFlushThreshold per call: SSL_write_ex encrypts all it is given into
      // `out` before returning, so a large write would queue all of its ciphertext.
      int r = SSL_write_ex(ssl, data, std::min(len, kFlushThreshold), &written);
      if (r != 1) ec = ssl_failure(r, false);
    }
    if (ec) {
      write_error = ec;
      return ec;
    }
    data = static_cast<const char*>(data) + written;
    len -= written;
    bool full;
    {
      std::lock_guard lock(ssl_mu);
      full = out.size() >= kFlushThreshold;
    }
    if (full) {
      if (auto e = flush()) return e;
    }
  }
  return {};
}

std::error_code TlsConn::Impl::handshake() {
  if (handshake_done.load(std::memory_order_acquire)) return handshake_error;
  std::lock_guard hs(hs_mu);
  if (handshake_done.load(std::memory_order_acquire)) return handshake_error;
  std::error_code result;
  {
    std::lock_guard rd(read_mu);
    for (;;) {
      if (closed.load(std::memory_order_relaxed)) {
        result = errc::closed;
        break;
      }
      int r;
      int err = SSL_ERROR_NONE;
      std::error_code ec;
      {
        std::lock_guard lock(ssl_mu);
        ERR_clear_error();
        r = SSL_do_handshake(ssl);
        if (r != 1) {
          err = SSL_get_error(ssl, r);
          if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) ec = ssl_failure(r, true);
        }
      }
      std::error_code sent;
      {
        std::lock_guard wr(write_mu);
        sent = flush();  // our flight, or the alert that explains a failure
      }
      if (ec) {
        result = ec;
        break;
      }
      if (sent) {
        result = sent;
        break;
      }
      if (r == 1) break;
      if (err == SSL_ERROR_WANT_READ) {
        if (auto e = fill()) {
          result = e;
          break;
        }
      }
    }
  }
  if (!result) {
    std::lock_guard lock(ssl_mu);
    detail::fill_connection_state(ssl, ctx->is_server(), state);
    if (!ctx->is_server()) state.server_name = sent_server_name;
  }
  handshake_error = result;
  handshake_done.store(true, std::memory_order_release);
  return result;
}

// The connection state both ends share: an SSL on ctx's SSL_CTX for new connections
// (a server's moves to the current certificates at the client hello), reading and
// writing through the in-memory queue BIO.
static Result<std::unique_ptr<TlsConn::Impl>> make_impl(std::unique_ptr<Stream> inner,
                                                        std::shared_ptr<TlsContext> ctx) {
  auto impl = std::make_unique<TlsConn::Impl>();
  impl->inner = std::move(inner);
  impl->ctx = std::move(ctx);
  impl->ssl = SSL_new(impl->ctx->impl().ssl_ctx_for_new());
  if (impl->ssl == nullptr) return take_openssl_error(kNoMemory);
  BIO* bio = BIO_new(queue_bio_method());
  if (bio == nullptr) return take_openssl_error(kNoMemory);
  BIO_set_data(bio, impl.get());
  SSL_set_bio(impl->ssl, bio, bio);
  return impl;
}

Result<TlsConn> TlsConn::server(std::unique_ptr<Stream> inner, std::shared_ptr<TlsContext> ctx) {
  if (!inner || !ctx || !ctx->is_server()) return std::errc::invalid_argument;
  auto impl = make_impl(std::move(inner), std::move(ctx));
  if (!impl) return impl.error();
  SSL_set_accept_state((*impl)->ssl);
  return TlsConn(std::move(*impl));
}

Result<TlsConn> TlsConn::client(std::unique_ptr<Stream> inner, std::shared_ptr<TlsContext> ctx,
                                std::string_view server_name) {
  if (!inner || !ctx || ctx->is_server()) return std::errc::invalid_argument;
  std::string name(server_name.empty() ? std::string_view(ctx->config().server_name) : server_name);
  if (ctx->config().verify && name.empty()) return std::errc::invalid_argument;
  auto made = make_impl(std::move(inner), std::move(ctx));
  if (!made) return made.error();
  std::unique_ptr<Impl> impl = std::move(*made);
  SSL_set_connect_state(impl->ssl);
  if (!name.empty()) {
    bool is_ip = detail::parse_ip(name, 0, Network::ip).ok();
    // SNI carries host names only (RFC 6066); an IP is checked against the IP SANs.
    if (!is_ip) {
      SSL_set_tlsext_host_name(impl->ssl, name.c_str());
      impl->sent_server_name = name;
    }
    if (impl->ctx->config().verify) {
      SSL_set_hostflags(impl->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(impl->ssl), name.c_str())
                     : SSL_set1_host(impl->ssl, name.c_str());
      if (ok != 1) return take_openssl_error(kInvalid);
    }
  }
  return TlsConn(std::move(impl));
}

TlsConn::TlsConn() noexcept = default;
TlsConn::TlsConn(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
TlsConn::TlsConn(TlsConn&&) noexcept = default;
TlsConn& TlsConn::operator=(TlsConn&& other) noexcept {
  if (this != &other) {
    if (impl_) close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
TlsConn::~TlsConn() {
  if (impl_ && !impl_->closed.load(std::memory_order_relaxed)) close();
}

std::error_code TlsConn::handshake() {
  if (!impl_) return kNotOpen;
  CallScope scope(*impl_);
  return impl_->handshake();
}

Result<std::size_t> TlsConn::read(void* buf, std::size_t len) {
  if (!impl_) return kNotOpen;
  Impl& c = *impl_;
  CallScope scope(c);
  if (auto ec = c.handshake()) return ec;
  std::lock_guard rd(c.read_mu);
  if (len == 0) return std::size_t{0};
  for (;;) {
    if (c.closed.load(std::memory_order_relaxed)) return errc::closed;
    std::size_t n = 0;
    int err = SSL_ERROR_NONE;
    std::error_code ec;
    bool have_output;
    bool truncated;
    {
      std::lock_guard lock(c.ssl_mu);
      // Ciphertext already queued is a writer's, and that writer flushes it before it
      // lets go of write_mu. Flushing it here would make this reader wait for the
      // writer, whose flush may need the peer to read, whose reader may be waiting for
      // its own writer the same way: both ends deadlocked, no deadline able to help.
      const std::size_t queued = c.out.size();
      ERR_clear_error();
      int r = SSL_read_ex(c.ssl, buf, len, &n);
      if (r != 1) {
        err = SSL_get_error(c.ssl, r);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE &&
            err != SSL_ERROR_ZERO_RETURN)
          ec = c.ssl_failure(r, false);
        ERR_clear_error();
      }
      have_output = c.out.size() > queued;  // this read's own answer
      truncated = c.truncated;
    }
    if (have_output) {
      // A post-handshake message that needs an answer (a TLS 1.3 KeyUpdate): send it
      // in order with the writer's records, as Go's crypto/tls does. A failure is
      // sticky (write_error) and reported by the next write; data read is still returned.
      std::lock_guard wr(c.write_mu);
      std::error_code sent = c.flush();
      if (sent && n == 0) return sent;
    }
    if (n > 0) return n;
    if (ec) return ec;
    if (err == SSL_ERROR_ZERO_RETURN) {
      // The stream ended inside a record: an attacker (or a broken peer) cut it. Go's
      // crypto/tls says io.ErrUnexpectedEOF; an end between records stays an end.
      if (truncated) return kUnexpectedEof;
      return std::size_t{0};
    }
    if (err == SSL_ERROR_WANT_READ) {
      if (auto e = c.fill()) return e;
    }
  }
}

Result<std::size_t> TlsConn::write(const void* buf, std::size_t len) {
  struct iovec iov = {const_cast<void*>(buf), len};
  return writev(&iov, 1);
}

Result<std::size_t> TlsConn::writev(const struct iovec* iov, int count) {
  if (!impl_) return kNotOpen;
  Impl& c = *impl_;
  CallScope scope(c);
  if (auto ec = c.handshake()) return ec;
  std::lock_guard wr(c.write_mu);
  if (c.closed.load(std::memory_order_relaxed)) return errc::closed;
  if (c.write_error) return c.write_error;
  // Small buffers are gathered into records of up to 16 KiB rather than one record each.
  constexpr std::size_t kRecord = 16 * 1024;
  std::vector<unsigned char> gather;
  std::size_t total = 0;
  for (int i = 0; i < count; ++i) {
    const auto* p = static_cast<const unsigned char*>(iov[i].iov_base);
    std::size_t len = iov[i].iov_len;
    total += len;
    if (gather.size() + len <= kRecord) {
      gather.insert(gather.end(), p, p + len);
      continue;
    }
    if (!gather.empty()) {
      if (auto ec = c.encrypt(gather.data(), gather.size())) return ec;
      gather.clear();
    }
    if (len >= kRecord) {
      if (auto ec = c.encrypt(p, len)) return ec;
    } else {
      gather.assign(p, p + len);
    }
  }
  if (!gather.empty()) {
    if (auto ec = c.encrypt(gather.data(), gather.size())) return ec;
  }
  if (auto ec = c.flush()) return ec;
  return total;
}

std::error_code TlsConn::close() {
  if (!impl_) return kNotOpen;
  Impl& c = *impl_;
  if (c.closed.exchange(true, std::memory_order_acq_rel)) return errc::closed;
  // close_notify only when nobody is writing: a close() racing a write is taken as a
  // way to break the write, as in Go; waiting for the writer could take forever.
  if (c.handshake_done.load(std::memory_order_acquire) && !c.handshake_error &&
      c.write_mu.try_lock()) {
    if (!c.write_error) {
      {
        std::lock_guard lock(c.ssl_mu);
        ERR_clear_error();
        SSL_shutdown(c.ssl);
        ERR_clear_error();
      }
      (void)c.inner->set_write_deadline(deadline_after(std::chrono::seconds(5)));
      (void)c.flush();
    }
    c.write_mu.unlock();
  }
  std::error_code ec = c.inner->close();
  // Calls still inside fail at once now (the socket is closed); wait for them to leave.
  c.close_waiting.store(true);
  if (c.calls.load() != 0 && goro::detail::current_g() != nullptr)
    c.calls_done.acquire(false, goro::detail::WaitReason::other);
  return ec;
}

std::error_code TlsConn::shutdown_write() {
  if (!impl_) return kNotOpen;
  Impl& c = *impl_;
  CallScope scope(c);
  if (c.closed.load(std::memory_order_relaxed)) return errc::closed;
  // close_notify as in close(): not when someone is writing (the shutdown breaks that
  // write, as on a socket). It goes before the FIN, so the peer reads a clean end.
  std::error_code notify_error;
  if (c.handshake_done.load(std::memory_order_acquire) && !c.handshake_error &&
      c.write_mu.try_lock()) {
    if (!c.write_error) {
      {
        std::lock_guard lock(c.ssl_mu);
        ERR_clear_error();
        SSL_shutdown(c.ssl);
        ERR_clear_error();
      }
      notify_error = c.flush();
      // Writes from now on fail as on a shut socket; close() sends no second notify.
      if (!notify_error) c.write_error = detail::errno_code(EPIPE);
    }
    c.write_mu.unlock();
  }
  std::error_code ec = c.inner->shutdown_write();
  return notify_error ? notify_error : ec;
}

bool TlsConn::peer_closed() const {
  if (!impl_) return false;
  CallScope scope(*impl_);
  {
    std::lock_guard lock(impl_->ssl_mu);
    if (impl_->in_eof || (SSL_get_shutdown(impl_->ssl) & SSL_RECEIVED_SHUTDOWN) != 0) return true;
  }
  return impl_->inner->peer_closed();
}

std::error_code TlsConn::set_read_deadline(Deadline d) {
  return impl_ ? impl_->inner->set_read_deadline(d) : kNotOpen;
}
std::error_code TlsConn::set_write_deadline(Deadline d) {
  return impl_ ? impl_->inner->set_write_deadline(d) : kNotOpen;
}
std::error_code TlsConn::set_deadline(Deadline d) {
  return impl_ ? impl_->inner->set_deadline(d) : kNotOpen;
}
bool TlsConn::start_on(Wake what, const WakeCall& call) {
  return what == Wake::hangup && impl_ && impl_->inner->start_on(what, call);
}

std::chrono::steady_clock::time_point TlsConn::readable_at() const {
  return impl_ ? impl_->inner->readable_at() : std::chrono::steady_clock::time_point();
}

bool TlsConn::cancel_start(Wake what) {
  return what == Wake::hangup && impl_ && impl_->inner->cancel_start(what);
}

std::error_code TlsConn::handshake(const Context& ctx) {
  // The handshake both reads and writes.
  return with_context(*this, IoMode::both, ctx, [&] { return handshake(); });
}

Addr TlsConn::remote_addr() const { return impl_ ? impl_->inner->remote_addr() : Addr(); }
Addr TlsConn::local_addr() const { return impl_ ? impl_->inner->local_addr() : Addr(); }
Stream& TlsConn::inner() noexcept { return *impl_->inner; }

std::string TlsConn::negotiated_alpn() const {
  if (!impl_) return {};
  std::lock_guard lock(impl_->ssl_mu);
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(impl_->ssl, &data, &len);
  return data ? std::string(reinterpret_cast<const char*>(data), len) : std::string();
}

std::string TlsConn::server_name() const {
  if (!impl_) return {};
  if (!impl_->ctx->is_server()) return impl_->sent_server_name;
  std::lock_guard lock(impl_->ssl_mu);
  const char* name = SSL_get_servername(impl_->ssl, TLSEXT_NAMETYPE_host_name);
  return name ? name : "";
}

std::string TlsConn::version() const {
  if (!impl_) return {};
  std::lock_guard lock(impl_->ssl_mu);
  return SSL_get_version(impl_->ssl);
}

const TlsConnectionState* TlsConn::connection_state() const noexcept {
  if (!impl_ || !impl_->handshake_done.load(std::memory_order_acquire) || impl_->handshake_error)
    return nullptr;
  return &impl_->state;
}

}  // namespace goro::net
