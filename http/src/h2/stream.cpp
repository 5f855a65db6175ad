// H2Stream: one HTTP/2 request, from its HEADERS to its last frame (h2/conn.hpp has the
// design). The runner (core/exchange.hpp) serves it as it serves an HTTP/1.1 request:
// the handler sees the same Request and Response; the Response hands this sink the head
// as fields, which become a HEADERS frame, and the body bytes, which a data provider
// gives nghttp2 as the peer's flow control allows.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <exception>

#include <goro/http/errors.hpp>
#include <goro/http/status.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "access.hpp"
#include "h2/conn.hpp"

namespace goro::http::detail {
namespace {

// Header fields that mean something only to HTTP/1.1 (RFC 9113 8.2.2), and the one the
// sink states itself.
bool dropped_on_h2(std::string_view name) {
  return iequals(name, "connection") || iequals(name, "keep-alive") ||
         iequals(name, "proxy-connection") || iequals(name, "transfer-encoding") ||
         iequals(name, "upgrade") || iequals(name, "content-length");
}

// Whether a field of the handler's may go out on HTTP/2: not one of the above, a name,
// and no CR, LF or NUL in the value.
bool sendable_on_h2(HeaderField f) {
  return !f.name.empty() && !dropped_on_h2(f.name) &&
         f.value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool has_upper(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

void lower_in_place(char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] >= 'A' && p[i] <= 'Z') p[i] = static_cast<char>(p[i] + 32);
  }
}

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

// A head for nghttp2: ":status", then the fields HTTP/2 may carry, names lower-case
// (RFC 9113 8.2.2), and room for the few add() calls of submit. The views point into the
// fields, or into lower_ for a name that had upper-case letters; nghttp2 copies on
// submit. A usual head needs no allocation: the entries sit in place up to kInline, and
// names already lower-case are not copied.
class HeadFields {
 public:
  static constexpr std::size_t kAdded = 4;  // :status, date, server, content-length

  HeadFields(int status, const Headers& fields) {
    const int code = status >= 100 && status <= 999 ? status : 500;
    status_[0] = static_cast<char>('0' + code / 100);
    status_[1] = static_cast<char>('0' + code / 10 % 10);
    status_[2] = static_cast<char>('0' + code % 10);
    capacity_ = fields.size() + kAdded;
    if (capacity_ > kInline) {
      heap_.resize(capacity_);
      nv_ = heap_.data();
    }
    // Reserved whole before any view into it is taken: the views stay put.
    std::size_t upper_bytes = 0;
    for (HeaderField f : fields) {
      if (has_upper(f.name)) upper_bytes += f.name.size();
    }
    lower_.reserve(upper_bytes);
    add(":status", std::string_view(status_, 3));
    for (HeaderField f : fields) {
      if (!sendable_on_h2(f)) continue;
      std::string_view name = f.name;
      if (has_upper(name)) {
        const std::size_t at = lower_.size();
        lower_.append(name);
        lower_in_place(lower_.data() + at, name.size());
        name = std::string_view(lower_.data() + at, name.size());
      }
      add(name, f.value);
    }
  }
  HeadFields(const HeadFields&) = delete;
  HeadFields& operator=(const HeadFields&) = delete;

  // Precondition: fewer than kAdded calls beyond the fields.
  void add(std::string_view name, std::string_view value) { nv_[size_++] = make_nv(name, value); }
  const nghttp2_nv* data() const noexcept { return nv_; }
  std::size_t size() const noexcept { return size_; }

 private:
  static constexpr std::size_t kInline = 16;
  char status_[3];
  nghttp2_nv inline_[kInline];
  nghttp2_nv* nv_ = inline_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::vector<nghttp2_nv> heap_;  // when the fields are more than kInline allows
  std::string lower_;
};

// The largest buffer a done stream keeps for its next request (h2/conn.hpp's top).
constexpr std::size_t kKeptBuffer = 16 * 1024;

void clear_kept(std::string& s) {
  if (s.capacity() > kKeptBuffer) {
    std::string().swap(s);
  } else {
    s.clear();
  }
}

std::chrono::steady_clock::time_point deadline_in(std::chrono::nanoseconds d) {
  return d.count() > 0 ? std::chrono::steady_clock::now() + d
                       : std::chrono::steady_clock::time_point{};
}

ssize_t pull_body(nghttp2_session* /*session*/, std::int32_t /*id*/, std::uint8_t* buf,
                  std::size_t len, std::uint32_t* flags, nghttp2_data_source* source,
                  void* /*user_data*/) {
  return static_cast<H2Stream*>(source->ptr)->pull(buf, len, flags);
}

}  // namespace

void H2Stream::reuse(std::int32_t id) {
  id_ = id;
  // A token the last request's wake-ups left would only wake a waiter early (each wait
  // rechecks what it waits for); dropped all the same.
  (void)read_wake_.try_recv();
  (void)write_wake_.try_recv();
  method_.clear();
  path_.clear();
  authority_.clear();
  clear_kept(field_bytes_);
  field_sizes_.clear();
  head_bytes_ = 0;
  head_too_large_ = false;
  declared_length_ = -1;
  fields_.clear();
  read_deadline_ = {};
  write_deadline_ = {};
  read_deadline_handlers_ = false;
  clear_kept(body_);
  body_pos_ = 0;
  body_received_ = 0;
  body_complete_ = false;
  body_too_large_ = false;
  handler_running_ = false;
  handler_done_ = false;
  response_submitted_ = false;
  closed_ = false;
  close_code_ = 0;
  response_complete_ = false;
  clear_kept(out_);
  out_pos_ = 0;
  out_end_ = false;
  clear_kept(trailer_bytes_);
  trailer_sizes_.clear();
  cancel_ = CancelFunc();
}

void H2Stream::add_header(std::string_view name, std::string_view value) {
  // Counted as SETTINGS_MAX_HEADER_LIST_SIZE counts: name, value and 32 per field.
  head_bytes_ += name.size() + value.size() + 32;
  if (head_bytes_ > conn_.server_->options.max_header_bytes) head_too_large_ = true;
  if (head_too_large_) return;
  if (!name.empty() && name[0] == ':') {
    // nghttp2 has checked which pseudo-header fields a request may have, and how often
    // (:scheme among them, which nothing here needs).
    if (name == ":method")
      method_ = value;
    else if (name == ":path")
      path_ = value;
    else if (name == ":authority")
      authority_ = value;
    return;
  }
  if (name == "content-length") {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec == std::errc() && end == value.data() + value.size()) declared_length_ = n;
  }
  field_bytes_.append(name);
  field_bytes_.append(value);
  field_sizes_.push_back(name.size());
  field_sizes_.push_back(value.size());
}

void H2Stream::add_body(const std::uint8_t* data, std::size_t len) {
  body_received_ += len;
  if (handler_done_ || body_too_large_) {
    consume(len);
    return;
  }
  if (body_received_ > conn_.server_->options.max_body_bytes) {
    body_too_large_ = true;
    consume(body_.size() - body_pos_ + len);
    body_.clear();
    body_pos_ = 0;
    wake();
    return;
  }
  if (body_pos_ > 64 * 1024) {
    body_.erase(0, body_pos_);
    body_pos_ = 0;
  }
  body_.append(reinterpret_cast<const char*>(data), len);
  wake();
}

void H2Stream::end_of_body() {
  body_complete_ = true;
  wake();
}

void H2Stream::start() {
  const ServerOptions& options = conn_.server_->options;
  if (head_too_large_) {
    return respond_now(status::request_header_fields_too_large, "request header fields too large");
  }
  if (declared_length_ >= 0 &&
      static_cast<std::uint64_t>(declared_length_) > options.max_body_bytes) {
    return respond_now(status::payload_too_large, "request body too large");
  }
  // The fields point into field_bytes_, which no longer changes; :authority stands in
  // for a missing Host (RFC 9113 8.3.1).
  bool has_host = false;
  std::size_t at = 0;
  for (std::size_t i = 0; i + 1 < field_sizes_.size(); i += 2) {
    std::string_view name(field_bytes_.data() + at, field_sizes_[i]);
    std::string_view value(field_bytes_.data() + at + field_sizes_[i], field_sizes_[i + 1]);
    at += field_sizes_[i] + field_sizes_[i + 1];
    if (name == "host") has_host = true;
    fields_.push_back({name, value});
  }
  if (!has_host && !authority_.empty()) fields_.insert(fields_.begin(), {"host", authority_});
  std::string_view target = method_ == "CONNECT" ? std::string_view(authority_) : path_;
  if (!RequestAccess::prepare(request_, method_, target, fields_, this, this))
    return respond_now(status::bad_request, "invalid percent-encoding in the request path");
  RequestAccess::set_origin(request_, conn_.remote_, 2, 0,
                            declared_length_ >= 0 ? declared_length_ : (body_complete_ ? 0 : -1));
  request_.set_received_at(conn_.read_arrived_);
  writer_.begin(this, method_ == "HEAD", options.write_buffer_size);
  read_deadline_ = deadline_in(options.read_body_timeout);
  write_deadline_ = deadline_in(options.write_timeout);
  handler_running_ = true;
  conn_.goroutines_.add(1);
  goro::go(GoOptions{.stack_size = options.stack_size, .name = "http2 stream"}, [this] { run(); });
}

const Server::Impl& H2Stream::server() const noexcept { return *conn_.server_; }

// The reply is the one every protocol builds (build_own_reply, through
// ServerOptions::on_error_reply); from the reader the hook runs with mu_ held, so it must
// not block (logging, adding fields).
void H2Stream::respond_now(int status, std::string_view message) {
  handler_done_ = true;
  build_own_reply(*conn_.server_, conn_.remote_, status, message, {method_, path_, fields_},
                  reply_);
  reply_.fields.set("Content-Type", reply_.content_type);
  const bool head = method_ == "HEAD";
  submit(status, reply_.fields, static_cast<std::int64_t>(reply_.body.size()),
         head ? std::string_view() : std::string_view(reply_.body), true);
}

void H2Stream::refuse(int status, std::string_view message) {
  std::lock_guard lock(conn_.mu_);
  respond_now(status, message);
  writer_.mark_finished();
}

void H2Stream::run() {
  const Ran ran = run_exchange(*conn_.server_, *this, request_, writer_);
  std::error_code finished = writer_.finish();
  H2Conn& conn = conn_;
  std::unique_lock lock(conn.mu_);
  if (!closed_ && (finished || !response_submitted_ || ran == Ran::abandoned)) {
    reset(NGHTTP2_INTERNAL_ERROR);
  }
  // Body nobody will read gives its window back.
  consume(body_.size() - body_pos_);
  body_.clear();
  body_pos_ = 0;
  handler_running_ = false;
  handler_done_ = true;
  conn.maybe_free(this);  // may retire this: the reader may reuse it once mu_ is let go
  lock.unlock();
  conn.wake_writer();
  conn.goroutines_.done();
}

// The handler returned: its context ends.
void H2Stream::end_request_context() {
  CancelFunc cancel;
  {
    std::lock_guard lock(conn_.mu_);
    cancel = std::move(cancel_);
    cancel_ = CancelFunc();
  }
  cancel();
}

std::error_code H2Stream::submit(int status, const Headers& headers, std::int64_t content_length,
                                 std::string_view body, bool end) {
  if (closed_ || conn_.dead_) return std::make_error_code(std::errc::connection_reset);
  HeadFields nv(status, headers);
  char date[kHttpDateSize];
  http_date_now(date);
  if (!headers.has("date")) nv.add("date", std::string_view(date, sizeof date));
  if (!headers.has("server")) nv.add("server", "goro");
  char length_text[24];
  if (content_length >= 0 && !body_forbidden(status)) {
    auto [e, ec] = std::to_chars(length_text, length_text + sizeof length_text, content_length);
    (void)ec;
    nv.add("content-length", std::string_view(length_text, static_cast<std::size_t>(e - length_text)));
  }
  out_.append(body);
  out_end_ = end;
  response_submitted_ = true;
  nghttp2_data_provider provider;
  provider.source.ptr = this;
  provider.read_callback = pull_body;
  const bool data = !(end && body.empty());
  if (nghttp2_submit_response(conn_.session_, id_, nv.data(), nv.size(),
                              data ? &provider : nullptr) != 0) {
    return std::make_error_code(std::errc::io_error);
  }
  conn_.wake_writer();
  return {};
}

ssize_t H2Stream::pull(std::uint8_t* buf, std::size_t len, std::uint32_t* flags) {
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
  wake();  // room for the handler's next write
  if (out_.empty() && out_end_) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!trailer_sizes_.empty()) {
      // The stream ends with the trailers' HEADERS frame instead of this DATA frame.
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      constexpr std::size_t kInline = 8;
      const std::size_t count = trailer_sizes_.size() / 2;
      nghttp2_nv inline_nv[kInline];
      std::vector<nghttp2_nv> heap_nv;
      nghttp2_nv* nv = inline_nv;
      if (count > kInline) {
        heap_nv.resize(count);
        nv = heap_nv.data();
      }
      std::size_t at = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t name_size = trailer_sizes_[2 * i];
        const std::size_t value_size = trailer_sizes_[2 * i + 1];
        nv[i] = make_nv(std::string_view(trailer_bytes_.data() + at, name_size),
                        std::string_view(trailer_bytes_.data() + at + name_size, value_size));
        at += name_size + value_size;
      }
      nghttp2_submit_trailer(conn_.session_, id_, nv, count);
    }
    return static_cast<ssize_t>(n);
  }
  return n > 0 ? static_cast<ssize_t>(n) : static_cast<ssize_t>(NGHTTP2_ERR_DEFERRED);
}

void H2Stream::response_sent() {
  response_complete_ = true;
  // The client is still sending a body the response no longer needs (RFC 9113 8.1).
  if (!body_complete_) {
    nghttp2_submit_rst_stream(conn_.session_, NGHTTP2_FLAG_NONE, id_, NGHTTP2_NO_ERROR);
    conn_.closed_early(id_);
  }
}

void H2Stream::closed(std::uint32_t error_code) {
  if (closed_) return;
  closed_ = true;
  close_code_ = error_code;
  // A reset (or the connection's end) cancels the request's context; a stream closed
  // because its response went out completely leaves that to the handler's return.
  if (cut_off()) cancel_();
  wake();
}

void H2Stream::reset(std::uint32_t error_code) {
  nghttp2_submit_rst_stream(conn_.session_, NGHTTP2_FLAG_NONE, id_, error_code);
  conn_.wake_writer();
}

void H2Stream::consume(std::size_t n) {
  if (n == 0) return;
  nghttp2_session_consume(conn_.session_, id_, n);
  conn_.wake_writer();
}

bool H2Stream::wait(std::unique_lock<goro::Mutex>& lock, goro::Chan<int>& wake, int& waiters,
                    std::chrono::steady_clock::time_point deadline) {
  ++waiters;  // before mu_ goes: a wake() from now on sends a token
  lock.unlock();
  bool woken = true;
  if (deadline == std::chrono::steady_clock::time_point{}) {
    wake.recv();
  } else {
    auto left = deadline - std::chrono::steady_clock::now();
    woken = left > std::chrono::nanoseconds::zero() &&
            goro::select(goro::recv_case(wake), goro::timeout_case(left)) == 0;
  }
  lock.lock();
  --waiters;
  return woken;
}

Result<std::size_t> H2Stream::read(void* buf, std::size_t len) {
  std::unique_lock lock(conn_.mu_);
  for (;;) {
    if (body_pos_ < body_.size()) {
      const std::size_t n = std::min(len, body_.size() - body_pos_);
      std::memcpy(buf, body_.data() + body_pos_, n);
      body_pos_ += n;
      if (body_pos_ == body_.size()) {
        body_.clear();
        body_pos_ = 0;
      }
      consume(n);
      return n;
    }
    if (body_too_large_) break;
    if (body_complete_ || len == 0) return std::size_t{0};
    if (closed_ || conn_.dead_) return make_error_code(errc::unexpected_eof);
    if (!wait(lock, read_wake_, read_waiters_, read_deadline_)) {
      // The server's body deadline ends the stream; one a handler set only its read.
      if (!read_deadline_handlers_) reset(NGHTTP2_CANCEL);
      return make_error_code(net::errc::timeout);
    }
  }
  // Answered now, whatever the handler makes of the error (as over HTTP/1.1).
  if (!writer_.headers_sent() && !writer_.finished()) {
    respond_now(status::payload_too_large, "request body too large");
    writer_.mark_finished();
  }
  return make_error_code(errc::body_too_large);
}

const net::TlsConnectionState* H2Stream::tls_state() const noexcept { return conn_.tls_; }

bool H2Stream::client_gone() {
  std::lock_guard lock(conn_.mu_);
  return cut_off() || conn_.dead_;
}

std::error_code H2Stream::set_deadline(net::IoMode mode, net::Deadline d) {
  std::lock_guard lock(conn_.mu_);
  if (mode != net::IoMode::write) {
    read_deadline_ = d;
    read_deadline_handlers_ = true;
  }
  if (mode != net::IoMode::read) write_deadline_ = d;
  wake();
  return {};
}

Context H2Stream::request_context() {
  auto [ctx, cancel] = goro::with_cancel(conn_.server_->base);
  bool gone;
  {
    std::lock_guard lock(conn_.mu_);
    gone = cut_off() || conn_.dead_;
    cancel_ = cancel;
  }
  if (gone) cancel();
  return ctx;
}

std::error_code H2Stream::wait_for_room(std::unique_lock<goro::Mutex>& lock) {
  while (out_.size() - out_pos_ > conn_.server_->options.write_buffer_size) {
    if (closed_ || conn_.dead_) return std::make_error_code(std::errc::connection_reset);
    if (!wait(lock, write_wake_, write_waiters_, write_deadline_)) {
      reset(NGHTTP2_CANCEL);
      return make_error_code(net::errc::timeout);
    }
  }
  return {};
}

std::error_code H2Stream::send_head(int status, const Headers& fields, std::int64_t length,
                                    std::string_view body, bool end) {
  std::unique_lock lock(conn_.mu_);
  if (std::error_code ec = submit(status, fields, length, body, end)) return ec;
  if (closed_) return {};
  return wait_for_room(lock);
}

std::error_code H2Stream::send_body(std::string_view data) {
  std::unique_lock lock(conn_.mu_);
  if (closed_ || conn_.dead_) return std::make_error_code(std::errc::connection_reset);
  out_.append(data);
  nghttp2_session_resume_data(conn_.session_, id_);
  conn_.wake_writer();
  return wait_for_room(lock);
}

std::error_code H2Stream::end_body(bool complete, const Headers& trailers) {
  std::lock_guard lock(conn_.mu_);
  if (closed_ || conn_.dead_) return std::make_error_code(std::errc::connection_reset);
  if (!complete) {
    // Shorter than its Content-Length: only a reset tells the client it is cut.
    reset(NGHTTP2_INTERNAL_ERROR);
    return {};
  }
  trailer_bytes_.clear();
  trailer_sizes_.clear();
  for (HeaderField f : trailers) {
    if (!sendable_on_h2(f)) continue;
    const std::size_t at = trailer_bytes_.size();
    trailer_bytes_.append(f.name);
    lower_in_place(trailer_bytes_.data() + at, f.name.size());
    trailer_bytes_.append(f.value);
    trailer_sizes_.push_back(f.name.size());
    trailer_sizes_.push_back(f.value.size());
  }
  out_end_ = true;
  nghttp2_session_resume_data(conn_.session_, id_);
  conn_.wake_writer();
  return {};
}

std::error_code H2Stream::send_informational(int status, const Headers& fields) {
  std::lock_guard lock(conn_.mu_);
  if (closed_ || conn_.dead_) return std::make_error_code(std::errc::connection_reset);
  HeadFields nv(status, fields);
  if (nghttp2_submit_headers(conn_.session_, NGHTTP2_FLAG_NONE, id_, nullptr, nv.data(), nv.size(),
                             nullptr) < 0) {
    return std::make_error_code(std::errc::io_error);
  }
  conn_.wake_writer();
  return {};
}

Result<TakenConnection> H2Stream::take_over() { return make_error_code(errc::not_supported); }

}  // namespace goro::http::detail
