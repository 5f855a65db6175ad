#include <goro/http/client.hpp>

#include <poll.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/net/addr.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/errors.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "client/h2_client.hpp"
#include "client/url.hpp"
#include "h1/message_parser.hpp"
#include "trace/client_span.hpp"

namespace goro::http {

namespace {

struct PooledConn {
  std::unique_ptr<net::Stream> stream;
  std::unique_ptr<detail::MessageParser> parser;
  int fd = -1;
  std::chrono::steady_clock::time_point idle_since;
  std::string alpn{};  // the protocol TLS agreed on ("h2", "http/1.1"); empty: none
};

bool idempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "PUT" ||
         method == "DELETE" || method == "TRACE";
}

// The deadline of one operation: `d` from now (none when d is zero), but never past the
// request's total deadline `total` (net::no_deadline: none).
net::Deadline deadline_in(std::chrono::nanoseconds d, net::Deadline total) {
  net::Deadline own = d.count() > 0 ? net::deadline_after(d) : net::no_deadline;
  if (total == net::no_deadline) return own;
  return own == net::no_deadline ? total : std::min(own, total);
}

// A pooled connection whose server has closed it (or sent something unasked) is not
// worth a request.
bool looks_dead(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && p.revents != 0;
}

// A body up to this size is written by the calling goroutine before it reads the
// response: on a connection whose peer has read what came before, it fits the kernel's
// send buffer and the write does not wait. A larger body is written by a goroutine of
// its own while the caller reads the response, as Go's transport writes every body, so
// a server that answers early (413, 401) and stops reading is heard when it answers,
// not at the write timeout.
constexpr std::size_t kInlineBody = 64 * 1024;

// The writing of one request as the reader of its response sees it. While the body is
// still going out, the response has no read timeout of its own, only the call's total
// deadline: a slow upload is not a slow server (Go's ResponseHeaderTimeout, too, starts
// once the request is written). Once the request is sent, the read timeout applies;
// once its write failed, a brief look for an answer the server may have sent before it
// stopped reading or closed (RFC 9112 9.5), after which the write's error is the result.
class RequestWrite {
 public:
  RequestWrite(net::Stream& stream, const ClientOptions& options, net::Deadline total)
      : stream_(stream), options_(options), total_(total) {}
  ~RequestWrite() { stop(); }
  RequestWrite(const RequestWrite&) = delete;
  RequestWrite& operator=(const RequestWrite&) = delete;

  // Starts a goroutine writing the count buffers of iov under ctx. iov and what it
  // points to must outlive stop() (the destructor calls it).
  void start(const iovec* iov, int count, const Context& ctx) {
    running_ = true;
    writer_.add(1);
    goro::go([this, iov, count, &ctx] {
      Result<std::size_t> n = net::with_context(stream_, net::IoMode::write, ctx,
                                                [&] { return stream_.writev(iov, count); });
      finish(n ? std::error_code() : n.error());
      writer_.done();
    });
  }

  // Records the end of the write, with its error if it failed.
  void finish(std::error_code ec) {
    std::lock_guard lock(mu_);
    done_ = true;
    error_ = ec;
    // A read already waiting gets the deadline of the new state too.
    set_read_deadline_locked();
  }

  // Sets the stream's read deadline for where the write is. Under mu_, so that a write
  // ending meanwhile cannot have its deadline replaced by the one of the state before.
  void set_read_deadline() {
    std::lock_guard lock(mu_);
    set_read_deadline_locked();
  }

  // The write's error once it has failed; {} while it runs or when it succeeded.
  std::error_code error() {
    std::lock_guard lock(mu_);
    return error_;
  }

  // Ends a write still running (its wait fails at once with a timeout) and waits for
  // its goroutine. Whether the whole request was sent. Caller only.
  bool stop() {
    if (running_) {
      {
        std::lock_guard lock(mu_);
        if (!done_) stream_.set_write_deadline(std::chrono::steady_clock::now());
      }
      writer_.wait();
      running_ = false;
    }
    std::lock_guard lock(mu_);
    return done_ && !error_;
  }

 private:
  void set_read_deadline_locked() {
    if (!done_) {
      stream_.set_read_deadline(total_);
    } else if (error_) {
      auto brief = std::chrono::nanoseconds(std::chrono::seconds(1));
      if (options_.read_timeout.count() > 0) brief = std::min(brief, options_.read_timeout);
      stream_.set_read_deadline(deadline_in(brief, total_));
    } else {
      stream_.set_read_deadline(deadline_in(options_.read_timeout, total_));
    }
  }

  net::Stream& stream_;
  const ClientOptions& options_;
  const net::Deadline total_;
  goro::Mutex mu_;  // guards done_ and error_, and orders read deadlines with them
  bool done_ = false;
  std::error_code error_;
  bool running_ = false;  // a writer goroutine was started and not yet waited for
  goro::WaitGroup writer_;
};

}  // namespace

// The HTTP/2 connections to one origin (h2_client.hpp), and what is known of it.
struct H2Origin {
  std::vector<std::shared_ptr<detail::H2ClientConn>> conns;
  // Closed when the connection being dialled is ready or failed; the callers that found
  // no free stream meanwhile wait for it rather than dial their own.
  Chan<std::monostate> dial_done = Chan<std::monostate>::nil();
  bool dialing = false;
  bool speaks_http1 = false;  // https: the server chose HTTP/1.1 by ALPN
};

// Where a call goes: a stream slot on an HTTP/2 connection, or HTTP/1.1 (on http1 if
// the dial just made it, else on the pool's).
struct H2Pick {
  std::shared_ptr<detail::H2ClientConn> conn;
  std::optional<PooledConn> http1;
};

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
  ClientOptions options;
  goro::Mutex mu;  // guards idle, reaping, tls and h2
  std::unordered_map<std::string, std::vector<PooledConn>> idle;
  bool reaping = false;  // a reaper goroutine runs
  std::shared_ptr<net::TlsContext> tls;
  std::unordered_map<std::string, H2Origin> h2;

  // Whether calls to url's origin try HTTP/2.
  bool h2_possible(const Url& url) const {
    return (url.scheme == "http" && options.h2c) || (url.scheme == "https" && options.http2);
  }
  // A stream slot on an HTTP/2 connection to url's origin (key), dialling one when none
  // has a free slot; with allow_http1, an empty pick (or the new HTTP/1.1 connection)
  // when the origin answers TLS with HTTP/1.1, else errc::http2_required. Parks while
  // connecting or waiting for another caller's dial.
  Result<H2Pick> pick_h2(const Url& url, const std::string& key, net::Deadline total,
                         const Context& ctx, bool allow_http1);
  // Closes the HTTP/2 connections (only those without streams, with only_idle).
  void close_h2(bool only_idle);

  // Moves the connections idle longer than idle_timeout, of every host, into stale.
  // Under mu.
  void take_expired(std::vector<PooledConn>& stale);
  // The reaper: while the pool holds connections, closes those past idle_timeout. It
  // keeps only a weak reference, so a Client destroyed meanwhile ends it.
  static void reap(std::weak_ptr<Impl> weak);

  std::optional<PooledConn> take_idle(const std::string& key);
  void put_idle(const std::string& key, PooledConn conn);
  Result<ClientResponse> round_trip(const ClientRequest& request, const Url& url,
                                    net::Deadline total);
  // The HTTP/1.1 attempts of round_trip; first: a connection just dialled for it.
  Result<ClientResponse> round_trip_http1(const ClientRequest& request, const Url& url,
                                          net::Deadline total, std::optional<PooledConn> first);
  Result<PooledConn> connect(const Url& url, net::Deadline total, const Context& ctx);
  // round_trip, then the redirects options.max_redirects allows.
  Result<ClientResponse> follow_redirects(const ClientRequest& request, Url url,
                                          net::Deadline total);
  // One attempt on conn. reusable: the connection may go back to the pool;
  // got_anything: a response byte arrived (without one, a retry is safe).
  Result<ClientResponse> exchange(PooledConn& conn, const ClientRequest& request, const Url& url,
                                  net::Deadline total, bool& reusable, bool& got_anything);
};

Result<PooledConn> Client::Impl::connect(const Url& url, net::Deadline total,
                                         const Context& cancel) {
  std::string address = net::join_host_port(url.host, url.port);
  std::chrono::nanoseconds dial_timeout = options.connect_timeout;
  if (total != net::no_deadline) {
    auto left = total - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) return make_error_code(net::errc::timeout);
    if (dial_timeout.count() <= 0 || left < dial_timeout) dial_timeout = left;
  }
  Result<net::Conn> conn = net::dial("tcp", address, dial_timeout, cancel);
  if (!conn) return conn.error();
  PooledConn pooled;
  pooled.fd = conn->fd();
  if (url.scheme == "https") {
    std::shared_ptr<net::TlsContext> ctx;
    {
      std::lock_guard lock(mu);
      if (!tls) {
        net::TlsConfig config;
        config.ca_file = options.ca_file;
        if (options.client_certificate) config.certificates.push_back(*options.client_certificate);
        config.verify = options.verify;
        config.alpn = options.http2 ? std::vector<std::string>{"h2", "http/1.1"}
                                    : std::vector<std::string>{"http/1.1"};
        Result<std::shared_ptr<net::TlsContext>> made = net::TlsContext::client(config);
        if (!made) return made.error();
        tls = *made;
      }
      ctx = tls;
    }
    conn->set_deadline(deadline_in(options.connect_timeout, total));
    Result<net::TlsConn> secure =
        net::TlsConn::client(std::make_unique<net::Conn>(std::move(*conn)), ctx,
                             options.tls_server_name.empty() ? url.host : options.tls_server_name);
    if (!secure) return secure.error();
    if (std::error_code ec = secure->handshake(cancel)) return ec;
    secure->set_deadline(net::no_deadline);
    pooled.alpn = secure->negotiated_alpn();
    pooled.stream = std::make_unique<net::TlsConn>(std::move(*secure));
  } else {
    pooled.stream = std::make_unique<net::Conn>(std::move(*conn));
  }
  detail::ParserLimits limits;
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_body_bytes = options.max_body_bytes;
  pooled.parser =
      std::make_unique<detail::MessageParser>(detail::MessageParser::Mode::response, limits);
  return pooled;
}

std::optional<PooledConn> Client::Impl::take_idle(const std::string& key) {
  std::vector<PooledConn> stale;
  std::optional<PooledConn> found;
  {
    std::lock_guard lock(mu);
    take_expired(stale);
    auto it = idle.find(key);
    while (it != idle.end() && !it->second.empty()) {
      PooledConn c = std::move(it->second.back());
      it->second.pop_back();
      if (looks_dead(c.fd)) {  // (the expired ones went above)
        stale.push_back(std::move(c));
        continue;
      }
      found = std::move(c);
      break;
    }
    if (it != idle.end() && it->second.empty()) idle.erase(it);
  }
  for (PooledConn& c : stale) c.stream->close();
  return found;
}

void Client::Impl::take_expired(std::vector<PooledConn>& stale) {
  auto now = std::chrono::steady_clock::now();
  for (auto h = idle.begin(); h != idle.end();) {
    std::vector<PooledConn>& list = h->second;
    for (std::size_t i = 0; i < list.size();) {
      if (now - list[i].idle_since > options.idle_timeout) {
        stale.push_back(std::move(list[i]));
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    h = list.empty() ? idle.erase(h) : std::next(h);
  }
}

void Client::Impl::reap(std::weak_ptr<Impl> weak) {
  for (;;) {
    std::chrono::nanoseconds period;
    {
      std::shared_ptr<Impl> self = weak.lock();
      if (!self) return;
      period = std::max<std::chrono::nanoseconds>(self->options.idle_timeout / 2,
                                                  std::chrono::milliseconds(1));
    }
    goro::sleep(period);
    std::shared_ptr<Impl> self = weak.lock();
    if (!self) return;
    std::vector<PooledConn> stale;
    bool done;
    {
      std::lock_guard lock(self->mu);
      self->take_expired(stale);
      done = self->idle.empty();
      if (done) self->reaping = false;  // put_idle starts another when it adds one
    }
    for (PooledConn& c : stale) c.stream->close();
    if (done) return;
  }
}

void Client::Impl::put_idle(const std::string& key, PooledConn conn) {
  conn.idle_since = std::chrono::steady_clock::now();
  bool start_reaper = false;
  {
    std::lock_guard lock(mu);
    std::vector<PooledConn>& list = idle[key];
    if (list.size() < options.max_idle_per_host && options.idle_timeout.count() > 0) {
      list.push_back(std::move(conn));
      start_reaper = !std::exchange(reaping, true);
    }
  }
  if (start_reaper) {
    goro::go([weak = weak_from_this()] { reap(weak); });
    return;
  }
  if (conn.stream) conn.stream->close();
}

Result<ClientResponse> Client::Impl::exchange(PooledConn& conn, const ClientRequest& request,
                                              const Url& url, net::Deadline total, bool& reusable,
                                              bool& got_anything) {
  reusable = false;
  got_anything = false;
  if (!detail::is_token(request.method)) return errc::invalid_request;
  for (HeaderField f : request.headers) {
    if (!detail::is_token(f.name) || !detail::is_field_value(f.value)) return errc::invalid_request;
  }
  std::string head;
  head.reserve(256);
  head.append(request.method).append(" ").append(url.target).append(" HTTP/1.1\r\n");
  if (!request.headers.has("host")) {
    head.append("Host: ");
    bool default_port =
        (url.scheme == "http" && url.port == 80) || (url.scheme == "https" && url.port == 443);
    head.append(default_port
                    ? (url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host)
                    : net::join_host_port(url.host, url.port));
    head.append("\r\n");
  }
  if (!request.headers.has("user-agent") && !options.user_agent.empty()) {
    head.append("User-Agent: ").append(options.user_agent).append("\r\n");
  }
  for (HeaderField f : request.headers) {
    if (iequals(f.name, "content-length") || iequals(f.name, "transfer-encoding")) continue;
    head.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  bool send_length =
      !request.body.empty() ||
      !(request.method == "GET" || request.method == "HEAD" || request.method == "DELETE" ||
        request.method == "OPTIONS" || request.method == "TRACE");
  if (send_length)
    head.append("Content-Length: ").append(std::to_string(request.body.size())).append("\r\n");
  head.append("\r\n");

  conn.stream->set_write_deadline(deadline_in(options.write_timeout, total));
  iovec iov[2] = {{head.data(), head.size()},
                  {const_cast<char*>(request.body.data()), request.body.size()}};
  RequestWrite writing(*conn.stream, options, total);
  if (request.body.size() <= kInlineBody) {
    Result<std::size_t> n = conn.stream->writev(iov, request.body.empty() ? 1 : 2);
    // A server may answer before it has read the whole body (413, 401) and stop reading
    // or close: the write then fails, but the answer may be waiting. Look for it
    // briefly; without one, the write's error is the result (RFC 9112 9.5).
    if (!n && request.body.empty()) return n.error();
    writing.finish(n ? std::error_code() : n.error());
  } else {
    writing.start(iov, 2, request.context);
  }

  detail::MessageParser& parser = *conn.parser;
  parser.set_response_to_head(request.method == "HEAD");
  auto read_more = [&]() -> Result<std::size_t> {
    writing.set_read_deadline();
    std::span<char> space = parser.read_space();
    Result<std::size_t> n = conn.stream->read(space.data(), space.size());
    if (n && *n > 0) {
      parser.commit(*n);
      got_anything = true;
    }
    return n;
  };
  auto parse_failure = [&]() -> std::error_code {
    if (std::error_code e = writing.error()) return e;
    switch (parser.error().status) {
      case 413: return make_error_code(errc::body_too_large);
      case 431: return make_error_code(errc::header_too_large);
      default: return make_error_code(errc::malformed_response);
    }
  };

  // The head; interim 1xx responses (100 Continue, 103 Early Hints) are skipped, a few
  // of them (a server sending them forever would hold the call past every timeout).
  constexpr int kMaxInterim = 5;
  for (int interim = 0;;) {
    detail::ParseStatus st = parser.parse_head();
    if (st == detail::ParseStatus::error) return parse_failure();
    if (st == detail::ParseStatus::complete) {
      if (parser.status_code() >= 100 && parser.status_code() < 200 &&
          parser.status_code() != 101) {
        if (++interim > kMaxInterim) return errc::malformed_response;
        parser.next_message();
        continue;
      }
      break;
    }
    Result<std::size_t> n = read_more();
    if (!n) return writing.error() ? writing.error() : n.error();
    if (*n == 0) return writing.error() ? writing.error() : make_error_code(errc::unexpected_eof);
  }

  ClientResponse response;
  response.status = parser.status_code();
  response.reason = std::string(parser.status_text());
  response.version_minor = parser.version_minor();
  for (const HeaderField& f : parser.headers()) response.headers.add(f.name, f.value);
  // Room for the announced body, up to a bound: the announcement is the server's word.
  constexpr std::int64_t kMaxReserve = 1 << 20;
  if (parser.content_length() > 0)
    response.body.reserve(static_cast<std::size_t>(std::min(parser.content_length(), kMaxReserve)));
  for (;;) {
    response.body.append(parser.peek_body());
    parser.skip(parser.available());
    if (parser.message_complete()) break;
    detail::ParseStatus st = parser.parse_body();
    if (st == detail::ParseStatus::error) return parse_failure();
    if (st == detail::ParseStatus::complete || parser.available() > 0) continue;
    Result<std::size_t> n = read_more();
    if (!n) return n.error();
    if (*n == 0) {
      if (parser.finish_on_eof() != detail::ParseStatus::complete) return errc::unexpected_eof;
      response.body.append(parser.peek_body());
      parser.skip(parser.available());
      break;
    }
  }
  // A response that came while the body was still going out ends the write: the
  // connection is in an unknown state (part of the body unsent), so it is not reused.
  const bool body_sent = writing.stop();
  reusable = body_sent && parser.keep_alive() && !parser.upgrade() && parser.buffered() == 0 &&
             !has_token(response.header("connection"), "close");
  if (reusable) parser.next_message();
  return response;
}

Result<H2Pick> Client::Impl::pick_h2(const Url& url, const std::string& key, net::Deadline total,
                                     const Context& ctx, bool allow_http1) {
  for (;;) {
    Chan<std::monostate> other_dial = Chan<std::monostate>::nil();
    bool wait = false;
    {
      std::lock_guard lock(mu);
      H2Origin& origin = h2[key];
      std::erase_if(origin.conns, [](const auto& c) { return c->finished(); });
      for (const auto& c : origin.conns) {
        if (c->try_reserve()) return H2Pick{c, std::nullopt};
      }
      if (origin.speaks_http1 && allow_http1) return H2Pick{};
      if (origin.dialing) {
        other_dial = origin.dial_done;
        wait = true;
      } else {
        origin.dialing = true;
        origin.dial_done = Chan<std::monostate>();
      }
    }
    if (wait) {
      if (total == net::no_deadline) {
        goro::select(goro::recv_case(other_dial), goro::recv_case(ctx.done()));
      } else {
        auto left = total - std::chrono::steady_clock::now();
        if (left <= std::chrono::nanoseconds::zero() ||
            goro::select(goro::recv_case(other_dial), goro::recv_case(ctx.done()),
                         goro::timeout_case(left)) == 2)
          return make_error_code(net::errc::timeout);
      }
      if (auto e = ctx.err()) return e;
      continue;
    }
    Result<PooledConn> fresh = connect(url, total, ctx);
    std::shared_ptr<detail::H2ClientConn> conn;
    std::error_code ec;
    const bool http1 = fresh && url.scheme == "https" && fresh->alpn != "h2";
    if (fresh && !http1) {
      detail::H2ClientSettings settings;
      settings.write_timeout = options.write_timeout;
      settings.idle_timeout = options.idle_timeout;
      settings.ping_interval = options.ping_interval;
      settings.ping_timeout = options.ping_timeout;
      settings.max_header_bytes = options.max_header_bytes;
      settings.max_body_bytes = options.max_body_bytes;
      settings.user_agent = options.user_agent;
      conn = detail::H2ClientConn::start(std::move(fresh->stream), std::move(settings));
      ec = conn->wait_ready(ctx, deadline_in(options.connect_timeout, total));
    }
    {
      std::lock_guard lock(mu);
      H2Origin& origin = h2[key];
      origin.dialing = false;
      origin.dial_done.close();
      origin.dial_done = Chan<std::monostate>::nil();
      if (http1) origin.speaks_http1 = true;
      if (conn && !ec) {
        origin.speaks_http1 = false;
        origin.conns.push_back(conn);
      }
    }
    if (!fresh) return fresh.error();
    if (ec) return ec;
    if (http1) {
      if (allow_http1) return H2Pick{nullptr, std::move(*fresh)};
      fresh->stream->close();
      return errc::http2_required;
    }
  }
}

void Client::Impl::close_h2(bool only_idle) {
  // Outside a runtime (a Client destroyed after goro::run returned) the connections'
  // goroutines are gone: nothing is left to end them.
  if (goro::goid() == 0) return;
  std::vector<Chan<std::monostate>> ending;
  {
    std::lock_guard lock(mu);
    for (auto& [key, origin] : h2) {
      for (const auto& c : origin.conns) {
        if (auto ended = c->close(only_idle)) ending.push_back(std::move(*ended));
      }
      std::erase_if(origin.conns, [](const auto& c) { return c->finished(); });
    }
  }
  // Waits (briefly: the readers wake at once) for the goroutines of the connections
  // ended now, so that none outlives the runtime holding a socket.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (const Chan<std::monostate>& e : ending) {
    auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) break;
    goro::select(goro::recv_case(e), goro::timeout_case(left));
  }
}

// A REFUSED_STREAM reset (the server's limit, or past a GOAWAY's last stream) or a
// connection that ended before the stream went out: the request was not processed,
// and goes again on another connection, this many times at most.
constexpr int kH2Retries = 3;

Result<ClientResponse> Client::Impl::round_trip(const ClientRequest& request, const Url& url,
                                                net::Deadline total) {
  std::string key = url.scheme + "://" + net::join_host_port(url.host, url.port);
  if (!h2_possible(url)) return round_trip_http1(request, url, total, std::nullopt);
  for (int attempt = 0;; ++attempt) {
    Result<H2Pick> pick = pick_h2(url, key, total, request.context, true);
    if (!pick) return pick.error();
    if (!pick->conn) return round_trip_http1(request, url, total, std::move(pick->http1));
    Result<std::unique_ptr<detail::H2ClientStream>> stream =
        pick->conn->open(request, url, true, true, total);
    if (!stream) {
      if (stream.error() == errc::connection_lost && attempt < kH2Retries) continue;
      return stream.error();
    }
    Result<ClientResponse> r = (*stream)->collect(options.read_timeout);
    if (!r && attempt < kH2Retries) {
      if (r.error() == errc::stream_reset && (*stream)->reset_code() == NGHTTP2_REFUSED_STREAM)
        continue;
      // The connection went (the server closed it as the request left) before any
      // answer: as over HTTP/1.1, an idempotent request goes again.
      if (r.error() == errc::connection_lost && !(*stream)->answered() &&
          idempotent(request.method) && !request.context.err())
        continue;
    }
    return r;
  }
}

Result<ClientResponse> Client::Impl::round_trip_http1(const ClientRequest& request, const Url& url,
                                                      net::Deadline total,
                                                      std::optional<PooledConn> first) {
  std::string key = url.scheme + "://" + net::join_host_port(url.host, url.port);
  const bool dialled = first.has_value();
  for (int attempt = 0;; ++attempt) {
    std::optional<PooledConn> pooled;
    if (attempt == 0) pooled = dialled ? std::move(first) : take_idle(key);
    bool reused = pooled.has_value() && !(dialled && attempt == 0);
    if (!pooled) {
      Result<PooledConn> fresh = connect(url, total, request.context);
      if (!fresh) return fresh.error();
      pooled = std::move(*fresh);
    }
    bool reusable = false, got_anything = false;
    // The context's cancellation interrupts whichever of the write and the read parks.
    Result<ClientResponse> r = net::with_context(*pooled->stream, net::IoMode::both,
                                                 request.context, [&] {
                                                   return exchange(*pooled, request, url, total,
                                                                   reusable, got_anything);
                                                 });
    if (r && reusable) {
      put_idle(key, std::move(*pooled));
    } else {
      pooled->stream->close();
    }
    if (!r && reused && !got_anything && idempotent(request.method) &&
        !net::is_timeout(r.error()) && !request.context.err()) {
      continue;  // the server had dropped the idle connection
    }
    return r;
  }
}

Client::Client(ClientOptions options) : impl_(std::make_shared<Impl>()) {
  impl_->options = std::move(options);
}

Client::~Client() {
  close_idle();
  impl_->close_h2(false);
}

namespace {

// One deadline for the whole call, redirects included (Go's Client.Timeout), and the
// context's.
net::Deadline call_deadline(const ClientRequest& request, const ClientOptions& options) {
  std::chrono::nanoseconds timeout = request.timeout.count() > 0 ? request.timeout : options.timeout;
  net::Deadline total = timeout.count() > 0 ? net::deadline_after(timeout) : net::no_deadline;
  if (auto d = request.context.deadline(); d && (total == net::no_deadline || *d < total))
    total = *d;
  return total;
}

// Whatever the attempt was doing when the context ended, the context says why.
std::error_code context_says(const ClientRequest& request, std::error_code ec) {
  if (auto e = request.context.err()) return e;
  if (auto d = request.context.deadline();
      d && net::is_timeout(ec) && *d <= std::chrono::steady_clock::now())
    return make_error_code(context_errc::deadline_exceeded);
  return ec;
}

Result<ClientResponse> send_untraced(Client::Impl& impl, const ClientRequest& request, Url url) {
  net::Deadline total = call_deadline(request, impl.options);
  Result<ClientResponse> response = impl.follow_redirects(request, std::move(url), total);
  if (!response) return context_says(request, response.error());
  return response;
}

}  // namespace

Result<ClientResponse> Client::send(const ClientRequest& request) {
  Result<Url> url = parse_url(request.url);
  if (!url) return url.error();
  if (auto e = request.context.err()) return e;
  return detail::send_in_client_span(request, [&](const ClientRequest& r) {
    return send_untraced(*impl_, r, std::move(*url));
  });
}

Result<std::unique_ptr<ClientStream>> Client::open_stream(const ClientRequest& request) {
  Result<Url> url = parse_url(request.url);
  if (!url) return url.error();
  if (!impl_->h2_possible(*url)) return errc::http2_required;
  if (auto e = request.context.err()) return e;
  net::Deadline total = call_deadline(request, impl_->options);
  std::string key = url->scheme + "://" + net::join_host_port(url->host, url->port);
  for (int attempt = 0;; ++attempt) {
    Result<H2Pick> pick = impl_->pick_h2(*url, key, total, request.context, false);
    if (!pick) return context_says(request, pick.error());
    Result<std::unique_ptr<detail::H2ClientStream>> stream =
        pick->conn->open(request, *url, false, false, total);
    if (!stream) {
      if (stream.error() == errc::connection_lost && attempt < kH2Retries) continue;
      return stream.error();
    }
    return std::unique_ptr<ClientStream>(std::move(*stream));
  }
}

Result<ClientResponse> Client::Impl::follow_redirects(const ClientRequest& request, Url url,
                                                net::Deadline total) {
  Result<ClientResponse> response = round_trip(request, url, total);
  const std::string first_host = url.host;
  int redirects = 0;
  ClientRequest next;
  while (response && options.max_redirects > 0) {
    int s = response->status;
    std::string_view location = response->header("location");
    if (!(s == 301 || s == 302 || s == 303 || s == 307 || s == 308) || location.empty()) break;
    if (++redirects > options.max_redirects) return errc::too_many_redirects;
    const ClientRequest& previous = redirects == 1 ? request : next;
    ClientRequest follow;
    follow.headers = previous.headers;
    follow.headers.remove("host");
    if (s == 301 || s == 302 || s == 303) {
      // Go's rule, which is what browsers do: any method but GET and HEAD becomes a
      // GET, without the body or the headers that described it. 307 and 308 keep the
      // method and the body (which the request holds, so it can be sent again).
      const bool keep = previous.method == "GET" || previous.method == "HEAD";
      follow.method = keep ? previous.method : "GET";
      if (!keep) {
        follow.headers.remove("content-type");
        follow.headers.remove("content-length");
        follow.headers.remove("content-encoding");
        follow.headers.remove("transfer-encoding");
      }
    } else {
      follow.method = previous.method;
      follow.body = previous.body;
    }
    follow.context = previous.context;
    follow.url = detail::resolve_reference(url, location);
    Result<Url> target = parse_url(follow.url);
    if (!target) return target.error();
    // Credentials go only to the host they were given for (or its subdomains), as Go
    // does: a redirect elsewhere must not carry them.
    if (!detail::same_or_subdomain(target->host, first_host)) {
      for (std::string_view name : {"authorization", "www-authenticate", "cookie", "cookie2"})
        follow.headers.remove(name);
    }
    next = std::move(follow);
    url = std::move(*target);
    response = round_trip(next, url, total);
  }
  return response;
}

Result<ClientResponse> Client::get(std::string_view url) {
  ClientRequest r;
  r.url = std::string(url);
  return send(r);
}

Result<ClientResponse> Client::get(std::string_view url, const Context& ctx) {
  ClientRequest r;
  r.url = std::string(url);
  r.context = ctx;
  return send(r);
}

Result<ClientResponse> Client::post(std::string_view url, std::string_view content_type,
                                    std::string body) {
  ClientRequest r;
  r.method = "POST";
  r.url = std::string(url);
  r.headers.set("Content-Type", content_type);
  r.body = std::move(body);
  return send(r);
}

void Client::close_idle() {
  impl_->close_h2(true);
  std::unordered_map<std::string, std::vector<PooledConn>> idle;
  {
    std::lock_guard lock(impl_->mu);
    idle.swap(impl_->idle);
  }
  for (auto& [key, list] : idle) {
    for (PooledConn& c : list) c.stream->close();
  }
}

}  // namespace goro::http
