// Connection: one accepted connection, whatever protocol it speaks — the connection core
// of the server (core/server.cpp has the design). Its engines, h1/ and h2/, frame the
// bytes; the runner (core/exchange.hpp) serves each request they read.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <goro/base/object_pool.hpp>
#include <goro/http/server.hpp>
#include <goro/net/stream.hpp>

#include "core/server_impl.hpp"

namespace goro::http::detail {

class Connection;

// A counted reference to a Connection. The goroutine serving it holds one, and so does
// each netpoller wake-up armed for it (a parked connection's, a hang-up's): whichever
// drops the last one frees it, and with it the connection leaves the server's list and
// its stream closes. So no goroutine ever touches a connection that is gone, however the
// wake-ups and the serving goroutine interleave.
class ConnRef {
 public:
  ConnRef() noexcept = default;
  ConnRef(const ConnRef& o) noexcept;
  ConnRef(ConnRef&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  ConnRef& operator=(ConnRef o) noexcept {
    std::swap(c_, o.c_);
    return *this;
  }
  ~ConnRef();

  Connection* get() const noexcept { return c_; }
  Connection* operator->() const noexcept { return c_; }
  Connection& operator*() const noexcept { return *c_; }
  explicit operator bool() const noexcept { return c_ != nullptr; }

  // The reference as a pointer, for a wake-up's argument; adopt() makes it a ConnRef again.
  Connection* release() noexcept {
    Connection* c = c_;
    c_ = nullptr;
    return c;
  }
  static ConnRef adopt(Connection* c) noexcept {
    ConnRef r;
    r.c_ = c;
    return r;
  }

 private:
  Connection* c_ = nullptr;
};

// The deleter of a taken-over connection's TakenConnection::owner: it holds a reference
// to the connection, which the owner's last copy drops.
struct TakenOwner {
  ConnRef conn;
  void operator()(net::Stream*) const noexcept {}
};
// The connection a TakenConnection::owner keeps, or nullptr (an owner made elsewhere).
inline Connection* taken_connection(const std::shared_ptr<net::Stream>& owner) noexcept {
  const TakenOwner* d = std::get_deleter<TakenOwner>(owner);
  return d != nullptr ? d->conn.get() : nullptr;
}

// What serves a connection once its protocol is chosen (h1/conn.cpp, h2/conn.cpp, a
// WebSocket that serve() serves), as the connection sees it: told when a shutdown finds
// it busy.
class Engine {
 public:
  // HTTP/2 sends GOAWAY; HTTP/1.1 has nothing to do (it reads Server::Impl::closing at
  // the end of each response). Called under Server::Impl::mu; must not block.
  virtual void begin_shutdown() = 0;

 protected:
  ~Engine() = default;
};

class Connection final : public goro::Pooled {
 public:
  // A new connection of server on stream, in the server's list. tls: the stream is a
  // net::TlsConn (its ALPN chooses the protocol). may_park: whether an idle connection
  // may wait with no goroutine (not under Server::serve_conn, whose caller waits for the
  // connection to end).
  static ConnRef open(std::shared_ptr<Server::Impl> server, std::unique_ptr<net::Stream> stream,
                      bool tls, bool may_park);
  // Chooses the protocol (the table in core/server.cpp) and serves the connection on the calling
  // goroutine until it ends or its engine parks it.
  static void serve(ConnRef self);

  Server::Impl& server() noexcept { return *server_; }
  const ServerOptions& options() const noexcept { return server_->options; }
  net::Stream& stream() noexcept { return *stream_; }
  // "ip:port" of the client.
  std::string_view remote_addr() const noexcept { return remote_; }
  // The TLS state once the handshake is done; nullptr on plaintext (core/server.cpp).
  const net::TlsConnectionState* tls_state() const noexcept;
  // A new reference, for what keeps the connection past its serving goroutine (a
  // taken-over connection's TakenConnection::owner).
  ConnRef share() noexcept;
  // Whether the connection may go on without a goroutine serving it: false under
  // Server::serve_conn, whose caller waits for the connection to end.
  bool may_park() const noexcept { return may_park_; }

  // --- idle state, which shutdown reads (see core/server.cpp) ---
  void set_idle(bool idle) noexcept { idle_.store(idle, std::memory_order_seq_cst); }
  // The first bytes of a request came: no longer idle. False when a shutdown under way
  // may have closed this connection while it was idle (no grace, or it had been parked:
  // resumed), so that the request, whose answer could not be written, is not served.
  bool set_busy(bool resumed) noexcept;
  bool idle() const noexcept { return idle_.load(std::memory_order_seq_cst); }
  // Whether the server's shutdown has begun (seq_cst: read after set_idle or parking).
  bool closing() const noexcept;
  // Sets the read deadline of a wait for the next request: d, or the end of shutdown's
  // grace for idle connections when a shutdown is under way and that comes first. A
  // shutdown that begins later shortens the wait itself (Server::shutdown).
  void set_idle_deadline(net::Deadline d);
  // Whether the connection waits with no goroutine (park_until_readable); shutdown
  // closes such a connection at once.
  bool parked() const noexcept { return parked_.load(std::memory_order_seq_cst); }
  // The engine serving now (nullptr: none yet, or parked); under Server::Impl::mu.
  void set_engine(Engine* engine);
  // Shutdown: an idle connection's stream is closed, a busy one's engine told. Under
  // Server::Impl::mu.
  void close_stream() { stream_->close(); }
  void begin_shutdown() {
    if (engine_ != nullptr) engine_->begin_shutdown();
  }

  // --- how long clients leave this connection idle between requests (HTTP/1.1) ---
  // An idle wait for the next request began at `at` / ended with that request's first
  // bytes at `at` (a wait that parked in between counts whole). idle_release() is how
  // long the next wait keeps its goroutine before parking: 3 times the longest recent
  // gap (a maximum that decays by an eighth a request), within [kIdleReleaseMin,
  // kIdleReleaseMax]; kIdleReleaseMin while no gap is known, and when the last one was
  // kIdleReleaseMax or longer (the connection comes back from quiet, and is likely to
  // go quiet again). A connection in a request loop, even a slow one, so never pays for
  // a park and a new goroutine between its requests, and one that goes quiet gives its
  // memory back soon: after its first request, or after a loop of quick requests.
  static constexpr std::chrono::nanoseconds kIdleReleaseMin = std::chrono::milliseconds(30);
  static constexpr std::chrono::nanoseconds kIdleReleaseMax = std::chrono::milliseconds(400);
  void idle_wait_began(std::chrono::steady_clock::time_point at) noexcept { idle_since_ = at; }
  void idle_wait_ended(std::chrono::steady_clock::time_point at) noexcept;
  std::chrono::nanoseconds idle_release() const noexcept;

  // --- waiting for the next request with no goroutine ---
  // Arranges for resume to start on a new goroutine, with the reference self gives up,
  // once the stream has something to read (bytes, its end, an error), its read deadline
  // passes or shutdown closes it; resume serves on and, like a protocol's serve, leaves
  // its reference empty if it parks again. False, with self kept, when the connection may
  // not park or the stream cannot wait that way (TLS; bytes may be waiting already): the
  // caller reads as usual; and when a shutdown is under way (closing()): the caller ends
  // the connection.
  static bool park_until_readable(ConnRef& self, void (*resume)(ConnRef& self));

  // --- the request being served (HTTP/1.1: one at a time) ---
  // A new context for it, under the server's base: cancelled when the client hangs up
  // (the netpoller sees it, no read needed), at the shutdown deadline, and by
  // end_request_context.
  Context request_context();
  void end_request_context();
  // Whether the client is known to have gone (a hang-up seen, a failed write or read),
  // else a poll of the stream that does not wait.
  bool client_gone();
  void note_peer_gone() noexcept { peer_gone_ = true; }

  // Bytes read and written, and requests served, added to server_stats() now and then
  // (publish_bytes).
  void count_in(std::size_t n) noexcept { bytes_in_ += n; }
  void count_out(std::size_t n) noexcept { bytes_out_ += n; }
  void count_request() noexcept { ++requests_; }
  void publish_bytes();

 private:
  friend class ConnRef;
  friend class ConnList;
  Connection(std::shared_ptr<Server::Impl> server, std::unique_ptr<net::Stream> stream, bool tls,
             bool may_park);
  ~Connection();
  // The serving goroutine is done with the connection: takes back an armed hang-up
  // start (its reference with it).
  void done_serving();
  static void resumed(void* self);
  static void hung_up(void* self);

  std::atomic<int> refs_{1};
  std::shared_ptr<Server::Impl> server_;
  std::unique_ptr<net::Stream> stream_;
  std::string remote_;
  std::atomic<bool> idle_{true};  // see set_idle
  std::atomic<bool> parked_{false};  // see parked
  const bool tls_;
  const bool may_park_;
  bool peer_gone_ = false;
  Engine* engine_ = nullptr;           // guarded by server_->mu
  void (*resume_)(ConnRef&) = nullptr;  // what park_until_readable starts
  std::uint64_t bytes_in_ = 0;
  std::uint64_t bytes_out_ = 0;
  std::uint64_t requests_ = 0;
  std::chrono::steady_clock::time_point idle_since_{};  // see idle_wait_began; zero: none
  std::int64_t last_gap_ns_ = -1;                       // -1: none yet
  std::int64_t peak_gap_ns_ = 0;                        // the decaying maximum
  // The statistics shard of the thread that accepted the connection: any shard will do,
  // and keeping one spares each request a look at the thread.
  StatsShard* shard_;

  // The current request's context, and the hang-up start that cancels it.
  std::mutex ctx_mu_;          // guards request_cancel_ and hung_up_ (hung_up takes it)
  CancelFunc request_cancel_;  // empty while no request context is live
  bool hung_up_ = false;       // hung_up has run: the client is gone
  bool hangup_armed_ = false;  // the serving goroutine's: a hang-up start holds a reference

  // Server::Impl::conns (mu).
  Connection* prev_ = nullptr;
  Connection* next_ = nullptr;
};

inline ConnRef::ConnRef(const ConnRef& o) noexcept : c_(o.c_) {
  if (c_ != nullptr) c_->refs_.fetch_add(1, std::memory_order_relaxed);
}

inline ConnRef Connection::share() noexcept {
  refs_.fetch_add(1, std::memory_order_relaxed);
  return ConnRef::adopt(this);
}

inline ConnRef::~ConnRef() {
  // acq_rel: the last one sees every other holder's writes before it frees.
  if (c_ != nullptr && c_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete c_;
}

inline void ConnList::insert(Connection* c) noexcept {
  c->prev_ = nullptr;
  c->next_ = head_;
  if (head_ != nullptr) head_->prev_ = c;
  head_ = c;
  ++count_;
}

inline void ConnList::erase(Connection* c) noexcept {
  (c->prev_ != nullptr ? c->prev_->next_ : head_) = c->next_;
  if (c->next_ != nullptr) c->next_->prev_ = c->prev_;
  c->prev_ = c->next_ = nullptr;
  --count_;
}

template <class F>
void ConnList::for_each(F&& fn) const {
  for (Connection* c = head_; c != nullptr; c = c->next_) fn(c);
}

}  // namespace goro::http::detail
