// H2ClientConn and H2ClientStream (h2_client.hpp has the design).
#include "client/h2_client.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <goro/http/errors.hpp>
#include <goro/net/addr.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "h1/message_parser.hpp"

namespace goro::http::detail {
namespace {

// Bytes of frames gathered for one socket write, and read at once.
constexpr std::size_t kWriteBatch = 64 * 1024;
constexpr std::size_t kReadBuffer = 64 * 1024;
// The receive windows advertised: per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the
// connection. A slow reader holds at most a stream window of response unread; the
// connection's is large enough that one slow stream does not stall the others.
constexpr std::int32_t kStreamWindow = 1024 * 1024;
constexpr std::int32_t kConnectionWindow = 64 * 1024 * 1024;
// Request bytes a stream queues past what flow control has let out before write parks.
constexpr std::size_t kSendBuffer = 64 * 1024;
// What a stream counts on before the server's SETTINGS (RFC 9113 6.5.2 recommends no
// less than 100); open() waits for them anyway.
constexpr std::uint32_t kAssumedMaxStreams = 100;

H2ClientStream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<H2ClientStream*>(nghttp2_session_get_stream_user_data(session, id));
}

// Header fields that mean something only to HTTP/1.1 (RFC 9113 8.2.2).
bool connection_specific(std::string_view name) {
  return iequals(name, "connection") || iequals(name, "keep-alive") ||
         iequals(name, "proxy-connection") || iequals(name, "transfer-encoding") ||
         iequals(name, "upgrade") || iequals(name, "host");
}

nghttp2_nv field(std::string_view name, std::string_view value) {
  // nghttp2 copies names (lower-casing them) and values on submit.
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// The data provider of every request body. By id: a stream destroyed by its caller has
// detached itself (and is being reset).
ssize_t pull_request_body(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                          std::size_t len, std::uint32_t* flags, nghttp2_data_source* /*source*/,
                          void* /*user_data*/) {
  H2ClientStream* s = stream_of(session, id);
  if (s == nullptr) return NGHTTP2_ERR_DEFERRED;
  return s->pull(buf, len, flags);
}

// nghttp2's callbacks; all run with mu_ held (inside mem_recv, mem_send or a submit).
struct H2ClientCallbacks {
  static H2ClientConn& conn(void* user_data) { return *static_cast<H2ClientConn*>(user_data); }

  static int header(nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
                    std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                    std::uint8_t /*flags*/, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    H2ClientStream* s = stream_of(session, frame->hd.stream_id);
    if (s == nullptr) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    // Counted as SETTINGS_MAX_HEADER_LIST_SIZE counts: name, value and 32 per field.
    s->head_bytes_ += namelen + valuelen + 32;
    if (s->head_bytes_ > conn(user_data).settings_.max_header_bytes) {
      s->fail(make_error_code(errc::header_too_large));
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (s->head_done_) {
      if (!n.empty() && n[0] != ':') s->response_.trailers.add(n, v);
      return 0;
    }
    if (n == ":status") {
      int status = 0;
      std::from_chars(v.data(), v.data() + v.size(), status);
      s->response_.status = status;
    } else if (!n.empty() && n[0] != ':') {
      s->response_.headers.add(n, v);
    }
    return 0;
  }

  static int frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    H2ClientConn& c = conn(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && !c.ready_closed_) {
          c.ready_closed_ = true;
          c.ready_.close();
        }
        return 0;
      case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) c.ping_outstanding_ = false;
        return 0;
      case NGHTTP2_GOAWAY:
        // nghttp2 closes the streams above last_stream_id itself (REFUSED_STREAM); the
        // others finish. New streams go to another connection.
        c.goaway_ = true;
        return 0;
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: break;
      default: return 0;
    }
    H2ClientStream* s = stream_of(session, frame->hd.stream_id);
    if (s == nullptr) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !s->head_done_) {
      if (s->response_.status >= 100 && s->response_.status < 200) {
        // An interim head (100 Continue, 103 Early Hints): skipped.
        s->response_.status = 0;
        s->response_.headers = Headers();
        s->head_bytes_ = 0;
      } else {
        s->head_done_ = true;
        s->head_bytes_ = 0;
      }
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) s->in_end_ = true;
    s->wake_reader();
    return 0;
  }

  static int data_chunk(nghttp2_session* session, std::uint8_t /*flags*/, std::int32_t id,
                        const std::uint8_t* data, std::size_t len, void* /*user_data*/) {
    H2ClientStream* s = stream_of(session, id);
    if (s == nullptr) {
      nghttp2_session_consume(session, id, len);
      return 0;
    }
    if (s->collect_) {
      // Client::send: the whole body is wanted; acknowledged as it comes.
      nghttp2_session_consume(session, id, len);
      if (s->response_.body.size() + len > s->max_body_) {
        s->fail(make_error_code(errc::body_too_large));
        return 0;
      }
      s->response_.body.append(reinterpret_cast<const char*>(data), len);
      return 0;
    }
    if (s->in_pos_ == s->in_.size()) {
      s->in_.clear();
      s->in_pos_ = 0;
    } else if (s->in_pos_ > 64 * 1024) {
      s->in_.erase(0, s->in_pos_);
      s->in_pos_ = 0;
    }
    s->in_.append(reinterpret_cast<const char*>(data), len);
    s->wake_reader();
    return 0;
  }

  static int stream_close(nghttp2_session* session, std::int32_t id, std::uint32_t error_code,
                          void* user_data) {
    H2ClientConn& c = conn(user_data);
    if (c.active_ > 0 && --c.active_ == 0) {
      c.idle_since_ = std::chrono::steady_clock::now();
      c.refresh_read_deadline();
    }
    if (H2ClientStream* s = stream_of(session, id)) {
      nghttp2_session_set_stream_user_data(session, id, nullptr);
      s->closed(error_code);
    }
    return 0;
  }
};

// ---- H2ClientStream ----

H2ClientStream::H2ClientStream(std::shared_ptr<H2ClientConn> conn, const Context& ctx,
                               net::Deadline deadline)
    : conn_(std::move(conn)),
      ctx_(ctx),
      cancellable_(ctx.can_cancel()),
      done_(cancellable_ ? ctx.done() : Chan<std::monostate>::nil()),
      deadline_(deadline) {
  response_.version_major = 2;
  response_.version_minor = 0;
}

H2ClientStream::~H2ClientStream() {
  std::shared_ptr<H2ClientConn> conn = conn_;  // outlives the lock
  {
    std::lock_guard lock(conn->mu_);
    if (!closed_) {
      if (!conn->dead_) {
        reset();
        nghttp2_session_set_stream_user_data(conn->session_, id_, nullptr);
      }
      conn->unlink(this);
    }
  }
  conn->wake_writer();
}

void H2ClientStream::closed(std::uint32_t error_code) {
  if (closed_) return;
  closed_ = true;
  conn_->unlink(this);
  if (!error_ && error_code != NGHTTP2_NO_ERROR) {
    error_ = make_error_code(errc::stream_reset);
    reset_code_ = error_code;
  } else if (!error_ && !in_end_) {
    // Closed with NO_ERROR before the response ended: a reset all the same.
    error_ = make_error_code(errc::stream_reset);
  }
  wake_reader();
  wake_writer();
}

void H2ClientStream::reset() {
  // Once only: while the request's HEADERS still wait in nghttp2's queue, the first
  // RST_STREAM cancels them (nothing goes out, the stream closes with CANCEL), but a
  // second one is queued as a frame of its own, for a stream the server has never seen:
  // RST_STREAM on an idle stream, which the server must answer with GOAWAY
  // (PROTOCOL_ERROR, RFC 9113 6.4), refusing the calls queued behind it and ending the
  // connection.
  if (reset_submitted_) return;
  reset_submitted_ = true;
  nghttp2_submit_rst_stream(conn_->session_, NGHTTP2_FLAG_NONE, id_, NGHTTP2_CANCEL);
}

void H2ClientStream::fail(std::error_code ec) {
  if (!error_) error_ = ec;
  if (!closed_ && !conn_->dead_) {
    reset();
    conn_->wake_writer();
  }
  wake_reader();
  wake_writer();
}

std::error_code H2ClientStream::park(std::unique_lock<goro::Mutex>& lock, const Chan<int>& wake,
                                     net::Deadline limit) {
  net::Deadline until = deadline_;
  if (limit != net::no_deadline && (until == net::no_deadline || limit < until)) until = limit;
  lock.unlock();
  bool timed_out = false;
  if (until == net::no_deadline) {
    if (cancellable_) {
      goro::select(goro::recv_case(wake), goro::recv_case(done_));
    } else {
      wake.recv();
    }
  } else {
    auto left = until - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      timed_out = true;
    } else if (cancellable_) {
      timed_out = goro::select(goro::recv_case(wake), goro::recv_case(done_),
                               goro::timeout_case(left)) == 2;
    } else {
      timed_out = goro::select(goro::recv_case(wake), goro::timeout_case(left)) == 1;
    }
  }
  lock.lock();
  if (std::error_code e = ctx_.err()) {
    fail(e);
  } else if (timed_out) {
    fail(make_error_code(net::errc::timeout));
  }
  return error_;
}

void H2ClientStream::check_context() {
  if (cancellable_ && !closed_ && !error_) {
    if (std::error_code e = ctx_.err()) fail(e);
  }
}

Result<std::size_t> H2ClientStream::read(void* buf, std::size_t len) {
  std::unique_lock lock(conn_->mu_);
  check_context();
  for (;;) {
    // Bytes of a response that ended are the caller's even if the stream was reset
    // after; those of a cut response are not.
    if (in_pos_ < in_.size() && (!error_ || in_end_)) {
      const std::size_t n = std::min(len, in_.size() - in_pos_);
      std::memcpy(buf, in_.data() + in_pos_, n);
      in_pos_ += n;
      if (!conn_->dead_) {
        nghttp2_session_consume(conn_->session_, id_, n);
        if (nghttp2_session_want_write(conn_->session_)) conn_->wake_writer();
      }
      return n;
    }
    if (in_end_ || len == 0) return std::size_t{0};
    if (error_) return error_;
    if (std::error_code e = park(lock, read_wake_)) {
      if (!in_end_) return e;
    }
  }
}

std::error_code H2ClientStream::wait_response() {
  std::unique_lock lock(conn_->mu_);
  check_context();
  for (;;) {
    if (head_done_) return {};
    if (error_) return error_;
    park(lock, read_wake_);
  }
}

Result<ClientResponse> H2ClientStream::collect(std::chrono::nanoseconds read_timeout) {
  std::unique_lock lock(conn_->mu_);
  for (;;) {
    if (in_end_ && head_done_) return std::move(response_);
    if (error_) return error_;
    park(lock, read_wake_,
         read_timeout.count() > 0 ? net::deadline_after(read_timeout) : net::no_deadline);
  }
}

std::error_code H2ClientStream::write(std::string_view data, bool end) {
  std::unique_lock lock(conn_->mu_);
  check_context();
  if (out_end_) return errc::request_finished;
  if (error_) return error_;
  if (closed_) return errc::stream_reset;  // the server has finished with the stream
  out_.append(data);
  out_end_ = end;
  nghttp2_session_resume_data(conn_->session_, id_);
  conn_->wake_writer();
  while (out_.size() - out_pos_ > kSendBuffer) {
    if (error_) return error_;
    if (closed_) return errc::stream_reset;
    if (std::error_code e = park(lock, write_wake_)) return e;
  }
  return {};
}

std::error_code H2ClientStream::close_send() {
  std::unique_lock lock(conn_->mu_);
  check_context();
  if (out_end_) return {};
  if (error_) return error_;
  if (closed_) return errc::stream_reset;
  out_end_ = true;
  nghttp2_session_resume_data(conn_->session_, id_);
  conn_->wake_writer();
  return {};
}

void H2ClientStream::cancel() {
  std::lock_guard lock(conn_->mu_);
  if (closed_) return;
  fail(make_error_code(context_errc::canceled));
}

bool H2ClientStream::answered() const {
  std::lock_guard lock(conn_->mu_);
  return head_done_ || response_.status != 0;
}

std::uint32_t H2ClientStream::reset_code() const {
  std::lock_guard lock(conn_->mu_);
  return reset_code_;
}

ssize_t H2ClientStream::pull(std::uint8_t* buf, std::size_t len, std::uint32_t* flags) {
  const std::size_t n = std::min(len, out_.size() - out_pos_);
  std::memcpy(buf, out_.data() + out_pos_, n);
  out_pos_ += n;
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
  } else if (out_pos_ > 64 * 1024) {
    out_.erase(0, out_pos_);
    out_pos_ = 0;
  }
  if (n > 0) wake_writer();  // room for the caller's next write
  if (out_.empty() && out_end_) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
  return n > 0 ? static_cast<ssize_t>(n) : static_cast<ssize_t>(NGHTTP2_ERR_DEFERRED);
}

// ---- H2ClientConn ----

H2ClientConn::H2ClientConn(std::unique_ptr<net::Stream> stream, H2ClientSettings settings)
    : stream_(std::move(stream)), settings_(std::move(settings)) {
  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, H2ClientCallbacks::header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, H2ClientCallbacks::frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                            H2ClientCallbacks::data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                         H2ClientCallbacks::stream_close);
  nghttp2_option* option;
  nghttp2_option_new(&option);
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_peer_max_concurrent_streams(option, kAssumedMaxStreams);
  nghttp2_session_client_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);

  const nghttp2_settings_entry entries[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kStreamWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(std::min<std::size_t>(settings_.max_header_bytes, UINT32_MAX))},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries, std::size(entries));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
  last_read_ = idle_since_ = std::chrono::steady_clock::now();
}

H2ClientConn::~H2ClientConn() { nghttp2_session_del(session_); }

std::shared_ptr<H2ClientConn> H2ClientConn::start(std::unique_ptr<net::Stream> stream,
                                                  H2ClientSettings settings) {
  std::shared_ptr<H2ClientConn> conn(new H2ClientConn(std::move(stream), std::move(settings)));
  conn->stream_->set_deadline(net::no_deadline);
  goro::go(GoOptions{.name = "http2 client writer"}, [conn]() mutable {
    conn->writer();
    Chan<std::monostate> ended = conn->writer_ended_;
    conn.reset();
    ended.close();
  });
  goro::go(GoOptions{.name = "http2 client reader"}, [conn]() mutable {
    conn->reader();
    Chan<std::monostate> ended = conn->ended_;
    conn.reset();
    ended.close();
  });
  return conn;
}

std::error_code H2ClientConn::wait_ready(const Context& ctx, net::Deadline deadline) {
  std::error_code ec;
  if (deadline == net::no_deadline) {
    goro::select(goro::recv_case(ready_), goro::recv_case(ctx.done()));
  } else {
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero() ||
        goro::select(goro::recv_case(ready_), goro::recv_case(ctx.done()),
                     goro::timeout_case(left)) == 2)
      ec = make_error_code(net::errc::timeout);
  }
  if (std::error_code e = ctx.err()) ec = e;
  std::lock_guard lock(mu_);
  if (!ec && (dead_ || !ready_closed_)) ec = make_error_code(errc::connection_lost);
  if (ec && !dead_) {
    // A connection nobody will use.
    closing_ = true;
    refresh_read_deadline();
  }
  return ec;
}

bool H2ClientConn::try_reserve() {
  std::lock_guard lock(mu_);
  if (dead_ || goaway_ || closing_ || broken_) return false;
  const std::uint32_t limit =
      nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  if (active_ >= limit) return false;
  if (active_++ == 0) refresh_read_deadline();
  return true;
}

void H2ClientConn::release_slot() {
  std::lock_guard lock(mu_);
  if (active_ > 0 && --active_ == 0) {
    idle_since_ = std::chrono::steady_clock::now();
    refresh_read_deadline();
  }
}

bool H2ClientConn::finished() {
  std::lock_guard lock(mu_);
  return dead_ || goaway_ || closing_ || broken_;
}

std::optional<Chan<std::monostate>> H2ClientConn::close(bool only_if_idle) {
  std::lock_guard lock(mu_);
  if (dead_) return ended_;
  if (only_if_idle && active_ > 0) return std::nullopt;
  closing_ = true;
  refresh_read_deadline();
  if (active_ > 0) return std::nullopt;
  return ended_;
}

net::Deadline H2ClientConn::read_deadline() const {
  if (broken_ || (closing_ && active_ == 0)) return std::chrono::steady_clock::now();
  net::Deadline d = net::no_deadline;
  if (settings_.ping_interval.count() > 0) {
    d = ping_outstanding_ ? ping_sent_ + settings_.ping_timeout
                          : last_read_ + settings_.ping_interval;
  }
  if (active_ == 0 && settings_.idle_timeout.count() > 0) {
    net::Deadline idle = idle_since_ + settings_.idle_timeout;
    if (d == net::no_deadline || idle < d) d = idle;
  }
  return d;
}

void H2ClientConn::link(H2ClientStream* s) {
  s->next_ = streams_;
  s->prev_ = nullptr;
  if (streams_ != nullptr) streams_->prev_ = s;
  streams_ = s;
}

void H2ClientConn::unlink(H2ClientStream* s) {
  if (s->prev_ != nullptr) {
    s->prev_->next_ = s->next_;
  } else if (streams_ == s) {
    streams_ = s->next_;
  }
  if (s->next_ != nullptr) s->next_->prev_ = s->prev_;
  s->prev_ = s->next_ = nullptr;
}

Result<std::unique_ptr<H2ClientStream>> H2ClientConn::open(const ClientRequest& request,
                                                           const Url& url, bool end, bool collect,
                                                           net::Deadline deadline) {
  if (!is_token(request.method)) {
    release_slot();
    return errc::invalid_request;
  }
  // The head: pseudo-header fields first (RFC 9113 8.3.1), then the request's own.
  const bool default_port =
      (url.scheme == "http" && url.port == 80) || (url.scheme == "https" && url.port == 443);
  std::string authority(request.headers.get("host"));
  if (authority.empty()) {
    authority = default_port
                    ? (url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host)
                    : net::join_host_port(url.host, url.port);
  }
  const bool send_length =
      end && (!request.body.empty() ||
              !(request.method == "GET" || request.method == "HEAD" ||
                request.method == "DELETE" || request.method == "OPTIONS" ||
                request.method == "TRACE"));
  char length_text[24];
  std::string_view length;
  if (send_length) {
    auto [e, ec] = std::to_chars(length_text, length_text + sizeof length_text, request.body.size());
    (void)ec;
    length = std::string_view(length_text, static_cast<std::size_t>(e - length_text));
  }
  constexpr std::size_t kInlineFields = 24;
  nghttp2_nv inline_nv[kInlineFields];
  std::vector<nghttp2_nv> more;
  const std::size_t count = 6 + request.headers.size();
  nghttp2_nv* nv = inline_nv;
  if (count > kInlineFields) {
    more.resize(count);
    nv = more.data();
  }
  std::size_t n = 0;
  nv[n++] = field(":method", request.method);
  nv[n++] = field(":scheme", url.scheme);
  nv[n++] = field(":authority", authority);
  nv[n++] = field(":path", url.target);
  if (!request.headers.has("user-agent") && !settings_.user_agent.empty())
    nv[n++] = field("user-agent", settings_.user_agent);
  if (send_length) nv[n++] = field("content-length", length);
  for (HeaderField f : request.headers) {
    if (!is_token(f.name) || !is_field_value(f.value)) {
      release_slot();
      return errc::invalid_request;
    }
    if (connection_specific(f.name)) continue;
    // TE may say only "trailers" on HTTP/2 (gRPC sends it); the length is the body's.
    if (iequals(f.name, "te") && !iequals(f.value, "trailers")) continue;
    if (end && iequals(f.name, "content-length")) continue;
    nv[n++] = field(f.name, f.value);
  }

  auto stream = std::make_unique<H2ClientStream>(shared_from_this(), request.context, deadline);
  H2ClientStream* s = stream.get();
  s->collect_ = collect;
  s->max_body_ = settings_.max_body_bytes;
  {
    std::lock_guard lock(mu_);
    if (dead_) {
      if (active_ > 0) --active_;
      s->closed_ = true;
      return errc::connection_lost;
    }
    const bool body = !request.body.empty() || !end;
    if (body) {
      s->out_.assign(request.body);
      s->out_end_ = end;
    } else {
      s->out_end_ = true;
    }
    nghttp2_data_provider provider;
    provider.source.ptr = nullptr;
    provider.read_callback = pull_request_body;
    const std::int32_t id =
        nghttp2_submit_request(session_, nullptr, nv, n, body ? &provider : nullptr, s);
    if (id < 0) {
      if (active_ > 0) --active_;
      s->closed_ = true;
      return errc::connection_lost;
    }
    s->id_ = id;
    link(s);
  }
  wake_writer();
  return stream;
}

void H2ClientConn::reader() {
  // Not zeroed: the pages a read never reaches stay out of an idle connection's memory.
  const auto buffer = std::make_unique_for_overwrite<std::uint8_t[]>(kReadBuffer);
  for (;;) {
    {
      std::lock_guard lock(mu_);
      stream_->set_read_deadline(read_deadline());
    }
    Result<std::size_t> n = stream_->read(buffer.get(), kReadBuffer);
    std::unique_lock lock(mu_);
    if (!n && net::is_timeout(n.error())) {
      const auto now = std::chrono::steady_clock::now();
      if (broken_ || (closing_ && active_ == 0)) break;
      if (active_ == 0 && settings_.idle_timeout.count() > 0 &&
          now >= idle_since_ + settings_.idle_timeout)
        break;
      if (settings_.ping_interval.count() > 0) {
        if (ping_outstanding_ && now >= ping_sent_ + settings_.ping_timeout) break;
        if (!ping_outstanding_ && now >= last_read_ + settings_.ping_interval) {
          nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
          ping_outstanding_ = true;
          ping_sent_ = now;
          lock.unlock();
          wake_writer();
        }
      }
      continue;
    }
    if (!n || *n == 0) break;
    last_read_ = std::chrono::steady_clock::now();
    ssize_t used = nghttp2_session_mem_recv(session_, buffer.get(), *n);
    if (used < 0) {
      // A protocol error: GOAWAY goes out if it can, and the connection ends.
      nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
      lock.unlock();
      wake_writer();
      break;
    }
    const bool over = !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
    lock.unlock();
    wake_writer();
    if (over) break;
  }

  // The connection is over: every stream still open fails.
  {
    std::lock_guard lock(mu_);
    dead_ = true;
    if (!ready_closed_) {
      ready_closed_ = true;
      ready_.close();
    }
    while (H2ClientStream* s = streams_) {
      if (!s->error_) s->error_ = make_error_code(errc::connection_lost);
      s->closed(NGHTTP2_NO_ERROR);  // unlinks it
    }
  }
  wake_writer();
  // A writer stuck on a peer that does not read: the close ends its write.
  stream_->set_write_deadline(std::chrono::steady_clock::now());
  writer_ended_.recv();
  stream_->close();
}

void H2ClientConn::writer() {
  std::string out;
  std::unique_lock lock(mu_);
  while (!dead_) {
    out.clear();
    bool failed = false;
    while (out.size() < kWriteBatch) {
      const std::uint8_t* data = nullptr;
      ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        failed = true;
        break;
      }
      if (n == 0) break;
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    if (failed) break;
    if (out.empty()) {
      lock.unlock();
      writer_wake_.recv();
      lock.lock();
      continue;
    }
    lock.unlock();
    if (settings_.write_timeout.count() > 0)
      stream_->set_write_deadline(net::deadline_after(settings_.write_timeout));
    Result<std::size_t> n = stream_->write(out.data(), out.size());
    lock.lock();
    if (!n) break;
  }
  // The reader learns of the end from its read.
  if (!dead_) {
    broken_ = true;
    refresh_read_deadline();
  }
}

}  // namespace goro::http::detail
