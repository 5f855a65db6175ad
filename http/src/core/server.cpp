// The server's connection core: the Server (its accept loops, shutdown and the
// listen-and-serve helpers) and each Connection it serves, whatever protocol that speaks.
//
// Accept → protocol → serve. The accept loop makes a Connection
// for each stream and starts a goroutine on it. The goroutine chooses the protocol from
// kProtocols, as Go's server does with TLSNextProto: over TLS the one ALPN agreed (the
// handshake runs here, bounded by read_header_timeout), on a plain connection with h2c
// on the one whose preface the first bytes are, else HTTP/1.1. The protocol's engine
// (h1/conn.cpp, h2/conn.cpp) then frames bytes into requests and responses and hands
// each request to the one runner of the server's rules (core/exchange.hpp).
//
// Lifetime. A Connection is counted (ConnRef): the goroutine serving it holds one
// reference, and so does each netpoller wake-up armed for it. An engine that parks an
// idle connection gives its goroutine's reference to the wake-up and returns; the
// goroutine the wake-up starts takes it back. The last reference to go frees the
// connection: it leaves the server's list and its stream closes. No comment has to say
// "not a member may be touched now": whoever touches it holds a reference.
//
// Idle or active. A connection alternates between two states, which graceful shutdown
// reads:
//   idle    waiting for the first byte of a request (the first one, or the next one on a
//           keep-alive connection); shutdown closes such a connection at once if it waits
//           with no goroutine (parked: idle for a while), else cuts its wait to
//           ServerOptions::shutdown_idle_grace: a client in a request loop may have sent
//           its next request already, which is then served with "Connection: close";
//   active  reading a head, running the handler, writing and draining; shutdown lets it
//           finish (HTTP/1.1 says "Connection: close", HTTP/2 sends GOAWAY through
//           begin_shutdown), and then it ends.
// The state is a flag the connection stores before it reads Server::Impl::closing
// (set_idle_deadline, park_until_readable), and shutdown stores closing before it reads
// the flags (all seq_cst, so at least one side sees the other): a connection that turns
// idle or parks while a shutdown is under way bounds its wait by the grace or ends, so no
// connection is left waiting after shutdown has looked at it. No lock: this happens
// twice a request.
//
// Waiting with no goroutine. An HTTP/1.1 connection idle for a second gives back its
// exchange and parks: park_until_readable arms the stream's readable wake-up
// (net::Stream::start_on, the netpoller's one call up into the layers above) and the
// goroutine returns, so an idle connection holds no goroutine and no stack, only this
// object and its socket. Freed goroutines' stacks and malloc's free memory then go back
// to the kernel (goro::return_freed_memory_soon).
//
// The client leaving. A request's context is cancelled when the client hangs up while
// its handler runs, with nobody reading the socket: the first request_context() arms the
// stream's hang-up wake-up, which starts hung_up on a goroutine of its own when the
// netpoller sees the connection closed or reset. It stays armed until the connection
// ends (done_serving takes it back).
#include <goro/http/server.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <tuple>

#include <goro/http/errors.hpp>
#include <goro/net/conn.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/thread_local.hpp>

#include "core/conn.hpp"
#include "h1/conn.hpp"
#include "h2/conn.hpp"

namespace goro::http {

Server::Server(ServerOptions options, Handler handler) : impl_(std::make_shared<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  std::tie(impl_->shutdown_started, impl_->cancel_shutdown_started) =
      goro::with_cancel(goro::background());
  std::tie(impl_->drain_started, impl_->cancel_drain_started) =
      goro::with_cancel(goro::background());
  std::tie(impl_->base, impl_->cancel_base) = goro::with_cancel(goro::with_value(
      goro::with_value(impl_->options.base_context, detail::shutdown_key,
                       impl_->shutdown_started),
      detail::drain_key, impl_->drain_started));
}

Context Server::shutdown_context() const { return impl_->shutdown_started; }
Context Server::drain_context() const { return impl_->drain_started; }

void Server::drain() {
  impl_->draining.store(true, std::memory_order_relaxed);
  impl_->cancel_drain_started();
}

Server::~Server() = default;

namespace {

void start_conn(const std::shared_ptr<Server::Impl>& impl, std::unique_ptr<net::Stream> stream,
                bool tls) {
  detail::ConnRef conn = detail::Connection::open(impl, std::move(stream), tls, true);
  goro::go(GoOptions{.stack_size = impl->options.stack_size, .name = "http conn"},
           [conn = std::move(conn)]() mutable { detail::Connection::serve(std::move(conn)); });
}

// Errors accept() may return that concern one connection, not the listener.
bool transient_accept_error(std::error_code ec) {
  return ec == std::errc::connection_aborted || ec == std::errc::connection_reset ||
         ec == std::errc::protocol_error || ec == std::errc::interrupted;
}

// Waits while the server has max connections open; false once it is shutting down.
// Several listeners of one server each check before their accept, so together they may
// pass the limit by one connection per listener beyond the first, for a moment.
bool wait_for_room(Server::Impl& impl, std::size_t max) {
  std::unique_lock lock(impl.mu);
  if (impl.conns.size() >= max && !impl.shutting_down) {
    detail::stats_shard().accept_waits.fetch_add(1, std::memory_order_relaxed);
    impl.room.wait(lock, [&] { return impl.conns.size() < max || impl.shutting_down; });
  }
  return !impl.shutting_down;
}

template <class L, class Wrap>
std::error_code accept_loop(const std::shared_ptr<Server::Impl>& impl, L& listener,
                            net::Listener& inner, bool tls, Wrap wrap) {
  {
    std::lock_guard lock(impl->mu);
    if (impl->shutting_down) return errc::server_closed;
    impl->listeners.insert(&inner);
    if (impl->listeners.size() == 1) detail::connection_limit.fetch_add(impl->options.max_connections);
  }
  std::error_code result;
  const std::size_t max = impl->options.max_connections;
  for (;;) {
    if (max != 0 && !wait_for_room(*impl, max)) {
      result = errc::server_closed;
      break;
    }
    auto conn = listener.accept();
    if (conn) {
      start_conn(impl, wrap(std::move(*conn)), tls);
      continue;
    }
    if (transient_accept_error(conn.error())) continue;
    std::lock_guard lock(impl->mu);
    result = impl->shutting_down ? make_error_code(errc::server_closed) : conn.error();
    break;
  }
  std::lock_guard lock(impl->mu);
  impl->listeners.erase(&inner);
  if (impl->listeners.empty()) detail::connection_limit.fetch_sub(impl->options.max_connections);
  return result;
}

}  // namespace

std::error_code Server::serve(net::Listener& listener) {
  return accept_loop(impl_, listener, listener, false,
                     [](net::Conn&& c) -> std::unique_ptr<net::Stream> {
                       return std::make_unique<net::Conn>(std::move(c));
                     });
}

std::error_code Server::serve(net::TlsListener& listener) {
  return accept_loop(impl_, listener, listener.inner(), true,
                     [](net::TlsConn&& c) -> std::unique_ptr<net::Stream> {
                       return std::make_unique<net::TlsConn>(std::move(c));
                     });
}

void Server::serve_conn(std::unique_ptr<net::Stream> stream) {
  detail::Connection::serve(detail::Connection::open(impl_, std::move(stream), false, false));
}

void Server::serve_conn(std::unique_ptr<net::TlsConn> stream) {
  detail::Connection::serve(detail::Connection::open(impl_, std::move(stream), true, false));
}

std::error_code Server::shutdown(std::chrono::steady_clock::time_point deadline) {
  goro::Chan<int> drained;
  drain();
  impl_->cancel_shutdown_started();
  {
    std::lock_guard lock(impl_->mu);
    const std::chrono::nanoseconds grace = impl_->options.shutdown_idle_grace;
    const auto grace_end = std::chrono::steady_clock::now() + grace;
    impl_->idle_grace_end.store(grace_end, std::memory_order_relaxed);
    impl_->shutting_down = true;
    impl_->closing.store(true, std::memory_order_seq_cst);
    for (net::Listener* l : impl_->listeners) l->close();
    impl_->room.broadcast();
    // An idle connection with its goroutine may have a request on the way: its wait is
    // cut to the grace, and a request that comes meanwhile is served with "Connection:
    // close". One with no goroutine has been idle a while: it closes now. (Either side
    // of the seq_cst closing/parked_ pair sees the other: a connection parking now sees
    // closing and ends.)
    impl_->conns.for_each([&](detail::Connection* c) {
      if (!c->idle()) {
        c->begin_shutdown();
      } else if (grace.count() <= 0 || c->parked()) {
        c->close_stream();
      } else {
        c->stream().set_read_deadline(grace_end);
      }
    });
    if (impl_->conns.empty()) return {};
    impl_->drained = drained;
  }
  auto left = deadline - std::chrono::steady_clock::now();
  if (left > std::chrono::nanoseconds::zero() &&
      goro::select(goro::recv_case(drained), goro::timeout_case(left)) == 0) {
    return {};
  }
  // Out of time: the handlers still running learn it through their contexts, and their
  // connections close.
  impl_->cancel_base();
  std::lock_guard lock(impl_->mu);
  if (impl_->conns.empty()) return {};
  impl_->conns.for_each([](detail::Connection* c) { c->close_stream(); });
  return errc::shutdown_timeout;
}

Context shutdown_context(Request& req) {
  const Context* started = req.context().value(detail::shutdown_key);
  return started != nullptr ? *started : Context();
}

Context drain_context(Request& req) {
  const Context* started = req.context().value(detail::drain_key);
  return started != nullptr ? *started : Context();
}

Readiness Server::readiness(const Context& ctx) const { return detail::readiness(*impl_, ctx); }

std::size_t Server::connection_count() const {
  return impl_->conn_count.load(std::memory_order_relaxed);
}

std::error_code listen_and_serve(std::string_view address, Handler handler) {
  Result<net::Listener> listener = net::listen("tcp", address);
  if (!listener) return listener.error();
  Server server(std::move(handler));
  return server.serve(*listener);
}

std::error_code listen_and_serve_tls(std::string_view address, std::string_view cert_file,
                                     std::string_view key_file, Handler handler) {
  net::TlsConfig config;
  config.certificates.push_back({std::string(cert_file), std::string(key_file)});
  config.alpn = {"h2", "http/1.1"};
  Result<std::shared_ptr<net::TlsContext>> context = net::TlsContext::server(config);
  if (!context) return context.error();
  Result<net::TlsListener> listener = net::tls_listen("tcp", address, *context);
  if (!listener) return listener.error();
  Server server(std::move(handler));
  return server.serve(*listener);
}

}  // namespace goro::http

namespace goro::http::detail {

const goro::ContextKey<Context> shutdown_key{"goro.http.shutdown"};
const goro::ContextKey<Context> drain_key{"goro.http.drain"};

Readiness readiness(const Server::Impl& server, const Context& ctx) {
  Readiness r;
  bool accepting;
  {
    std::lock_guard lock(server.mu);
    // Serving: an accept loop runs, or a connection given to serve_conn is open.
    accepting = (!server.listeners.empty() || !server.conns.empty()) && !server.shutting_down;
  }
  const bool draining = server.draining.load(std::memory_order_relaxed);
  r.ready = accepting && !draining;
  r.lines.push_back(accepting ? "[+]serving ok" : "[-]serving failed: not accepting connections");
  r.lines.push_back(draining ? "[-]draining failed: the server is shutting down"
                             : "[+]draining ok");
  for (const ReadinessCheck& c : server.options.readiness_checks) {
    goro::Error e = c.check ? c.check(ctx) : goro::Error();
    if (e) {
      r.ready = false;
      r.lines.push_back("[-]" + c.name + " failed: " + e.what());
    } else {
      r.lines.push_back("[+]" + c.name + " ok");
    }
  }
  return r;
}

namespace {

constexpr unsigned kStatsShards = 16;
StatsShard stats_shards[kStatsShards];
std::atomic<unsigned> next_stats_shard{0};

// A shard is shared, atomic, and never goes away: the pointer may be used after the scope.
constinit goro::ThreadLocal thread_stats_shard = [] {
  return &stats_shards[next_stats_shard.fetch_add(1, std::memory_order_relaxed) % kStatsShards];
};

net::Deadline deadline_in(std::chrono::nanoseconds d) {
  return d.count() > 0 ? net::deadline_after(d) : net::no_deadline;
}

// The protocols a connection may speak, and how each is chosen.
struct Protocol {
  std::string_view alpn;  // the ALPN name that chooses it over TLS
  // On a plain connection, the first bytes that choose it ("": none). The engine checks
  // the rest of its preface itself, and answers one that goes wrong in its own terms.
  std::string_view preface;
  bool (*enabled)(const ServerOptions& o, bool tls);
  // Serves the connection from its first bytes (early: read already) until it ends, or
  // parks it (then self is left empty).
  void (*serve)(ConnRef& self, std::string_view early);
};

// The client preface's request line, which no HTTP/1.1 client sends: a connection that
// begins with it is HTTP/2, and a preface that goes wrong after it gets GOAWAY
// (PROTOCOL_ERROR), as RFC 9113 3.4 has it, not an HTTP/1.1 400.
constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n";

constexpr Protocol kProtocols[] = {
    {"h2", kH2Preface,
     [](const ServerOptions& o, bool tls) { return o.enable_http2 && (tls || o.enable_h2c); },
     h2::serve},
    // The default: any connection no other protocol took.
    {"http/1.1", "", [](const ServerOptions&, bool) { return true; }, h1::serve},
};

const Protocol& http1() { return kProtocols[std::size(kProtocols) - 1]; }

// Over TLS: the handshake, then the protocol its ALPN agreed. nullptr when the
// handshake failed.
const Protocol* choose_over_tls(Connection& c, net::TlsConn& tls) {
  const ServerOptions& o = c.options();
  c.stream().set_read_deadline(deadline_in(o.read_header_timeout));
  c.stream().set_write_deadline(deadline_in(o.read_header_timeout));
  if (tls.handshake()) return nullptr;
  const std::string agreed = tls.negotiated_alpn();
  for (const Protocol& p : kProtocols) {
    if (p.alpn == agreed && p.enabled(o, true)) return &p;
  }
  return &http1();
}

// On a plain connection: reads until the first bytes say which preface they are, if
// any. nullptr when the connection ended first.
const Protocol* choose_plain(Connection& c, std::string& early) {
  const ServerOptions& o = c.options();
  std::size_t longest = 0;
  for (const Protocol& p : kProtocols) {
    if (!p.preface.empty() && p.enabled(o, false)) longest = std::max(longest, p.preface.size());
  }
  if (longest == 0) return &http1();
  c.stream().set_read_deadline(deadline_in(o.read_header_timeout));
  early.resize(std::max(o.read_buffer_size, longest));
  std::size_t got = 0;
  for (;;) {
    bool undecided = false;
    for (const Protocol& p : kProtocols) {
      if (p.preface.empty() || !p.enabled(o, false)) continue;
      const std::size_t k = std::min(got, p.preface.size());
      if (std::string_view(early.data(), k) != p.preface.substr(0, k)) continue;
      if (k == p.preface.size()) {
        early.resize(got);
        return &p;
      }
      undecided = true;
    }
    if (!undecided) break;
    Result<std::size_t> n = c.stream().read(early.data() + got, early.size() - got);
    if (!n || *n == 0) return nullptr;
    c.count_in(*n);
    got += *n;
  }
  early.resize(got);
  return &http1();
}

}  // namespace

StatsShard& stats_shard() { return **thread_stats_shard.use(); }

std::atomic<std::uint64_t> connection_limit{0};

Connection::Connection(std::shared_ptr<Server::Impl> server, std::unique_ptr<net::Stream> stream,
                       bool tls, bool may_park)
    : server_(std::move(server)),
      stream_(std::move(stream)),
      tls_(tls),
      may_park_(may_park),
      shard_(&stats_shard()) {
  remote_ = stream_->remote_addr().to_string();
  std::lock_guard lock(server_->mu);
  server_->conns.insert(this);
  server_->conn_count.store(server_->conns.size(), std::memory_order_relaxed);
  shard_->opened.fetch_add(1, std::memory_order_relaxed);
}

Connection::~Connection() {
  {
    std::lock_guard lock(server_->mu);
    server_->conns.erase(this);
    server_->conn_count.store(server_->conns.size(), std::memory_order_relaxed);
    if (server_->options.max_connections != 0 &&
        server_->conns.size() < server_->options.max_connections) {
      server_->room.signal();
    }
    if (server_->shutting_down && server_->conns.empty() && server_->drained) {
      server_->drained->close();
      server_->drained.reset();
    }
  }
  stream_->close();
  publish_bytes();
  shard_->closed.fetch_add(1, std::memory_order_relaxed);
}

ConnRef Connection::open(std::shared_ptr<Server::Impl> server, std::unique_ptr<net::Stream> stream,
                         bool tls, bool may_park) {
  return ConnRef::adopt(new Connection(std::move(server), std::move(stream), tls, may_park));
}

void Connection::serve(ConnRef self) {
  Connection& c = *self;
  std::string early;
  const Protocol* protocol = nullptr;
  if (c.tls_) {
    protocol = choose_over_tls(c, static_cast<net::TlsConn&>(*c.stream_));
  } else {
    protocol = choose_plain(c, early);
  }
  if (protocol != nullptr) protocol->serve(self, early);
  if (self) self->done_serving();
}

bool Connection::closing() const noexcept {
  return server_->closing.load(std::memory_order_seq_cst);
}

bool Connection::set_busy(bool resumed) noexcept {
  set_idle(false);
  if (!closing()) return true;
  return server_->options.shutdown_idle_grace.count() > 0 && !resumed;
}

void Connection::idle_wait_ended(std::chrono::steady_clock::time_point at) noexcept {
  if (idle_since_ == std::chrono::steady_clock::time_point()) return;
  const std::int64_t gap = std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::nanoseconds>(at - idle_since_).count());
  idle_since_ = {};
  last_gap_ns_ = gap;
  peak_gap_ns_ = std::max(gap, peak_gap_ns_ - peak_gap_ns_ / 8);
}

std::chrono::nanoseconds Connection::idle_release() const noexcept {
  // Unknown, or the connection comes back from a wait longer than any worth its memory:
  // it is likely to go quiet again.
  if (last_gap_ns_ < 0 || std::chrono::nanoseconds(last_gap_ns_) >= kIdleReleaseMax)
    return kIdleReleaseMin;
  return std::clamp(std::chrono::nanoseconds(peak_gap_ns_) * 3, kIdleReleaseMin,
                    kIdleReleaseMax);
}

void Connection::set_idle_deadline(net::Deadline d) {
  stream_->set_read_deadline(d);
  if (!closing()) return;
  const net::Deadline grace_end = server_->idle_grace_end.load(std::memory_order_relaxed);
  if (d == net::no_deadline || grace_end < d) stream_->set_read_deadline(grace_end);
}

void Connection::set_engine(Engine* engine) {
  std::lock_guard lock(server_->mu);
  engine_ = engine;
  if (engine != nullptr && server_->shutting_down) engine->begin_shutdown();
}

bool Connection::park_until_readable(ConnRef& self, void (*resume)(ConnRef& self)) {
  Connection& c = *self;
  if (!c.may_park_) return false;
  // Against Server::shutdown: it sets closing, then reads parked_.
  c.parked_.store(true, std::memory_order_seq_cst);
  if (c.closing()) {
    c.parked_.store(false, std::memory_order_relaxed);
    return false;
  }
  c.resume_ = resume;
  Connection* arg = self.release();
  if (c.stream_->start_on(net::Wake::readable, {&Connection::resumed, arg,
                                                c.server_->options.stack_size, "http conn"})) {
    return true;
  }
  self = ConnRef::adopt(arg);
  c.parked_.store(false, std::memory_order_seq_cst);
  return false;
}

void Connection::resumed(void* arg) {
  ConnRef self = ConnRef::adopt(static_cast<Connection*>(arg));
  self->parked_.store(false, std::memory_order_seq_cst);
  self->resume_(self);
  if (self) self->done_serving();
}

void Connection::done_serving() {
  if (hangup_armed_ && stream_->cancel_start(net::Wake::hangup)) {
    hangup_armed_ = false;
    ConnRef::adopt(this);  // the reference the start held
  }
}

Context Connection::request_context() {
  auto [ctx, cancel] = goro::with_cancel(server_->base);
  // Whether a start armed before this request watches the socket: it has then seen every
  // hang-up the netpoller reported (hung_up_), and reports any later one.
  const bool watched = hangup_armed_;
  if (!hangup_armed_) {
    refs_.fetch_add(1, std::memory_order_relaxed);  // for the start
    hangup_armed_ = stream_->start_on(net::Wake::hangup, {&Connection::hung_up, this, 0,
                                                          "http hang-up"});
    if (!hangup_armed_) ConnRef::adopt(this);
  }
  bool gone;
  {
    std::lock_guard lock(ctx_mu_);
    request_cancel_ = cancel;
    gone = hung_up_;
  }
  // A start armed just now, or none at all, may miss a hang-up that came before it:
  // peer_closed polls the socket once. A start that was watching already needs no poll.
  if (gone || (!watched && client_gone())) cancel();
  return ctx;
}

void Connection::hung_up(void* arg) {
  ConnRef self = ConnRef::adopt(static_cast<Connection*>(arg));
  CancelFunc cancel;
  {
    std::lock_guard lock(self->ctx_mu_);
    self->hung_up_ = true;
    cancel = self->request_cancel_;
  }
  cancel();
}

// The handler returned: its context ends (Go cancels it once ServeHTTP returns).
void Connection::end_request_context() {
  CancelFunc cancel;
  {
    std::lock_guard lock(ctx_mu_);
    cancel = std::move(request_cancel_);
    request_cancel_ = CancelFunc();
  }
  cancel();
}

const net::TlsConnectionState* Connection::tls_state() const noexcept {
  return tls_ ? static_cast<const net::TlsConn&>(*stream_).connection_state() : nullptr;
}

bool Connection::client_gone() {
  if (!peer_gone_ && stream_->peer_closed()) peer_gone_ = true;
  return peer_gone_;
}

void Connection::publish_bytes() {
  if (bytes_in_ == 0 && bytes_out_ == 0 && requests_ == 0) return;
  shard_->bytes_in.fetch_add(bytes_in_, std::memory_order_relaxed);
  shard_->bytes_out.fetch_add(bytes_out_, std::memory_order_relaxed);
  if (requests_ != 0) shard_->requests.fetch_add(requests_, std::memory_order_relaxed);
  bytes_in_ = bytes_out_ = requests_ = 0;
}

}  // namespace goro::http::detail

namespace goro::http {

ServerStats server_stats() {
  ServerStats s;
  std::uint64_t closed = 0;
  for (const detail::StatsShard& shard : detail::stats_shards) {
    s.connections_total += shard.opened.load(std::memory_order_relaxed);
    closed += shard.closed.load(std::memory_order_relaxed);
    s.bytes_received += shard.bytes_in.load(std::memory_order_relaxed);
    s.bytes_sent += shard.bytes_out.load(std::memory_order_relaxed);
    s.requests_total += shard.requests.load(std::memory_order_relaxed);
    s.accept_waits += shard.accept_waits.load(std::memory_order_relaxed);
    s.requests_shed += shard.shed.load(std::memory_order_relaxed);
  }
  s.connections_open = s.connections_total > closed ? s.connections_total - closed : 0;
  s.max_connections = detail::connection_limit.load(std::memory_order_relaxed);
  return s;
}

}  // namespace goro::http
