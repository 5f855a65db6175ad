// ServerConn: the goroutine of one HTTP/1.1 connection, from its first byte to its close.
//
// A connection goroutine alternates between two states, which graceful shutdown reads:
//   idle    waiting for the first byte of a request (the first one, or the next one on a
//           keep-alive connection); shutdown closes such a connection at once;
//   active  reading a head, running the handler, writing and draining; shutdown lets it
//           finish, the response says "Connection: close", and then it ends.
// The state is a flag the connection stores before it reads Server::Impl::closing, and
// shutdown stores closing before it reads the flags (all seq_cst, so at least one side
// sees the other): a connection that turns idle while a shutdown is under way ends
// instead, so no connection is left waiting after shutdown has looked at it. No lock:
// this happens twice a request.
//
// Pipelining: when a response is complete and bytes of a next request were already read
// with it, the response is copied to the exchange's out instead of written, and the next
// request is served from the read buffer; one write carries the whole batch. out is
// flushed before anything else goes out (a streamed response, 100 Continue, an error
// reply), before every read from the socket (so a client never waits on a response
// while the server waits on the client), before the connection closes, and when it
// would grow past write_buffer_size. It is empty whenever the connection is idle. A
// handler that parks (sleeps, calls a backend) holds the responses batched before its
// own; HTTP/1.1 makes the client wait for them in order anyway.
#include "server_conn.hpp"

#include <algorithm>
#include <exception>
#include <string>

#include <goro/http/errors.hpp>
#include <goro/http/status.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/detail/memory_return.hpp>
#include <goro/scheduler/detail/object_pool.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/thread_local.hpp>

#include "access.hpp"

namespace goro::http {
namespace detail {

const goro::ContextKey<Context> shutdown_key{"goro.http.shutdown"};

namespace {

// How long (and how much) a connection closed with request input still unread keeps
// reading and discarding what the client sends, so that the kernel does not answer
// that data with a reset that could destroy the response before the client reads it.
constexpr auto kLingerTime = std::chrono::milliseconds(500);
constexpr std::size_t kLingerBytes = 256 * 1024;
// Write deadline for error responses when no write_timeout is configured.
constexpr auto kErrorWriteTimeout = std::chrono::seconds(5);
// How long a keep-alive connection waits for its next request before it gives back its
// buffers and unused stack pages (wait_idle).
constexpr std::chrono::nanoseconds kIdleRelease = std::chrono::seconds(1);

net::Deadline deadline_in(std::chrono::nanoseconds d) {
  return d.count() > 0 ? net::deadline_after(d) : net::no_deadline;
}

constexpr unsigned kStatsShards = 16;
StatsShard stats_shards[kStatsShards];
std::atomic<unsigned> next_stats_shard{0};

// A shard is shared, atomic, and never goes away: the pointer may be used after the scope.
constinit goro::ThreadLocal thread_stats_shard = [] {
  return &stats_shards[next_stats_shard.fetch_add(1, std::memory_order_relaxed) % kStatsShards];
};

}  // namespace

StatsShard& stats_shard() { return **thread_stats_shard.use(); }

bool ServerConn::set_idle(bool idle) {
  idle_.store(idle, std::memory_order_seq_cst);
  return !server_->closing.load(std::memory_order_seq_cst);
}

namespace {

ParserLimits parser_limits(const ServerOptions& o) {
  return {o.max_request_line, o.max_header_bytes, o.max_body_bytes};
}

}  // namespace

std::unique_ptr<ServerConn::Exchange> ServerConn::new_exchange() const {
  const ServerOptions& o = server_->options;
  return std::unique_ptr<Exchange>(new Exchange{
      MessageParser(MessageParser::Mode::request, parser_limits(o), o.read_buffer_size),
      Request(), ResponseWriter(), std::string(), std::string()});
}

ServerConn::Served ServerConn::serve() {
  remote_ = stream_->remote_addr().to_string();
  if (wants_http2()) {
    serve_http2();
    return Served::ended;
  }
  // Bytes read while looking for the h2c preface start a request: not idle any more.
  if (x_->parser.buffered() > 0 && !set_idle(false)) return Served::ended;
  return serve_requests(true, false);
}

void ServerConn::resume(void* self) {
  auto* conn = static_cast<ServerConn*>(self);
  conn->x_ = conn->new_exchange();
  if (conn->serve_requests(false, true) == Served::ended) delete conn;
}

// resumed: on the goroutine that a parked connection's first bytes started (resume).
ServerConn::Served ServerConn::serve_requests(bool first, bool resumed) {
  for (;;) {
    // Parked: this object is the next goroutine's now; not a member may be touched.
    if (Head head = read_head(first, resumed); head != Head::ready) {
      return head == Head::parked ? Served::parked : Served::ended;
    }
    resumed = false;
    serve_request();
    publish_bytes();
    if (!keep_going_) return Served::ended;
    x_->parser.next_message();
    first = false;
  }
}

// Reads the first bytes of the next request on an idle keep-alive connection, waiting
// at most idle_timeout. A busy connection never pays for more than that read. One
// still idle after kIdleRelease gives back its exchange (the parser and its read
// buffer, the request, the response buffers) and parks: its stream starts a goroutine
// (resume) when bytes arrive, the deadline passes or shutdown closes it, so an idle
// connection holds no goroutine and no stack, only this object and its socket. A
// stream that cannot do that (TLS), or a connection served by Server::serve_conn,
// waits on instead for one byte read onto the stack, after releasing the stack's pages
// below this frame. Returns nullopt when the connection parked.
std::optional<Result<std::size_t>> ServerConn::wait_idle() {
  const std::chrono::nanoseconds idle = server_->options.idle_timeout;
  const bool release = idle.count() <= 0 || idle > kIdleRelease;
  set_read_deadline(deadline_in(release ? kIdleRelease : idle));
  {
    std::span<char> space = x_->parser.read_space();
    Result<std::size_t> n = stream_->read(space.data(), space.size());
    if (n || !release || !net::is_timeout(n.error())) return n;
    x_->parser.release_buffer();  // its page back to the kernel, not to the pool's cache
    x_.reset();
  }
  goro::detail::return_freed_memory_soon();
  // The full idle_timeout, counted from the start of the wait.
  set_read_deadline(idle.count() > 0 ? net::deadline_after(idle - kIdleRelease) : net::no_deadline);
  if (may_park_ && stream_->start_on_readable(&ServerConn::resume, this,
                                              server_->options.stack_size, "http conn")) {
    return std::nullopt;
  }
  goro::detail::release_unused_stack();
  char first;
  Result<std::size_t> n = stream_->read(&first, 1);
  x_ = new_exchange();
  if (!n || *n == 0) return n;
  std::span<char> space = x_->parser.read_space();
  space[0] = first;
  return std::size_t{1};
}

// Waits for and parses the next request head. Returns ended when the connection ends
// (the peer closed, a timeout, an error already answered, shutdown), parked when it
// parked while idle (wait_idle). resumed: the idle wait is over, its deadline still set.
ServerConn::Head ServerConn::read_head(bool first, bool resumed) {
  const ServerOptions& options = server_->options;
  bool waiting_idle = x_->parser.buffered() == 0;
  if (waiting_idle && !set_idle(true)) return Head::ended;
  // Set before the first read: a pipelined head that is already buffered needs none.
  bool deadline_set = resumed;
  // The head's deadline, counted from its first byte after an idle wait: given to the
  // stream only if the head needs another read (it seldom does), so that a request
  // whose head comes in one piece changes the stream's deadline once, for the wait.
  std::optional<net::Deadline> head_deadline;
  for (;;) {
    ParseStatus parsed = x_->parser.parse_head();
    if (parsed == ParseStatus::complete) break;
    if (parsed == ParseStatus::error) {
      if (waiting_idle) set_idle(false);
      respond_error(x_->parser.error().status, x_->parser.error().message);
      return Head::ended;
    }
    if (flush_out()) return Head::ended;
    Result<std::size_t> n{std::size_t{0}};
    if (!deadline_set && waiting_idle && !first) {
      std::optional<Result<std::size_t>> got = wait_idle();
      if (!got) return Head::parked;
      n = *got;
      deadline_set = true;
    } else {
      if (!deadline_set) {
        set_read_deadline(deadline_in(options.read_header_timeout));
        deadline_set = true;
      } else if (head_deadline) {
        set_read_deadline(*head_deadline);
        head_deadline.reset();
      }
      std::span<char> space = x_->parser.read_space();
      n = stream_->read(space.data(), space.size());
    }
    if (!n) {
      if (net::is_timeout(n.error()) && x_->parser.head_started()) {
        respond_error(status::request_timeout, "timed out reading the request head");
      }
      return Head::ended;
    }
    if (*n == 0) return Head::ended;
    x_->parser.commit(*n);
    bytes_in_ += *n;
    if (waiting_idle) {
      // The first byte of a request: from now on the head has read_header_timeout. A
      // shutdown that began meanwhile found this connection idle and closed it: its
      // answer could not be written, so the request is not served (the client sees the
      // connection close without an answer, as when it lost the race to an idle close).
      waiting_idle = false;
      if (!set_idle(false)) return Head::ended;
      if (!first) head_deadline = deadline_in(options.read_header_timeout);
    }
  }
  if (waiting_idle && !set_idle(false)) return Head::ended;
  return Head::ready;
}

void ServerConn::serve_request() {
  const ServerOptions& options = server_->options;
  if (!RequestAccess::prepare(x_->request, x_->parser, remote_, this)) {
    respond_error(status::bad_request, "invalid percent-encoding in the request path");
    keep_going_ = false;
    return;
  }
  bool keep_alive = x_->parser.keep_alive() && !x_->parser.upgrade();
  ResponseAccess::begin(x_->writer, this, x_->parser.version_minor(), x_->parser.is_head_method(),
                        keep_alive, options.write_buffer_size);
  continue_sent_ = false;
  close_after_ = false;
  handler_done_ = false;
  body_error_ = {};
  // A body still to come gets its own limit; a request without one leaves the deadline
  // alone (nothing reads until the next head, which sets its own).
  if (!x_->parser.message_complete()) set_read_deadline(deadline_in(options.read_body_timeout));
  set_write_deadline(deadline_in(options.write_timeout));

  if (x_->request.target() == "*") {
    // The asterisk form names the server itself; only OPTIONS may use it (RFC 9112
    // 3.2.4). Answered here, as Go's server does, not by the handler.
    if (x_->request.method() != "OPTIONS") {
      respond_error(status::bad_request, "asterisk-form request target is only for OPTIONS", true);
      keep_going_ = false;
      return;
    }
  } else {
    try {
      server_->handler(x_->request, x_->writer);
    } catch (const std::exception& e) {
      handler_failed(e.what());
    } catch (...) {
      handler_failed("unknown exception");
    }
  }
  handler_done_ = true;
  if (request_ctx_made_) end_request_context();
  if (taken_over_) {
    // The handler spoke another protocol on the connection (a WebSocket) and is done.
    keep_going_ = false;
    stream_->close();
    return;
  }
  if (body_error_ && net::is_timeout(body_error_) && !x_->writer.headers_sent() &&
      x_->writer.bytes_written() == 0 && x_->writer.status() == status::ok) {
    // The handler gave up on a body that stopped coming and said nothing: not a success.
    respond_error(status::request_timeout, "timed out reading the request body", true);
    keep_going_ = false;
    return;
  }

  finishing_ = true;
  std::error_code finished = ResponseAccess::finish(x_->writer);
  finishing_ = false;
  if (finished) {
    keep_going_ = false;
    stream_->close();
    return;
  }
  bool keep = ResponseAccess::keep_alive(x_->writer) && !close_after_;
  if (keep && !x_->parser.message_complete()) {
    // A client that asked for 100-continue and got none may or may not send the body:
    // the connection's framing is unknown, so it ends.
    keep = !(x_->parser.expect_continue() && !continue_sent_) && drain();
  }
  keep = keep && !server_->closing.load(std::memory_order_acquire);
  keep_going_ = keep;
  if (!keep) linger_close();
}

std::string handler_threw_message(const Request& req, std::string_view protocol,
                                  const char* what) {
  std::string message = "handler for ";
  message.append(req.method());
  message.push_back(' ');
  message.append(req.target());
  message.append(" from ");
  message.append(req.remote_addr());
  message.append(protocol.empty() ? "" : " (");
  message.append(protocol);
  message.append(protocol.empty() ? "" : ")");
  message.append(" threw: ");
  message.append(what);
  return message;
}

void ServerConn::handler_failed(const char* what) {
  server_->log_error(handler_threw_message(x_->request, "", what));
  close_after_ = true;
  if (x_->writer.headers_sent()) {
    ResponseAccess::abandon(x_->writer);
  } else {
    ResponseAccess::set_keep_alive(x_->writer, false);
    ResponseAccess::discard(x_->writer);
    x_->writer.text("500 Internal Server Error\n", status::internal_server_error);
  }
}

void ServerConn::build_error(int status, std::string_view message, bool head_known) {
  const ErrorReplyHook& hook = server_->options.on_error_reply;
  if (!hook) {
    build_error_response(x_->scratch, status, message, x_->parser.head_request_seen());
    return;
  }
  ErrorReply reply;
  reply.status = status;
  reply.message = message;
  reply.remote_addr = remote_;
  if (head_known) {
    reply.method = x_->request.method();
    reply.target = x_->request.target();
    reply.request_headers = x_->request.headers();
  } else if (x_->parser.expose_partial_head()) {
    reply.method = x_->parser.method();
    reply.target = x_->parser.target();
    reply.request_headers = x_->parser.headers();
  }
  try {
    hook(reply);
  } catch (const std::exception& e) {
    server_->log_error(std::string("on_error_reply threw: ") + e.what());
  } catch (...) {
    server_->log_error("on_error_reply threw");
  }
  // The hook may not change what is being refused, only add to the reply.
  reply.headers.remove("content-length");
  reply.headers.remove("transfer-encoding");
  reply.headers.remove("connection");
  build_error_response(x_->scratch, status, message, x_->parser.head_request_seen(),
                       &reply.headers);
}

void ServerConn::respond_error(int status, std::string_view message, bool head_known) {
  if (flush_out()) return;
  build_error(status, message, head_known);
  set_write_deadline(net::deadline_after(server_->options.write_timeout.count() > 0
                                             ? server_->options.write_timeout
                                             : std::chrono::nanoseconds(kErrorWriteTimeout)));
  Result<std::size_t> n = stream_->write(x_->scratch.data(), x_->scratch.size());
  if (n) bytes_out_ += *n;
  if (n) linger_close();
}

// Closes after a response, without letting unread input turn the close into a reset:
// half-close (FIN, after close_notify on TLS), then read and discard what is still
// coming for a short while.
void ServerConn::linger_close() {
  keep_going_ = false;
  if (flush_out()) {
    stream_->close();
    return;
  }
  if (x_->parser.message_complete() && x_->parser.buffered() == 0) {
    stream_->close();
    return;
  }
  set_write_deadline(net::deadline_after(kLingerTime));
  if (!stream_->shutdown_write()) {
    set_read_deadline(net::deadline_after(kLingerTime));
    char sink[4096];
    std::size_t total = 0;
    while (total < kLingerBytes) {
      Result<std::size_t> n = stream_->read(sink, sizeof sink);
      if (!n || *n == 0) break;
      total += *n;
      bytes_in_ += *n;
    }
  }
  stream_->close();
}

bool ServerConn::drain() {
  std::size_t drained = 0;
  set_read_deadline(deadline_in(server_->options.read_header_timeout));
  for (;;) {
    drained += x_->parser.skip(x_->parser.available());
    if (x_->parser.message_complete()) return true;
    if (drained > server_->options.max_drain_bytes) return false;
    ParseStatus parsed = x_->parser.parse_body();
    if (parsed == ParseStatus::error) return false;
    if (parsed == ParseStatus::complete || x_->parser.available() > 0) continue;
    if (flush_out()) return false;
    std::span<char> space = x_->parser.read_space();
    Result<std::size_t> n = stream_->read(space.data(), space.size());
    if (!n || *n == 0) return false;
    x_->parser.commit(*n);
    bytes_in_ += *n;
  }
}

void ServerConn::set_read_deadline(net::Deadline d) {
  if (d == read_deadline_ && !reads_interrupted_.load(std::memory_order_relaxed)) return;
  reads_interrupted_.store(false, std::memory_order_relaxed);
  read_deadline_ = d;
  stream_->set_read_deadline(d);
}

void ServerConn::set_write_deadline(net::Deadline d) {
  if (d == write_deadline_) return;
  write_deadline_ = d;
  stream_->set_write_deadline(d);
}

// Writes the batched responses; returns the write error (the connection is done).
std::error_code ServerConn::flush_out() {
  return x_->out.empty() ? std::error_code{} : write_out(nullptr, 0);
}

std::error_code ServerConn::body_failed(const ParseError& error) {
  close_after_ = true;
  ResponseAccess::set_keep_alive(x_->writer, false);
  if (!x_->writer.headers_sent()) {
    // Answer now (413 / 400 / 431), whatever the handler does with the error.
    build_error(error.status, error.message, true);
    iovec iov{x_->scratch.data(), x_->scratch.size()};
    write_out(&iov, 1);
    ResponseAccess::mark_finished(x_->writer);
  }
  body_error_ = error.status == status::payload_too_large ? make_error_code(errc::body_too_large)
                                                          : make_error_code(errc::malformed_body);
  return body_error_;
}

Result<std::size_t> ServerConn::read_body(void* buf, std::size_t len) {
  if (body_error_) return body_error_;
  for (;;) {
    if (x_->parser.available() > 0) return x_->parser.take(buf, len);
    if (x_->parser.message_complete()) return std::size_t{0};
    ParseStatus parsed = x_->parser.parse_body();
    if (parsed == ParseStatus::error) return body_failed(x_->parser.error());
    if (parsed == ParseStatus::complete || x_->parser.available() > 0) continue;
    if (x_->parser.expect_continue() && !continue_sent_ && !x_->writer.headers_sent()) {
      continue_sent_ = true;
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      iovec iov{const_cast<char*>(kContinue), sizeof kContinue - 1};
      if (std::error_code ec = write_out(&iov, 1)) {
        body_error_ = ec;
        return ec;
      }
    }
    if (std::error_code ec = flush_out()) {
      body_error_ = ec;
      return ec;
    }
    std::span<char> space = x_->parser.read_space();
    Result<std::size_t> n = stream_->read(space.data(), space.size());
    if (!n) {
      close_after_ = true;
      body_error_ = n.error();
      return body_error_;
    }
    if (*n == 0) {
      // The client ended its side inside the body: a truncated request, answered as
      // one (it may still be reading), whatever the handler makes of the error.
      peer_gone_ = true;
      body_failed(
          {status::bad_request, "request body cut short: the client closed the connection"});
      body_error_ = make_error_code(errc::unexpected_eof);
      return body_error_;
    }
    x_->parser.commit(*n);
    bytes_in_ += *n;
  }
}

bool ServerConn::reusable() {
  if (close_after_ || server_->closing.load(std::memory_order_acquire)) return false;
  if (x_->parser.message_complete()) return true;
  // Go's rule: a client that asked for 100-continue and got none may or may not send
  // the body, so the connection's framing is lost; a known remainder too large to
  // drain closes it as well.
  if (x_->parser.expect_continue() && !continue_sent_) return false;
  std::int64_t length = x_->parser.content_length();
  if (length >= 0 &&
      static_cast<std::uint64_t>(length) - x_->parser.body_bytes() >
          server_->options.max_drain_bytes)
    return false;
  // A handler that is done left part of the body unread: drain it now, before the head,
  // so the head can say whether the connection stays (a chunked body's size is unknown
  // until read). A handler still running (it flushed) may yet read it: assume it will.
  if (!handler_done_) return true;
  if (drain()) return true;
  close_after_ = true;
  return false;
}

void ServerConn::interrupt_reads() {
  // Any time in the past other than the "no deadline" epoch expires waiting reads.
  reads_interrupted_.store(true, std::memory_order_relaxed);
  stream_->set_read_deadline(net::Deadline(std::chrono::nanoseconds(1)));
}

Context ServerConn::request_context() {
  auto [ctx, cancel] = goro::with_cancel(server_->base);
  if (!hangup_hook_set_) hangup_hook_set_ = stream_->on_hangup(&ServerConn::hung_up, this);
  bool gone;
  {
    std::lock_guard lock(ctx_mu_);
    request_cancel_ = cancel;
    gone = hung_up_;
  }
  request_ctx_made_ = true;
  // Gone before the hook was in place: peer_closed polls the socket once.
  if (gone || client_gone()) cancel();
  return ctx;
}

void ServerConn::hung_up(void* self) {
  auto* conn = static_cast<ServerConn*>(self);
  CancelFunc cancel;
  {
    std::lock_guard lock(conn->ctx_mu_);
    conn->hung_up_ = true;
    cancel = conn->request_cancel_;
  }
  cancel();
}

// The handler returned: its context ends (Go cancels it once ServeHTTP returns).
void ServerConn::end_request_context() {
  CancelFunc cancel;
  {
    std::lock_guard lock(ctx_mu_);
    cancel = std::move(request_cancel_);
    request_cancel_ = CancelFunc();
  }
  request_ctx_made_ = false;
  cancel();
}

void ServerConn::publish_bytes() {
  if (bytes_in_ == 0 && bytes_out_ == 0) return;
  StatsShard& shard = stats_shard();
  shard.bytes_in.fetch_add(bytes_in_, std::memory_order_relaxed);
  shard.bytes_out.fetch_add(bytes_out_, std::memory_order_relaxed);
  bytes_in_ = bytes_out_ = 0;
}

net::Stream* ServerConn::take_over(std::string& early) {
  if (taken_over_ || x_->writer.headers_sent() || !x_->parser.message_complete()) return nullptr;
  // Responses batched before this request go out first.
  if (flush_out()) return nullptr;
  early.append(x_->parser.unparsed());
  taken_over_ = true;
  ResponseAccess::set_keep_alive(x_->writer, false);
  set_read_deadline(net::no_deadline);
  set_write_deadline(net::no_deadline);
  return stream_.get();
}

bool ServerConn::client_gone() {
  if (!peer_gone_ && stream_->peer_closed()) peer_gone_ = true;
  return peer_gone_;
}

std::error_code ServerConn::write_out(const iovec* iov, int count) {
  std::size_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += iov[i].iov_len;
  if (finishing_ && x_->parser.buffered() > 0 &&
      x_->out.size() + bytes <= server_->options.write_buffer_size) {
    for (int i = 0; i < count; ++i)
      x_->out.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    return {};
  }
  Result<std::size_t> n{std::size_t{0}};
  constexpr int kMaxPieces = 8;  // ResponseWriter passes at most 4
  if (!x_->out.empty() && count < kMaxPieces) {
    // The batch first, then these bytes, in one call.
    iovec all[kMaxPieces];
    all[0] = {x_->out.data(), x_->out.size()};
    std::copy(iov, iov + count, all + 1);
    n = stream_->writev(all, count + 1);
  } else {
    if (!x_->out.empty()) {
      iovec batch{x_->out.data(), x_->out.size()};
      n = stream_->writev(&batch, 1);
    }
    if (n && count > 0) n = stream_->writev(iov, count);
  }
  const std::size_t batched = x_->out.size();
  x_->out.clear();
  if (n) {
    bytes_out_ += batched + bytes;
    return {};
  }
  close_after_ = true;
  std::error_code ec = n.error();
  if (ec == std::errc::broken_pipe || ec == std::errc::connection_reset) peer_gone_ = true;
  return ec;
}

}  // namespace detail

ServerStats server_stats() {
  ServerStats s;
  std::uint64_t closed = 0;
  for (const detail::StatsShard& shard : detail::stats_shards) {
    s.connections_total += shard.opened.load(std::memory_order_relaxed);
    closed += shard.closed.load(std::memory_order_relaxed);
    s.bytes_received += shard.bytes_in.load(std::memory_order_relaxed);
    s.bytes_sent += shard.bytes_out.load(std::memory_order_relaxed);
  }
  s.connections_open = s.connections_total > closed ? s.connections_total - closed : 0;
  return s;
}

}  // namespace goro::http
