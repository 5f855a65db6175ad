// Internals shared by the server (server.cpp) and its connections (server_conn.cpp):
// the state of one Server, and the connection goroutine's object, ServerConn.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include <goro/http/server.hpp>
#include <goro/net/conn.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/detail/object_pool.hpp>
#include <goro/scheduler/mutex.hpp>

#include "message_parser.hpp"

namespace goro::http {

namespace detail {
class ServerConn;
class H2Conn;

// A server's connections, linked through the ServerConns themselves: a node per
// connection in a set would sit in malloc's heap among short-lived allocations and keep
// their pages from going back (goro/scheduler/detail/object_pool.hpp). Under
// Server::Impl::mu.
class ConnList {
 public:
  void insert(ServerConn* c) noexcept;
  void erase(ServerConn* c) noexcept;
  bool empty() const noexcept { return count_ == 0; }
  std::size_t size() const noexcept { return count_; }
  // fn(c) for each connection; fn may not erase any.
  template <class F>
  void for_each(F&& fn) const;

 private:
  ServerConn* head_ = nullptr;
  std::size_t count_ = 0;
};
}  // namespace detail

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  // Every request context derives from base, cancelled when the shutdown deadline
  // passes; shutdown_started is cancelled as shutdown begins.
  Context base;
  CancelFunc cancel_base;
  Context shutdown_started;
  CancelFunc cancel_shutdown_started;

  goro::Mutex mu;  // guards the fields below, and ServerConn::h2_
  detail::ConnList conns;
  std::unordered_set<net::Listener*> listeners;
  bool shutting_down = false;
  // shutting_down, readable without mu; seq_cst against ServerConn::idle_ (set_idle).
  std::atomic<bool> closing{false};
  std::optional<goro::Chan<int>> drained;  // closed when the last connection ends

  void log_error(std::string_view message) const {
    if (options.error_log) {
      options.error_log(message);
    } else {
      std::fprintf(stderr, "goro/http: %.*s\n", static_cast<int>(message.size()), message.data());
    }
  }
};

namespace detail {

// What the server logs when a handler throws: "handler for GET /x from 1.2.3.4:5
// (HTTP/2) threw: <what>" (no protocol for HTTP/1.1).
std::string handler_threw_message(const Request& req, std::string_view protocol,
                                  const char* what);

// Where a request's context finds its server's shutdown_context().
extern const goro::ContextKey<Context> shutdown_key;

// server_stats()'s counters, in shards so that connections on different cores do not
// write one cache line: a thread takes a shard on first use, round robin. Relaxed: each
// is a statistic, ordered with nothing else.
struct alignas(64) StatsShard {
  std::atomic<std::uint64_t> opened{0}, closed{0}, bytes_in{0}, bytes_out{0};
};
StatsShard& stats_shard();

class ServerConn final : public BodySource, public ResponseSink, public goro::detail::Pooled {
 public:
  ServerConn(std::shared_ptr<Server::Impl> server, std::unique_ptr<net::Stream> stream)
      : server_(std::move(server)), stream_(std::move(stream)), x_(new_exchange()) {
    std::lock_guard lock(server_->mu);
    server_->conns.insert(this);
    stats_shard().opened.fetch_add(1, std::memory_order_relaxed);
  }

  ~ServerConn() {
    // First: the hook points at this object (it returns once no call is running).
    if (hangup_hook_set_) stream_->on_hangup(nullptr, nullptr);
    {
      std::lock_guard lock(server_->mu);
      server_->conns.erase(this);
      if (server_->shutting_down && server_->conns.empty() && server_->drained) {
        server_->drained->close();
        server_->drained.reset();
      }
    }
    stream_->close();
    publish_bytes();
    stats_shard().closed.fetch_add(1, std::memory_order_relaxed);
  }

  // What serve and resume leave behind: the connection ended (the caller deletes this
  // object), or it waits for its next request with no goroutine (this object belongs
  // to the goroutine that the stream starts when bytes arrive, which calls resume).
  enum class Served { ended, parked };
  Served serve();
  // Lets an idle connection park (see wait_idle); the caller of serve must then give
  // up the object when it parks. Off for Server::serve_conn, whose caller waits.
  void allow_parking() noexcept { may_park_ = true; }

  // Called by shutdown, under server mu.
  bool idle() const noexcept { return idle_.load(std::memory_order_seq_cst); }
  void close_stream() { stream_->close(); }
  // Shutdown found the connection busy: an HTTP/2 one says GOAWAY (server_conn_h2.cpp).
  void begin_shutdown();

 private:
  // Whether the connection is to speak HTTP/2: ALPN "h2" agreed over TLS, or the h2c
  // client preface read (and left in parser_) on a plain one (server_conn_h2.cpp).
  bool wants_http2();
  void serve_http2();
  // What one request/response exchange needs, held only while the connection is not
  // parked: an idle connection gives it all back.
  struct Exchange {
    MessageParser parser;
    Request request;
    ResponseWriter writer;
    std::string scratch;  // error responses
    std::string out;      // responses batched for one write (pipelining)
  };
  std::unique_ptr<Exchange> new_exchange() const;
  enum class Head { ready, ended, parked };
  Served serve_requests(bool first, bool resumed);
  // The goroutine the stream starts for a parked connection.
  static void resume(void* self);
  bool set_idle(bool idle);
  Head read_head(bool first, bool resumed);
  // nullopt: parked.
  std::optional<Result<std::size_t>> wait_idle();
  void serve_request();
  void handler_failed(const char* what);
  void respond_error(int status, std::string_view message, bool head_known = false);
  // Builds the server's own reply into scratch_, through the on_error_reply hook.
  void build_error(int status, std::string_view message, bool head_known);
  void linger_close();
  bool drain();
  std::error_code flush_out();
  void set_read_deadline(net::Deadline d);
  void set_write_deadline(net::Deadline d);
  std::error_code body_failed(const ParseError& error);

  Result<std::size_t> read_body(void* buf, std::size_t len) override;
  bool client_gone() override;
  void interrupt_reads() override;
  Context request_context() override;
  net::Stream* take_over(std::string& early) override;
  // The stream's hang-up hook: cancels the current request's context.
  static void hung_up(void* self);
  void end_request_context();
  void publish_bytes();
  std::error_code write_out(const iovec* iov, int count) override;
  bool reusable() override;

  std::shared_ptr<Server::Impl> server_;
  std::unique_ptr<net::Stream> stream_;
  std::string remote_;
  std::unique_ptr<Exchange> x_;  // null only while parked

  std::atomic<bool> idle_{true};  // see set_idle
  // The HTTP/2 connection being served, if any; guarded by server_->mu.
  H2Conn* h2_ = nullptr;
  bool keep_going_ = true;
  bool continue_sent_ = false;
  bool close_after_ = false;  // the connection cannot carry another request
  bool handler_done_ = false;
  bool finishing_ = false;  // writes now end a response; they may be batched
  bool taken_over_ = false;  // the handler took the connection (take_over)
  bool may_park_ = false;    // allow_parking
  // The deadlines last set on the stream (max: not set yet, whatever the stream came
  // with): a request that changes neither (no body or write timeout configured) makes
  // no call.
  net::Deadline read_deadline_ = net::Deadline::max();
  net::Deadline write_deadline_ = net::Deadline::max();
  std::atomic<bool> reads_interrupted_{false};  // interrupt_reads set a deadline of its own
  bool peer_gone_ = false;
  std::error_code body_error_;
  // Bytes read and written since they were last added to server_stats().
  std::uint64_t bytes_in_ = 0;
  std::uint64_t bytes_out_ = 0;

  // The current request's context, made on the handler's first Request::context().
  std::mutex ctx_mu_;         // guards request_cancel_ and hung_up_ (the hook takes it)
  CancelFunc request_cancel_;  // empty while no request context is live
  bool hung_up_ = false;       // the hook has run: the client is gone
  bool request_ctx_made_ = false;  // the connection goroutine's own
  bool hangup_hook_set_ = false;

  // Server::Impl::conns (mu).
  friend class ConnList;
  ServerConn* prev_ = nullptr;
  ServerConn* next_ = nullptr;
};

inline void ConnList::insert(ServerConn* c) noexcept {
  c->prev_ = nullptr;
  c->next_ = head_;
  if (head_ != nullptr) head_->prev_ = c;
  head_ = c;
  ++count_;
}

inline void ConnList::erase(ServerConn* c) noexcept {
  (c->prev_ != nullptr ? c->prev_->next_ : head_) = c->next_;
  if (c->next_ != nullptr) c->next_->prev_ = c->prev_;
  c->prev_ = c->next_ = nullptr;
  --count_;
}

template <class F>
void ConnList::for_each(F&& fn) const {
  for (ServerConn* c = head_; c != nullptr; c = c->next_) fn(c);
}

}  // namespace detail
}  // namespace goro::http
