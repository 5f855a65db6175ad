// Response, the server's ResponseWriter (core/response.hpp), and what ResponseWriter and
// ResponseController give every writer.
#include "core/response.hpp"

#include <charconv>
#include <string>

#include <goro/http/errors.hpp>

namespace goro::http {

std::error_code ResponseWriter::text(std::string_view body, int status) {
  Headers& h = header();
  if (!h.has("content-type")) h.add("Content-Type", "text/plain; charset=utf-8");
  set_status(status);
  return write(body);
}

std::error_code ResponseWriter::json(std::string_view body, int status) {
  Headers& h = header();
  if (!h.has("content-type")) h.add("Content-Type", "application/json");
  set_status(status);
  return write(body);
}

Result<TakenConnection> ResponseController::take_over() {
  if (auto* p = find<ConnectionTaker>()) return p->take_over();
  return make_error_code(errc::not_supported);
}

std::error_code ResponseController::set_read_deadline(net::Deadline d) {
  if (auto* p = find<DeadlineSetter>()) return p->set_read_deadline(d);
  return errc::not_supported;
}

std::error_code ResponseController::set_write_deadline(net::Deadline d) {
  if (auto* p = find<DeadlineSetter>()) return p->set_write_deadline(d);
  return errc::not_supported;
}

std::error_code ResponseController::write_informational(int status, const Headers& fields) {
  if (auto* p = find<InformationalWriter>()) return p->write_informational(status, fields);
  return errc::not_supported;
}

Headers* ResponseController::trailer() {
  auto* p = find<TrailerWriter>();
  return p != nullptr ? &p->trailer() : nullptr;
}

bool ResponseController::discard_response() {
  auto* p = find<ResponseDiscarder>();
  return p != nullptr && p->discard_response();
}

std::error_code ResponseController::finish_response() {
  if (auto* p = find<ResponseFinisher>()) return p->finish_response();
  return w_->flush();
}

std::error_code ResponseController::send_file(int fd, std::uint64_t offset, std::uint64_t count) {
  if (auto* p = dynamic_cast<FileSender*>(w_)) return p->send_file(fd, offset, count);
  return errc::not_supported;
}

namespace detail {
namespace {

std::int64_t parse_length(std::string_view v) {
  std::uint64_t n = 0;
  if (v.empty()) return -1;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n > (1ull << 62)) return -1;
  return static_cast<std::int64_t>(n);
}

}  // namespace

void Response::begin(ResponseSink* sink, bool head_request, std::size_t buffer_limit) {
  sink_ = sink;
  headers_.clear();
  trailers_.clear();
  buffer_.clear();
  status_ = 200;
  head_request_ = head_request;
  head_sent_ = false;
  finished_ = false;
  taken_over_ = false;
  length_ = -1;
  body_bytes_ = 0;
  buffer_limit_ = buffer_limit;
  error_ = {};
}

void Response::set_status(int code) noexcept {
  if (!head_sent_) status_ = code;
}

std::error_code Response::fail(std::error_code ec) noexcept {
  if (!error_) error_ = ec;
  return error_;
}

std::error_code Response::write(std::string_view data) {
  if (error_) return error_;
  if (finished_) return errc::response_finished;
  if (data.empty()) return {};
  if (!head_sent_) {
    // A HEAD response stores nothing, so it can wait for the total and send its length.
    if (head_request_ || body_bytes_ + data.size() <= buffer_limit_) {
      if (!head_request_) buffer_.append(data);
      body_bytes_ += data.size();
      return {};
    }
    if (std::error_code ec = send_head(false)) return ec;
  }
  return send_body(data);
}

std::error_code Response::flush() {
  if (error_) return error_;
  if (finished_) return errc::response_finished;
  if (!head_sent_) return send_head(false);
  return {};
}

// final: the handler is done, so the length is known (what it wrote, or what a HEAD
// handler declared). Trailers to come keep the body streamed: on HTTP/1.1 only a chunked
// body can carry them.
std::error_code Response::send_head(bool final) {
  const bool no_body = body_forbidden(status_);
  const bool streamed = !final || !trailers_.empty();
  // The handler's Content-Length matters only where the body is not all here: streamed,
  // or a HEAD response's, which was never written.
  const std::int64_t declared =
      no_body || (!streamed && !head_request_) ? -1 : parse_length(headers_.get("content-length"));
  if (no_body) {
    length_ = -1;
  } else if (!streamed) {
    length_ = (head_request_ && declared >= 0) ? declared : static_cast<std::int64_t>(body_bytes_);
  } else {
    length_ = declared;
  }
  std::string_view body;
  if (!no_body && !head_request_) {
    body = buffer_;
    if (length_ >= 0 && body.size() > static_cast<std::uint64_t>(length_)) {
      body = body.substr(0, static_cast<std::size_t>(length_));
    }
  }
  const bool end = (final && !streamed) || head_request_ || no_body;
  head_sent_ = true;
  std::error_code ec = sink_->send_head(status_, headers_, length_, body, end);
  buffer_.clear();
  if (ec) return fail(ec);
  if (length_ >= 0 && !head_request_ && static_cast<std::int64_t>(body_bytes_) > length_) {
    return fail(errc::content_length_exceeded);
  }
  return {};
}

std::error_code Response::send_body(std::string_view data) {
  const std::uint64_t before = body_bytes_;
  body_bytes_ += data.size();
  if (head_request_ || body_forbidden(status_)) return {};
  bool too_long = false;
  if (length_ >= 0 && static_cast<std::int64_t>(body_bytes_) > length_) {
    const std::int64_t room = length_ - static_cast<std::int64_t>(before);
    data = data.substr(0, room > 0 ? static_cast<std::size_t>(room) : 0);
    too_long = true;
  }
  if (!data.empty()) {
    if (std::error_code ec = sink_->send_body(data)) return fail(ec);
  }
  if (too_long) return fail(errc::content_length_exceeded);
  return {};
}

std::error_code Response::finish() {
  if (finished_) return error_;
  finished_ = true;
  if (error_) return error_;
  if (!head_sent_) {
    if (std::error_code ec = send_head(true)) return ec;
    if (trailers_.empty() || head_request_ || body_forbidden(status_)) return {};
  } else if (head_request_ || body_forbidden(status_)) {
    return {};
  }
  const bool complete = length_ < 0 || static_cast<std::int64_t>(body_bytes_) >= length_;
  if (std::error_code ec = sink_->end_body(complete, trailers_)) return fail(ec);
  return {};
}

Result<TakenConnection> Response::take_over() {
  if (taken_over_ || head_sent_ || finished_) return make_error_code(errc::cannot_take_over);
  Result<TakenConnection> taken = sink_->take_over();
  if (!taken) return taken;
  taken_over_ = true;
  finished_ = true;
  return taken;
}

std::error_code Response::set_read_deadline(net::Deadline d) {
  return sink_->set_deadline(net::IoMode::read, d);
}

std::error_code Response::set_write_deadline(net::Deadline d) {
  return sink_->set_deadline(net::IoMode::write, d);
}

std::error_code Response::write_informational(int status, const Headers& fields) {
  if (status < 100 || status > 199 || status == 101) return make_error_code(errc::invalid_status);
  if (head_sent_ || finished_) return errc::response_finished;
  return sink_->send_informational(status, fields);
}

std::error_code Response::send_file(int fd, std::uint64_t offset, std::uint64_t count) {
  if (error_) return error_;
  if (finished_) return errc::response_finished;
  if (!sink_->can_send_file()) return errc::not_supported;
  if (head_request_ || body_forbidden(status_)) {
    body_bytes_ += count;
    return {};
  }
  // The file's bytes go out as they are: the framing must not need to wrap them.
  if (head_sent_ ? length_ < 0 : parse_length(headers_.get("content-length")) < 0)
    return errc::not_supported;
  if (count == 0) return {};
  if (!head_sent_) {
    if (std::error_code ec = send_head(false)) return ec;
  }
  const std::uint64_t room = body_bytes_ < static_cast<std::uint64_t>(length_)
                                 ? static_cast<std::uint64_t>(length_) - body_bytes_
                                 : 0;
  const bool too_long = count > room;
  body_bytes_ += count;
  if (too_long) count = room;
  if (count > 0) {
    if (std::error_code ec = sink_->send_file(fd, offset, count)) return fail(ec);
  }
  if (too_long) return fail(errc::content_length_exceeded);
  return {};
}

bool Response::discard_response() {
  if (head_sent_) return false;
  for (std::string_view name :
       {"Content-Type", "Content-Length", "Content-Encoding", "Content-Range", "Content-Language",
        "Content-Disposition", "Content-Location", "ETag", "Last-Modified"}) {
    headers_.remove(name);
  }
  buffer_.clear();
  body_bytes_ = 0;
  status_ = 200;
  return true;
}

}  // namespace detail
}  // namespace goro::http
