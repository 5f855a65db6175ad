// The HTTP/1.1 engine: a connection's bytes into requests (llhttp, h1/message_parser.hpp)
// and responses into bytes, one request at a time, on the connection's goroutine.
//
// An Exchange is what the engine needs to serve: the parser with its read buffer, the
// Request, the Response and the bytes it batches. It is made when the connection starts
// serving and freed when the connection has been idle for Connection::idle_release()
// (30 to 400 ms, from the pace of its requests): the connection then parks with no
// goroutine (Connection::park_until_readable), and the
// goroutine its next bytes start makes a new one (resume). A stream that cannot wait
// that way (TLS) waits for one byte on its goroutine instead, after giving back the
// stack pages below the wait.
//
// Pipelining: when a response is complete and bytes of a next request were already read
// with it, the response is copied to out_ instead of written, and the next request is
// served from the read buffer; one write carries the whole batch. out_ is flushed before
// anything else goes out (a streamed response, 100 Continue, an error reply), before
// every read from the socket (so a client never waits on a response while the server
// waits on the client), before the connection closes, and when it would grow past
// write_buffer_size. It is empty whenever the connection is idle. A handler that parks
// (sleeps, calls a backend) holds the responses batched before its own; HTTP/1.1 makes
// the client wait for them in order anyway.
//
// Protocol errors are answered with the server's own reply (core/exchange.hpp) and a
// lingering close: half-close, then read and discard for a while, so that unread input
// does not turn the close into a reset that destroys the reply before the client reads
// it.
#include "h1/conn.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/status.hpp>
#include <goro/net/conn.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>

#include "access.hpp"
#include "core/exchange.hpp"
#include "core/response.hpp"
#include "h1/head.hpp"
#include "h1/message_parser.hpp"

namespace goro::http::detail::h1 {
namespace {

// How long (and how much) a connection closed with request input still unread keeps
// reading and discarding what the client sends.
constexpr auto kLingerTime = std::chrono::milliseconds(500);
constexpr std::size_t kLingerBytes = 256 * 1024;
// Write deadline for the server's own replies when no write_timeout is configured.
constexpr auto kErrorWriteTimeout = std::chrono::seconds(5);
// The most bytes the head writer's own fields take: Date, Server, Content-Length with 20
// digits or Transfer-Encoding, Connection, and the empty line.
constexpr std::size_t kManagedFieldBytes = (6 + kHttpDateSize + 2) + 14 + (16 + 20 + 2) + 24 + 2;
// How long a keep-alive connection waits for its next request before it gives back its
// exchange and parks: Connection::idle_release(), 3 times the longest recent gap between
// its requests, at least 30 ms and at most 400 ms, and 30 ms at its first wait or after
// a long quiet. So a connection that made a request and went quiet has its memory back
// about 80 ms after the response (the memory goes back to the kernel 50 ms after the
// park, goro::return_freed_memory_soon), and one in a request loop, even one with a
// request every few hundred milliseconds as each of 10,000 under full load has, parks
// at its first wait only.

net::Deadline deadline_in(std::chrono::nanoseconds d) {
  return d.count() > 0 ? net::deadline_after(d) : net::no_deadline;
}

ParserLimits parser_limits(const ServerOptions& o) {
  return {o.max_request_line, o.max_header_bytes, o.max_body_bytes};
}

// How a response body is delimited on the wire.
enum class Framing : std::uint8_t { none, length, chunked, close };

class Exchange final : public detail::Exchange, public BodyReader, public ResponseSink {
 public:
  explicit Exchange(Connection& conn)
      : conn_(conn),
        stream_(conn.stream()),
        options_(conn.options()),
        parser_(MessageParser::Mode::request, parser_limits(options_), options_.read_buffer_size) {
    // Only a plain socket can take a file's bytes from the kernel: TLS encrypts them here.
    plain_ = dynamic_cast<net::Conn*>(&stream_);
  }

  // Bytes already read (the protocol choice's), as if read now.
  void feed(std::string_view bytes);
  // Serves requests until the connection ends (false) or has been idle for idle_release()
  // (true: the caller gives the exchange back and parks). first: no request was read
  // yet; resumed: an idle wait is over, the connection still marked idle, its deadline
  // still set.
  bool serve_requests(bool first, bool resumed);
  // Gives the read buffer's page back to the kernel (an exchange about to go).
  void release_buffer() noexcept { parser_.release_buffer(); }

  // detail::Exchange (RequestHost)
  std::string_view protocol() const noexcept override { return {}; }
  const Server::Impl& server() const noexcept override { return conn_.server(); }
  void refuse(int status, std::string_view message) override {
    respond_error(status, message, true);
    keep_going_ = false;
  }
  void end_request_context() override {
    if (request_ctx_made_) conn_.end_request_context();
    request_ctx_made_ = false;
  }
  Context request_context() override {
    request_ctx_made_ = true;
    return conn_.request_context();
  }
  bool client_gone() override { return conn_.client_gone(); }
  const net::TlsConnectionState* tls_state() const noexcept override { return conn_.tls_state(); }
  void count_request() override { conn_.count_request(); }

  // BodyReader
  Result<std::size_t> read(void* buf, std::size_t len) override;

  // ResponseSink
  std::error_code send_head(int status, const Headers& fields, std::int64_t length,
                            std::string_view body, bool end) override;
  std::error_code send_body(std::string_view data) override;
  std::error_code end_body(bool complete, const Headers& trailers) override;
  std::error_code send_informational(int status, const Headers& fields) override;
  Result<TakenConnection> take_over() override;
  std::error_code set_deadline(net::IoMode mode, net::Deadline d) override;
  bool can_send_file() const override { return plain_ != nullptr; }
  std::error_code send_file(int fd, std::uint64_t offset, std::uint64_t count) override;

 private:
  enum class Head { ready, ended, idle };
  Head read_head(bool first, bool resumed);
  void serve_request();
  void respond_error(int status, std::string_view message, bool head_known = false);
  // The server's own reply for status and message into scratch_, with Connection: close.
  void own_reply(int status, std::string_view message, const RefusedRequest& refused);
  void linger_close();
  bool drain();
  bool reusable();
  std::error_code flush_out();
  std::error_code write_out(const iovec* iov, int count);
  void set_read_deadline(net::Deadline d);
  void set_write_deadline(net::Deadline d);
  std::error_code body_failed(const ParseError& error);

  Connection& conn_;
  net::Stream& stream_;
  const ServerOptions& options_;
  MessageParser parser_;
  Request request_;
  Response response_;
  std::string scratch_;  // the server's own replies
  std::string out_;      // responses batched for one write (pipelining)
  OwnReply reply_;

  bool keep_going_ = true;
  bool keep_alive_ = true;  // what the request allows; a response head may say no
  bool continue_sent_ = false;
  bool close_after_ = false;  // the connection cannot carry another request
  bool handler_done_ = false;
  bool finishing_ = false;  // writes now end a response; they may be batched
  bool request_ctx_made_ = false;
  Framing framing_ = Framing::none;
  net::Conn* plain_ = nullptr;  // stream_ when it is a plain socket, for sendfile; not on TLS
  std::weak_ptr<net::Stream> taken_owner_;  // the TakenConnection::owner take_over gave out
  std::error_code body_error_;
  // The deadlines last set on the stream (max: not set yet, whatever the stream came
  // with): a request that changes neither (no body or write timeout configured) makes
  // no call.
  net::Deadline read_deadline_ = net::Deadline::max();
  net::Deadline write_deadline_ = net::Deadline::max();
};

void Exchange::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    std::span<char> space = parser_.read_space();
    const std::size_t n = std::min(space.size(), bytes.size());
    std::copy_n(bytes.data(), n, space.data());
    parser_.commit(n);
    bytes.remove_prefix(n);
  }
}

bool Exchange::serve_requests(bool first, bool resumed) {
  for (;;) {
    if (Head head = read_head(first, resumed); head != Head::ready) return head == Head::idle;
    resumed = false;
    serve_request();
    conn_.publish_bytes();
    if (!keep_going_) return false;
    parser_.next_message();
    first = false;
  }
}

// Waits for and parses the next request head. ended: the connection ends (the peer
// closed, a timeout, an error already answered, shutdown); idle: nothing came for
// idle_release() (the connection stays marked idle, with the rest of its idle timeout to
// wait). A keep-alive connection waits at most idle_timeout for the first byte; from it
// on, the head has read_header_timeout.
Exchange::Head Exchange::read_head(bool first, bool resumed) {
  bool waiting_idle = parser_.buffered() == 0;
  // When the request's first bytes arrived, for Request::received_at: the netpoller's
  // stamp of the readiness this wait ended on: one it made during the wait, or the one
  // that started this goroutine. A stamp older than the wait belongs to earlier bytes.
  const std::chrono::steady_clock::time_point seen_before =
      waiting_idle ? stream_.readable_at() : std::chrono::steady_clock::time_point();
  std::chrono::steady_clock::time_point arrived{};
  if (waiting_idle) conn_.set_idle(true);
  // Set before the first read: a pipelined head that is already buffered needs none.
  bool deadline_set = resumed;
  // The head's deadline, counted from its first byte after an idle wait: given to the
  // stream only if the head needs another read (it seldom does), so that a request
  // whose head comes in one piece changes the stream's deadline once, for the wait.
  net::Deadline head_deadline{};
  bool head_deadline_due = false;
  std::chrono::nanoseconds release{};  // of this wait, when it may end in a park
  for (;;) {
    ParseStatus parsed = parser_.parse_head();
    if (parsed == ParseStatus::complete) break;
    if (parsed == ParseStatus::error) {
      if (waiting_idle) conn_.set_idle(false);
      respond_error(parser_.error().status, parser_.error().message);
      return Head::ended;
    }
    if (flush_out()) return Head::ended;
    bool idle_wait = false;
    if (!deadline_set && waiting_idle && !first) {
      const std::chrono::nanoseconds idle = options_.idle_timeout;
      release = conn_.idle_release();
      conn_.idle_wait_began(std::chrono::steady_clock::now());
      idle_wait = idle.count() <= 0 || idle > release;
      conn_.set_idle_deadline(deadline_in(idle_wait ? release : idle));
      deadline_set = true;
    } else if (!deadline_set && waiting_idle) {
      conn_.set_idle_deadline(deadline_in(options_.read_header_timeout));
      deadline_set = true;
    } else if (!deadline_set) {
      set_read_deadline(deadline_in(options_.read_header_timeout));
      deadline_set = true;
    } else if (head_deadline_due) {
      set_read_deadline(head_deadline);
      head_deadline_due = false;
    }
    std::span<char> space = parser_.read_space();
    Result<std::size_t> n = stream_.read(space.data(), space.size());
    if (!n) {
      // A shutdown cut the wait (or the grace had passed): the connection ends.
      if (waiting_idle && conn_.closing()) return Head::ended;
      if (idle_wait && net::is_timeout(n.error())) {
        // The rest of the idle timeout, counted from the start of the wait.
        const std::chrono::nanoseconds idle = options_.idle_timeout;
        set_read_deadline(idle.count() > 0 ? net::deadline_after(idle - release)
                                           : net::no_deadline);
        return Head::idle;
      }
      if (net::is_timeout(n.error()) && parser_.head_started()) {
        respond_error(status::request_timeout, "timed out reading the request head");
      }
      return Head::ended;
    }
    if (*n == 0) return Head::ended;
    parser_.commit(*n);
    conn_.count_in(*n);
    if (waiting_idle) {
      // The first byte of a request: from now on the head has read_header_timeout. A
      // shutdown that began meanwhile lets the request be served, with "Connection:
      // close" (reusable()), unless it may have closed the connection (set_busy): then
      // the client sees it close without an answer, as when it lost the race to an idle
      // close, and no handler does work whose answer cannot be written.
      waiting_idle = false;
      if (const auto seen = stream_.readable_at(); resumed || seen != seen_before) arrived = seen;
      if (!conn_.set_busy(resumed)) return Head::ended;
      if (!first) {
        conn_.idle_wait_ended(arrived != std::chrono::steady_clock::time_point()
                                  ? arrived
                                  : std::chrono::steady_clock::now());
        head_deadline = deadline_in(options_.read_header_timeout);
        head_deadline_due = true;
      }
    }
  }
  if (waiting_idle && !conn_.set_busy(resumed)) return Head::ended;
  request_.set_received_at(arrived);
  return Head::ready;
}

void Exchange::serve_request() {
  if (!RequestAccess::prepare(request_, parser_, conn_.remote_addr(), this, this)) {
    respond_error(status::bad_request, "invalid percent-encoding in the request path");
    keep_going_ = false;
    return;
  }
  keep_alive_ = parser_.keep_alive() && !parser_.upgrade();
  response_.begin(this, parser_.is_head_method(), options_.write_buffer_size);
  continue_sent_ = false;
  close_after_ = false;
  handler_done_ = false;
  framing_ = Framing::none;
  body_error_ = {};
  // A body still to come gets its own limit; a request without one leaves the deadline
  // alone (nothing reads until the next head, which sets its own).
  if (!parser_.message_complete()) set_read_deadline(deadline_in(options_.read_body_timeout));
  set_write_deadline(deadline_in(options_.write_timeout));

  const Ran ran = run_exchange(conn_.server(), *this, request_, response_);
  handler_done_ = true;
  if (ran == Ran::refused) return;
  if (ran != Ran::served) close_after_ = true;
  if (response_.taken_over()) {
    // The handler spoke another protocol on the connection (a WebSocket) and is done
    // with it, unless it kept the owner it was given: then the connection lives on
    // without this engine, and the owner's last copy closes it.
    keep_going_ = false;
    if (taken_owner_.expired()) {
      stream_.close();
    } else {
      // The connection goes on without this exchange: its read page goes back to the
      // kernel, with the handler's stack soon after, as for a connection that parks.
      parser_.release_buffer();
      goro::return_freed_memory_soon();
    }
    return;
  }
  if (body_error_ && net::is_timeout(body_error_) && !response_.headers_sent() &&
      response_.bytes_written() == 0 && response_.status() == status::ok &&
      !response_.finished()) {
    // The handler gave up on a body that stopped coming and said nothing: not a success.
    respond_error(status::request_timeout, "timed out reading the request body", true);
    keep_going_ = false;
    return;
  }

  finishing_ = true;
  std::error_code finished = response_.finish();
  finishing_ = false;
  if (finished) {
    keep_going_ = false;
    stream_.close();
    return;
  }
  // An abandoned response ends with the connection: the client learns it was cut. A
  // response that said keep-alive before a shutdown began is followed by an idle wait
  // cut to the shutdown's grace (read_head): the client may be sending its next request.
  bool keep = keep_alive_ && !close_after_ && ran != Ran::abandoned;
  if (keep && !parser_.message_complete()) {
    // A client that asked for 100-continue and got none may or may not send the body:
    // the connection's framing is unknown, so it ends.
    keep = !(parser_.expect_continue() && !continue_sent_) && drain();
  }
  keep_going_ = keep;
  if (!keep) linger_close();
}

void Exchange::respond_error(int status, std::string_view message, bool head_known) {
  if (flush_out()) return;
  RefusedRequest refused;
  if (head_known) {
    refused = {request_.method(), request_.target(), request_.headers()};
  } else if (parser_.expose_partial_head()) {
    refused = {parser_.method(), parser_.target(), parser_.headers()};
  }
  own_reply(status, message, refused);
  set_write_deadline(net::deadline_after(options_.write_timeout.count() > 0
                                             ? options_.write_timeout
                                             : std::chrono::nanoseconds(kErrorWriteTimeout)));
  Result<std::size_t> n = stream_.write(scratch_.data(), scratch_.size());
  if (n) conn_.count_out(*n);
  if (n) linger_close();
}

void Exchange::own_reply(int status, std::string_view message, const RefusedRequest& refused) {
  build_own_reply(conn_.server(), conn_.remote_addr(), status, message, refused, reply_);
  scratch_.clear();
  append_status_line(scratch_, status);
  append_date_header(scratch_);
  scratch_.append("Server: goro\r\nContent-Type: ");
  scratch_.append(reply_.content_type);
  scratch_.append("\r\nContent-Length: ");
  append_number(scratch_, reply_.body.size());
  scratch_.append("\r\nConnection: close\r\n");
  for (const HeaderField& f : reply_.fields) {
    if (!safe_field(f)) continue;
    scratch_.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  scratch_.append("\r\n");
  // A HEAD request gets the head alone (its Content-Length still that of the text).
  if (!parser_.head_request_seen()) scratch_.append(reply_.body);
}

// Closes after a response, without letting unread input turn the close into a reset:
// half-close (FIN, after close_notify on TLS), then read and discard what is still
// coming for a short while.
void Exchange::linger_close() {
  keep_going_ = false;
  if (flush_out()) {
    stream_.close();
    return;
  }
  if (parser_.message_complete() && parser_.buffered() == 0) {
    stream_.close();
    return;
  }
  set_write_deadline(net::deadline_after(kLingerTime));
  if (!stream_.shutdown_write()) {
    set_read_deadline(net::deadline_after(kLingerTime));
    char sink[4096];
    std::size_t total = 0;
    while (total < kLingerBytes) {
      Result<std::size_t> n = stream_.read(sink, sizeof sink);
      if (!n || *n == 0) break;
      total += *n;
      conn_.count_in(*n);
    }
  }
  stream_.close();
}

bool Exchange::drain() {
  std::size_t drained = 0;
  set_read_deadline(deadline_in(options_.read_header_timeout));
  for (;;) {
    drained += parser_.skip(parser_.available());
    if (parser_.message_complete()) return true;
    if (drained > options_.max_drain_bytes) return false;
    ParseStatus parsed = parser_.parse_body();
    if (parsed == ParseStatus::error) return false;
    if (parsed == ParseStatus::complete || parser_.available() > 0) continue;
    if (flush_out()) return false;
    std::span<char> space = parser_.read_space();
    Result<std::size_t> n = stream_.read(space.data(), space.size());
    if (!n || *n == 0) return false;
    parser_.commit(*n);
    conn_.count_in(*n);
  }
}

void Exchange::set_read_deadline(net::Deadline d) {
  if (d == read_deadline_) return;
  read_deadline_ = d;
  stream_.set_read_deadline(d);
}

void Exchange::set_write_deadline(net::Deadline d) {
  if (d == write_deadline_) return;
  write_deadline_ = d;
  stream_.set_write_deadline(d);
}

// Writes the batched responses; returns the write error (the connection is done).
std::error_code Exchange::flush_out() { return out_.empty() ? std::error_code{} : write_out(nullptr, 0); }

std::error_code Exchange::body_failed(const ParseError& error) {
  close_after_ = true;
  keep_alive_ = false;
  if (!response_.headers_sent()) {
    // Answer now (413 / 400 / 431), whatever the handler does with the error.
    own_reply(error.status, error.message, {request_.method(), request_.target(), request_.headers()});
    iovec iov{scratch_.data(), scratch_.size()};
    write_out(&iov, 1);
    response_.mark_finished();
  }
  body_error_ = error.status == status::payload_too_large ? make_error_code(errc::body_too_large)
                                                          : make_error_code(errc::malformed_body);
  return body_error_;
}

Result<std::size_t> Exchange::read(void* buf, std::size_t len) {
  if (body_error_) return body_error_;
  for (;;) {
    if (parser_.available() > 0) return parser_.take(buf, len);
    if (parser_.message_complete()) return std::size_t{0};
    ParseStatus parsed = parser_.parse_body();
    if (parsed == ParseStatus::error) return body_failed(parser_.error());
    if (parsed == ParseStatus::complete || parser_.available() > 0) continue;
    if (parser_.expect_continue() && !continue_sent_ && !response_.headers_sent()) {
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
    std::span<char> space = parser_.read_space();
    Result<std::size_t> n = stream_.read(space.data(), space.size());
    if (!n) {
      close_after_ = true;
      body_error_ = n.error();
      return body_error_;
    }
    if (*n == 0) {
      // The client ended its side inside the body: a truncated request, answered as
      // one (it may still be reading), whatever the handler makes of the error.
      conn_.note_peer_gone();
      body_failed({status::bad_request, "request body cut short: the client closed the connection"});
      body_error_ = make_error_code(errc::unexpected_eof);
      return body_error_;
    }
    parser_.commit(*n);
    conn_.count_in(*n);
  }
}

// Whether the connection can carry another request after this response, asked as the
// head is built.
bool Exchange::reusable() {
  if (close_after_ || conn_.server().closing.load(std::memory_order_acquire)) return false;
  if (parser_.message_complete()) return true;
  // Go's rule: a client that asked for 100-continue and got none may or may not send
  // the body, so the connection's framing is lost; a known remainder too large to
  // drain closes it as well.
  if (parser_.expect_continue() && !continue_sent_) return false;
  std::int64_t length = parser_.content_length();
  if (length >= 0 &&
      static_cast<std::uint64_t>(length) - parser_.body_bytes() > options_.max_drain_bytes)
    return false;
  // A handler that is done left part of the body unread: drain it now, before the head,
  // so the head can say whether the connection stays (a chunked body's size is unknown
  // until read). A handler still running (it flushed) may yet read it: assume it will.
  if (!handler_done_) return true;
  if (drain()) return true;
  close_after_ = true;
  return false;
}

std::error_code Exchange::send_head(int status, const Headers& fields, std::int64_t length,
                                    std::string_view body, bool end) {
  (void)end;
  const bool head_request = parser_.is_head_method();
  if (body_forbidden(status)) {
    framing_ = Framing::none;
  } else if (length >= 0) {
    framing_ = Framing::length;
  } else if (parser_.version_minor() >= 1) {
    framing_ = Framing::chunked;
  } else {
    framing_ = Framing::close;
    keep_alive_ = false;
  }
  // Settled before any of the head is in out_: reusable() may drain the request's body,
  // and a read flushes out_ first.
  if (has_token(fields.get("connection"), "close") || !reusable()) keep_alive_ = false;

  // The head is written through a cursor at the end of out_, after the responses
  // batched before it (write_out sends them and it in one call, or batches the body
  // after it), sized once for the most it can take: the handler's fields as they are,
  // and the longest of each managed field.
  append_status_line(out_, status);
  const std::size_t line_end = out_.size();
  std::size_t most = line_end + kManagedFieldBytes;
  for (const HeaderField& f : fields) most += f.name.size() + f.value.size() + 4;
  out_.resize(most);
  char* at = out_.data() + line_end;
  auto put = [&at](std::string_view piece) {
    std::memcpy(at, piece.data(), piece.size());
    at += piece.size();
  };
  // One pass over the handler's fields: the others are copied, the managed ones noted.
  bool has_date = false, has_server = false;
  for (HeaderField f : fields) {
    switch (field_of(f.name)) {
      case Field::content_length:
      case Field::transfer_encoding:
      case Field::connection: continue;
      case Field::date: has_date = true; break;
      case Field::server: has_server = true; break;
      case Field::other: break;
    }
    put(f.name);
    put(": ");
    put(f.value);
    put("\r\n");
  }
  if (!has_date) {
    put("Date: ");
    http_date_now(at);
    at += kHttpDateSize;
    put("\r\n");
  }
  if (!has_server) put("Server: goro\r\n");
  if (framing_ == Framing::length) {
    put("Content-Length: ");
    at = std::to_chars(at, at + 20, static_cast<std::uint64_t>(length)).ptr;
    put("\r\n");
  } else if (framing_ == Framing::chunked) {
    put("Transfer-Encoding: chunked\r\n");
  }
  if (!keep_alive_) {
    put("Connection: close\r\n");
  } else if (parser_.version_minor() == 0) {
    put("Connection: keep-alive\r\n");
  }
  put("\r\n");
  out_.resize(static_cast<std::size_t>(at - out_.data()));

  iovec iov[3];
  int count = 0;
  char chunk_head[24];
  const bool send_body = !body.empty() && !head_request && framing_ != Framing::none;
  if (send_body && framing_ == Framing::chunked) {
    auto [e, ec] = std::to_chars(chunk_head, chunk_head + 20, body.size(), 16);
    (void)ec;
    e[0] = '\r';
    e[1] = '\n';
    iov[count++] = {chunk_head, static_cast<std::size_t>(e + 2 - chunk_head)};
  }
  if (send_body) iov[count++] = {const_cast<char*>(body.data()), body.size()};
  if (send_body && framing_ == Framing::chunked) iov[count++] = {const_cast<char*>("\r\n"), 2};
  return write_out(iov, count);
}

std::error_code Exchange::send_body(std::string_view data) {
  if (framing_ == Framing::none) return {};
  iovec iov[3];
  int count = 0;
  char chunk_head[24];
  if (framing_ == Framing::chunked) {
    auto [e, ec] = std::to_chars(chunk_head, chunk_head + 20, data.size(), 16);
    (void)ec;
    e[0] = '\r';
    e[1] = '\n';
    iov[count++] = {chunk_head, static_cast<std::size_t>(e + 2 - chunk_head)};
  }
  iov[count++] = {const_cast<char*>(data.data()), data.size()};
  if (framing_ == Framing::chunked) iov[count++] = {const_cast<char*>("\r\n"), 2};
  return write_out(iov, count);
}

std::error_code Exchange::end_body(bool complete, const Headers& trailers) {
  if (framing_ == Framing::chunked) {
    if (trailers.empty()) {
      iovec end{const_cast<char*>("0\r\n\r\n"), 5};
      return write_out(&end, 1);
    }
    scratch_.assign("0\r\n");
    for (const HeaderField& f : trailers) {
      if (!safe_field(f) || field_of(f.name) != Field::other) continue;
      scratch_.append(f.name).append(": ").append(f.value).append("\r\n");
    }
    scratch_.append("\r\n");
    iovec end{scratch_.data(), scratch_.size()};
    return write_out(&end, 1);
  }
  // Shorter than announced: only closing tells the client the body is cut.
  if (framing_ == Framing::length && !complete) keep_alive_ = false;
  return {};
}

std::error_code Exchange::send_informational(int status, const Headers& fields) {
  // An HTTP/1.0 client does not expect 1xx responses (RFC 9110 15.2): none is sent.
  if (parser_.version_minor() == 0) return {};
  scratch_.clear();
  append_status_line(scratch_, status);
  for (const HeaderField& f : fields) {
    if (!safe_field(f)) continue;
    scratch_.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  scratch_.append("\r\n");
  iovec iov{scratch_.data(), scratch_.size()};
  return write_out(&iov, 1);
}

Result<TakenConnection> Exchange::take_over() {
  if (!parser_.message_complete()) return make_error_code(errc::cannot_take_over);
  // Responses batched before this request go out first.
  if (std::error_code ec = flush_out()) return ec;
  TakenConnection taken;
  taken.stream = &stream_;
  taken.early.assign(parser_.unparsed());
  if (conn_.may_park()) {
    taken.owner = std::shared_ptr<net::Stream>(&stream_, TakenOwner{conn_.share()});
    taken_owner_ = taken.owner;
  }
  keep_alive_ = false;
  set_read_deadline(net::no_deadline);
  set_write_deadline(net::no_deadline);
  return taken;
}

std::error_code Exchange::set_deadline(net::IoMode mode, net::Deadline d) {
  if (mode != net::IoMode::write) {
    read_deadline_ = d;
    if (std::error_code ec = stream_.set_read_deadline(d)) return ec;
  }
  if (mode != net::IoMode::read) {
    write_deadline_ = d;
    if (std::error_code ec = stream_.set_write_deadline(d)) return ec;
  }
  return {};
}

// The head has gone out (send_head writes at once outside finishing_); the file's bytes
// follow it, parking while the client is slow, up to the write deadline or the end of
// the request's context (the client hung up, shutdown's deadline).
std::error_code Exchange::send_file(int fd, std::uint64_t offset, std::uint64_t count) {
  if (std::error_code ec = flush_out()) return ec;
  std::uint64_t sent = 0;
  std::error_code ec = net::with_context(stream_, net::IoMode::write, request_.context(),
                                         [&] { return plain_->send_file(fd, offset, count, sent); });
  // The file is shorter than it was: the promised length cannot be met.
  if (!ec && sent < count) ec = make_error_code(errc::unexpected_eof);
  conn_.count_out(static_cast<std::size_t>(sent));
  if (!ec) return {};
  close_after_ = true;
  if (ec == std::errc::broken_pipe || ec == std::errc::connection_reset) conn_.note_peer_gone();
  return ec;
}

std::error_code Exchange::write_out(const iovec* iov, int count) {
  std::size_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += iov[i].iov_len;
  if (finishing_ && parser_.buffered() > 0 && out_.size() + bytes <= options_.write_buffer_size) {
    for (int i = 0; i < count; ++i)
      out_.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    return {};
  }
  Result<std::size_t> n{std::size_t{0}};
  constexpr int kMaxPieces = 8;  // send_head passes at most 3
  if (!out_.empty() && count < kMaxPieces) {
    // The batch first, then these bytes, in one call.
    iovec all[kMaxPieces];
    all[0] = {out_.data(), out_.size()};
    std::copy(iov, iov + count, all + 1);
    n = stream_.writev(all, count + 1);
  } else {
    if (!out_.empty()) {
      iovec batch{out_.data(), out_.size()};
      n = stream_.writev(&batch, 1);
    }
    if (n && count > 0) n = stream_.writev(iov, count);
  }
  const std::size_t batched = out_.size();
  out_.clear();
  if (n) {
    conn_.count_out(batched + bytes);
    return {};
  }
  close_after_ = true;
  std::error_code ec = n.error();
  if (ec == std::errc::broken_pipe || ec == std::errc::connection_reset) conn_.note_peer_gone();
  return ec;
}

void resume(ConnRef& self);

// Serves with x until the connection ends, going through idle waits: after kIdleRelease
// the exchange goes, and the connection parks (self is then given up) or, where it
// cannot, waits for one byte on this goroutine.
void run(ConnRef& self, std::unique_ptr<Exchange> x, bool first, bool resumed) {
  Connection& c = *self;
  for (;;) {
    if (!x->serve_requests(first, resumed)) return;
    x->release_buffer();  // its page back to the kernel, not to the pool's cache
    x.reset();
    goro::return_freed_memory_soon();
    if (Connection::park_until_readable(self, &resume) || c.closing()) return;
    goro::release_unused_stack();
    char byte;
    Result<std::size_t> n = c.stream().read(&byte, 1);
    if (!n || *n == 0) return;
    c.count_in(1);
    if (!c.set_busy(false)) return;
    x = std::make_unique<Exchange>(c);
    x->feed(std::string_view(&byte, 1));
    first = resumed = false;
  }
}

// The goroutine a parked connection's next bytes (or its end, its idle timeout,
// shutdown's close) start.
void resume(ConnRef& self) { run(self, std::make_unique<Exchange>(*self), false, true); }

}  // namespace

void serve(ConnRef& self, std::string_view early) {
  Connection& c = *self;
  auto x = std::make_unique<Exchange>(c);
  x->feed(early);
  // Bytes read while the protocol was chosen start a request: not idle any more.
  if (!early.empty() && !c.set_busy(false)) return;
  run(self, std::move(x), true, false);
}

}  // namespace goro::http::detail::h1
