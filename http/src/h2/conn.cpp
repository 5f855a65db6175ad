// H2Conn: one HTTP/2 connection's session, reader and writer (h2_conn.hpp has the
// design). The connection's end:
//   - nghttp2 wants neither to read nor to write (GOAWAY sent or received and no stream
//     open, or a connection error it answered with GOAWAY): the writer half-closes
//     (FIN, close_notify on TLS) and the reader reads and discards until the peer
//     closes or kLinger passes, so that unread input does not turn into a reset that
//     destroys the GOAWAY;
//   - no stream for idle_timeout (no client preface within read_header_timeout): GOAWAY,
//     then as above; a header block still open after read_header_timeout (its
//     CONTINUATION frames never come): closed at once;
//   - the socket fails, the peer closes, or shutdown's deadline closes it: the reader
//     marks the connection dead, every stream is treated as reset (its handler's
//     context is cancelled, its reads and writes fail), and the reader waits for the
//     writer and the handlers before it frees the session.
#include "h2/conn.hpp"

#include <algorithm>

#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::http::detail {
namespace {

// How long the reader waits for the peer's close after the last frame went out.
constexpr auto kLinger = std::chrono::milliseconds(500);
// Bytes of frames gathered for one socket write.
constexpr std::size_t kWriteBatch = 64 * 1024;
constexpr std::size_t kReadBuffer = 16 * 1024;
// The receive windows advertised: per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the
// connection; they bound the request body bytes a connection buffers.
constexpr std::int32_t kStreamWindow = 256 * 1024;
constexpr std::int32_t kConnectionWindow = 1024 * 1024;
// Floods nghttp2 ends with GOAWAY: frames it must answer (SETTINGS and PING acks) queued
// unsent; entries in one SETTINGS frame; streams reset by the client, as a token bucket
// (burst, per second), against CVE-2023-44487. These are nghttp2's own defaults, stated
// here so that they are visible.
constexpr std::size_t kMaxOutboundAck = 1000;
constexpr std::size_t kMaxSettings = 32;
constexpr std::uint64_t kResetBurst = 1000;
constexpr std::uint64_t kResetRate = 33;
// Streams closed while the client may still send on them, remembered (see begin_frame).
constexpr std::size_t kClosedEarlyKept = 64;
// Done streams a connection keeps for its next requests (h2/conn.hpp's top).
constexpr std::size_t kSpareStreams = 16;

H2Stream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

}  // namespace

// nghttp2's callbacks; all run with mu_ held (inside mem_recv, mem_send or a submit).
struct H2Callbacks {
  static H2Conn& conn(void* user_data) { return *static_cast<H2Conn*>(user_data); }

  // RFC 9113 5.1.1: a HEADERS at or below the highest stream id the client used, on a
  // stream nghttp2 no longer knows, is a connection error (nghttp2 ignores it). Streams
  // closed while the client may still be sending on them (answered before the request
  // ended, refused) are spared: their trailers may be on the way.
  static int begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user_data) {
    H2Conn& c = conn(user_data);
    // Any frame but a CONTINUATION means the last header block is over (or was dropped).
    if (hd->type != NGHTTP2_CONTINUATION) c.head_started_ = {};
    if (hd->type != NGHTTP2_HEADERS || hd->stream_id % 2 == 0) return 0;
    if (hd->stream_id > c.max_client_stream_) {
      c.max_client_stream_ = hd->stream_id;
      return 0;
    }
    if (nghttp2_session_find_stream(session, hd->stream_id) != nullptr) return 0;
    if (std::find(c.closed_early_.begin(), c.closed_early_.end(), hd->stream_id) !=
        c.closed_early_.end())
      return 0;
    return NGHTTP2_ERR_CALLBACK_FAILURE;  // the reader answers with GOAWAY(PROTOCOL_ERROR)
  }

  static int begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    H2Conn& c = conn(user_data);
    // Until the block ends, read_header_timeout bounds it (see read_deadline).
    c.head_started_ = std::chrono::steady_clock::now();
    c.head_stream_ = frame->hd.stream_id;
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    const std::int32_t id = frame->hd.stream_id;
    // Handlers of reset streams may still run: new streams wait for them to end, so a
    // client that opens and resets streams in a loop cannot pile up goroutines.
    if (c.streams_.size() >= c.server_->options.http2_max_concurrent_streams) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
      c.closed_early(id);
      return 0;
    }
    std::unique_ptr<H2Stream> stream;
    if (!c.spare_.empty()) {
      stream = std::move(c.spare_.back());
      c.spare_.pop_back();
    } else {
      stream = std::make_unique<H2Stream>(c);
    }
    stream->reuse(id);
    stream->set_slot(c.streams_.size());
    nghttp2_session_set_stream_user_data(session, id, stream.get());
    c.streams_.push_back(std::move(stream));
    return 0;
  }

  static int header(nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
                    std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                    std::uint8_t /*flags*/, void* /*user_data*/) {
    // Trailers (a second HEADERS) are received and dropped.
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (H2Stream* s = stream_of(session, frame->hd.stream_id)) {
      s->add_header({reinterpret_cast<const char*>(name), namelen},
                    {reinterpret_cast<const char*>(value), valuelen});
    }
    return 0;
  }

  static int frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    H2Conn& c = conn(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_SETTINGS: c.preface_seen_ = true; return 0;
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: break;
      default: return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS) c.head_started_ = {};
    H2Stream* s = stream_of(session, frame->hd.stream_id);
    if (s == nullptr) return 0;
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) s->end_of_body();
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) s->start();
    return 0;
  }

  static int data_chunk(nghttp2_session* session, std::uint8_t /*flags*/, std::int32_t id,
                        const std::uint8_t* data, std::size_t len, void* /*user_data*/) {
    if (H2Stream* s = stream_of(session, id)) {
      s->add_body(data, len);
    } else {
      nghttp2_session_consume_connection(session, len);
    }
    return 0;
  }

  static int frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type == NGHTTP2_GOAWAY) conn(user_data).goaway_queued_ = false;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
      return 0;
    if (H2Stream* s = stream_of(session, frame->hd.stream_id)) s->response_sent();
    return 0;
  }

  static int stream_close(nghttp2_session* session, std::int32_t id, std::uint32_t error_code,
                          void* user_data) {
    // A header block cut by a reset ends with its stream.
    if (id == conn(user_data).head_stream_) conn(user_data).head_started_ = {};
    H2Stream* s = stream_of(session, id);
    if (s == nullptr) return 0;
    nghttp2_session_set_stream_user_data(session, id, nullptr);
    s->closed(error_code);
    conn(user_data).maybe_free(s);
    return 0;
  }
};

H2Conn::H2Conn(Connection& conn, std::string early)
    : server_(&conn.server()),
      stream_(conn.stream()),
      remote_(conn.remote_addr()),
      tls_(conn.tls_state()),
      early_(std::move(early)) {
  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, H2Callbacks::begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, H2Callbacks::begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, H2Callbacks::header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, H2Callbacks::frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, H2Callbacks::data_chunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, H2Callbacks::frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, H2Callbacks::stream_close);
  nghttp2_option* option;
  nghttp2_option_new(&option);
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_max_outbound_ack(option, kMaxOutboundAck);
  nghttp2_option_set_max_settings(option, kMaxSettings);
  nghttp2_option_set_stream_reset_rate_limit(option, kResetBurst, kResetRate);
  nghttp2_session_server_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);

  const ServerOptions& options = server_->options;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options.http2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kStreamWindow)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(std::min<std::size_t>(options.max_header_bytes, UINT32_MAX))},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
}

H2Conn::~H2Conn() {
  streams_.clear();
  spare_.clear();
  nghttp2_session_del(session_);
}

net::Deadline H2Conn::read_deadline() const {
  const ServerOptions& options = server_->options;
  if (ending_ || (goaway_sent_ && streams_.empty())) return linger_until_;
  // A header block begun and not ended (CONTINUATION frames still to come) holds the
  // connection: nothing else may arrive meanwhile.
  if (head_started_ != std::chrono::steady_clock::time_point{} &&
      options.read_header_timeout.count() > 0)
    return head_started_ + options.read_header_timeout;
  if (!streams_.empty()) return net::no_deadline;
  if (!preface_seen_) {
    return options.read_header_timeout.count() > 0 ? started_ + options.read_header_timeout
                                                   : net::no_deadline;
  }
  return options.idle_timeout.count() > 0 ? last_active_ + options.idle_timeout : net::no_deadline;
}

void H2Conn::maybe_free(H2Stream* s) {
  if (!s->freeable()) return;
  // Out of streams_ by swapping the last one into its slot.
  const std::size_t slot = s->slot();
  std::unique_ptr<H2Stream> done = std::move(streams_[slot]);
  if (slot + 1 != streams_.size()) {
    streams_[slot] = std::move(streams_.back());
    streams_[slot]->set_slot(slot);
  }
  streams_.pop_back();
  if (spare_.size() < kSpareStreams && !dead_) spare_.push_back(std::move(done));
  if (streams_.empty()) {
    last_active_ = std::chrono::steady_clock::now();
    stream_.set_read_deadline(read_deadline());
  }
}

void H2Conn::closed_early(std::int32_t id) {
  if (closed_early_.size() == kClosedEarlyKept) closed_early_.pop_front();
  closed_early_.push_back(id);
}

void H2Conn::begin_shutdown() {
  {
    std::lock_guard lock(mu_);
    if (goaway_sent_ || dead_) return;
    goaway_sent_ = true;  // the writer submits it (see goaway_sent_)
    linger_until_ = std::chrono::steady_clock::now() + kLinger;
    stream_.set_read_deadline(read_deadline());
  }
  wake_writer();
}

void H2Conn::serve() {
  goroutines_.add(1);
  goro::go(GoOptions{.name = "http2 writer"}, [this] { writer(); });
  // Not zeroed: the pages a read never reaches stay out of an idle connection's memory.
  const auto buffer = std::make_unique_for_overwrite<std::uint8_t[]>(kReadBuffer);
  std::string_view input = early_;
  bool feeding = true;  // false after a connection error: input is read and dropped
  for (;;) {
    if (input.empty()) {
      {
        std::lock_guard lock(mu_);
        if (dead_) break;
        stream_.set_read_deadline(read_deadline());
      }
      const std::chrono::steady_clock::time_point seen_before = stream_.readable_at();
      Result<std::size_t> n = stream_.read(buffer.get(), kReadBuffer);
      const std::chrono::steady_clock::time_point seen = stream_.readable_at();
      read_arrived_ = seen != seen_before ? seen : std::chrono::steady_clock::time_point();
      if (!n && net::is_timeout(n.error())) {
        std::lock_guard lock(mu_);
        // Idle too long (with the preface in): GOAWAY, then the writer ends it.
        if (ending_ || goaway_sent_ || !streams_.empty() || !preface_seen_) break;
        goaway_sent_ = true;  // the writer submits it (see goaway_sent_)
        linger_until_ = std::chrono::steady_clock::now() + kLinger;
        wake_writer();
        continue;
      }
      if (!n || *n == 0) break;
      stats_shard().bytes_in.fetch_add(*n, std::memory_order_relaxed);
      input = {reinterpret_cast<const char*>(buffer.get()), *n};
    }
    std::unique_lock lock(mu_);
    if (!feeding || ending_) {
      input = {};
      continue;
    }
    ssize_t used = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    input = {};
    if (used == NGHTTP2_ERR_FLOODED) break;
    // Anything else (a bad client preface included): GOAWAY(PROTOCOL_ERROR), then the
    // writer ends the connection once it has gone out.
    if (used < 0) {
      // Never above a GOAWAY already sent (nghttp2 would name the last stream it saw).
      const std::int32_t last = nghttp2_session_get_last_proc_stream_id(session_);
      nghttp2_session_terminate_session2(
          session_, goaway_last_ >= 0 ? std::min(last, goaway_last_) : last,
          NGHTTP2_PROTOCOL_ERROR);
      feeding = false;
    }
    lock.unlock();
    wake_writer();
  }

  // The connection is over: every stream is treated as reset, then the writer and the
  // handlers are waited for.
  {
    std::lock_guard lock(mu_);
    dead_ = true;
    std::vector<H2Stream*> left;
    for (auto& s : streams_) left.push_back(s.get());
    for (H2Stream* s : left) {
      s->closed(NGHTTP2_CANCEL);
      maybe_free(s);
    }
  }
  wake_writer();
  stream_.close();
  goroutines_.wait();
}

void H2Conn::writer() {
  const std::chrono::nanoseconds write_timeout = server_->options.write_timeout;
  std::string out;
  std::unique_lock lock(mu_);
  bool failed = false;
  while (!dead_) {
    out.clear();
    if (goaway_sent_ && goaway_last_ < 0) {
      goaway_last_ = nghttp2_session_get_last_proc_stream_id(session_);
      nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, goaway_last_, NGHTTP2_NO_ERROR,
                            nullptr, 0);
      goaway_queued_ = true;
    }
    // Past the batch size too while the GOAWAY is queued: it must be serialized before
    // mu_ is let go (frame_send clears goaway_queued_).
    while (out.size() < kWriteBatch || goaway_queued_) {
      const std::uint8_t* data = nullptr;
      ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        failed = true;
        break;
      }
      if (n == 0) break;
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    goaway_queued_ = false;  // serialized, or nghttp2 dropped it (the session is ending)
    if (failed) break;
    if (out.empty()) {
      if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) {
        // Everything is said: FIN, and the reader waits a little for the peer's close.
        ending_ = true;
        linger_until_ = std::chrono::steady_clock::now() + kLinger;
        stream_.set_read_deadline(linger_until_);
        lock.unlock();
        if (write_timeout.count() > 0) stream_.set_write_deadline(net::deadline_after(kLinger));
        stream_.shutdown_write();
        goroutines_.done();
        return;
      }
      lock.unlock();
      writer_wake_.recv();
      // Each handler that finishes wakes the writer, and the first to finish would have
      // its reply written alone while the others of the same read still run: one send
      // per stream. Going to the back of the run queue once lets the goroutines queued
      // before it add theirs, and one send carries them all (grpc-go's writer yields
      // likewise while its batch is small).
      goro::yield();
      lock.lock();
      continue;
    }
    lock.unlock();
    if (write_timeout.count() > 0) stream_.set_write_deadline(net::deadline_after(write_timeout));
    Result<std::size_t> n = stream_.write(out.data(), out.size());
    lock.lock();
    if (!n) {
      failed = true;
      break;
    }
    stats_shard().bytes_out.fetch_add(out.size(), std::memory_order_relaxed);
  }
  lock.unlock();
  // The reader learns it from its read.
  if (failed) stream_.close();
  goroutines_.done();
}

namespace h2 {

void serve(ConnRef& self, std::string_view early) {
  Connection& c = *self;
  // The protocol choice's deadlines end here; H2Conn sets its own.
  c.stream().set_read_deadline(net::no_deadline);
  c.stream().set_write_deadline(net::no_deadline);
  H2Conn conn(c, std::string(early));
  // Busy from now on: a shutdown sends GOAWAY (begin_shutdown) rather than closing.
  c.set_idle(false);
  c.set_engine(&conn);
  c.publish_bytes();
  conn.serve();
  c.set_engine(nullptr);
}

}  // namespace h2
}  // namespace goro::http::detail
