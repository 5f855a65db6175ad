#include <goro/http/response.hpp>

#include <charconv>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/status.hpp>

#include "access.hpp"

namespace goro::http {
namespace {

bool body_forbidden(int status) { return status < 200 || status == 204 || status == 304; }

void append_number(std::string& out, std::uint64_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  (void)ec;
  out.append(digits, end);
}

// "HTTP/1.1 200 OK\r\n": made once for each code from 100 to 599.
std::string_view status_line(int status) {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> v(500);
    for (int code = 100; code < 600; ++code) {
      std::string& line = v[static_cast<std::size_t>(code - 100)];
      line.append("HTTP/1.1 ");
      append_number(line, static_cast<std::uint64_t>(code));
      line.push_back(' ');
      line.append(reason_phrase(code));
      line.append("\r\n");
    }
    return v;
  }();
  if (status < 100 || status >= 600) return {};
  return lines[static_cast<std::size_t>(status - 100)];
}

void append_status_line(std::string& out, int status) {
  if (std::string_view line = status_line(status); !line.empty()) {
    out.append(line);
    return;
  }
  out.append("HTTP/1.1 ");
  append_number(out, static_cast<std::uint64_t>(status));
  out.push_back(' ');
  out.append(reason_phrase(status));
  out.append("\r\n");
}

// The header fields send_head looks at: the ones the writer manages itself (a
// handler's values for them are not copied verbatim), and the two it adds unless the
// handler did.
enum class Field { other, content_length, transfer_encoding, connection, date, server };

Field field_of(std::string_view name) {
  switch (name.size()) {
    case 4: return iequals(name, "date") ? Field::date : Field::other;
    case 6: return iequals(name, "server") ? Field::server : Field::other;
    case 10: return iequals(name, "connection") ? Field::connection : Field::other;
    case 14: return iequals(name, "content-length") ? Field::content_length : Field::other;
    case 17: return iequals(name, "transfer-encoding") ? Field::transfer_encoding : Field::other;
    default: return Field::other;
  }
}

std::int64_t parse_length(std::string_view v) {
  std::uint64_t n = 0;
  if (v.empty()) return -1;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n > (1ull << 62)) return -1;
  return static_cast<std::int64_t>(n);
}

}  // namespace

void ResponseWriter::set_status(int code) noexcept {
  if (!head_sent_) status_ = code;
}

std::error_code ResponseWriter::fail(std::error_code ec) noexcept {
  if (!error_) error_ = ec;
  keep_alive_ = false;
  return error_;
}

std::error_code ResponseWriter::write(std::string_view data) {
  if (error_) return error_;
  if (finished_) return errc::response_finished;
  // A held response asks its sink whether it is still wanted (http::timeout's is not
  // once the time is up).
  if (hold_) {
    if (std::error_code ec = sink_->write_out(nullptr, 0)) return fail(ec);
  }
  if (data.empty()) return {};
  if (!head_sent_) {
    // A HEAD response stores nothing, so it can wait for the total and send Content-Length.
    if (hold_ || head_request_ || body_bytes_ + data.size() <= buffer_limit_) {
      if (!head_request_) buffer_.append(data);
      body_bytes_ += data.size();
      return {};
    }
    if (std::error_code ec = send_head(false)) return ec;
  }
  return send_body(data);
}

std::error_code ResponseWriter::flush() {
  if (error_) return error_;
  if (finished_) return errc::response_finished;
  if (hold_) {
    if (std::error_code ec = sink_->write_out(nullptr, 0)) return fail(ec);
  }
  if (!head_sent_ && !hold_) return send_head(false);
  return {};
}

std::error_code ResponseWriter::text(std::string_view body, int status) {
  if (!headers_.has("content-type")) headers_.add("Content-Type", "text/plain; charset=utf-8");
  set_status(status);
  return write(body);
}

std::error_code ResponseWriter::json(std::string_view body, int status) {
  if (!headers_.has("content-type")) headers_.add("Content-Type", "application/json");
  set_status(status);
  return write(body);
}

std::error_code ResponseWriter::send_head(bool final) {
  if (sink_->frames_response()) return send_framed_head(final);
  head_.clear();
  append_status_line(head_, status_);
  // One pass over the handler's fields: the others are copied, the first value of each
  // managed one noted.
  std::string_view content_length, connection;
  bool has_content_length = false, has_connection = false, has_date = false, has_server = false;
  for (HeaderField f : headers_) {
    switch (field_of(f.name)) {
      case Field::content_length:
        if (!has_content_length) content_length = f.value;
        has_content_length = true;
        continue;
      case Field::connection:
        if (!has_connection) connection = f.value;
        has_connection = true;
        continue;
      case Field::transfer_encoding: continue;
      case Field::date: has_date = true; break;
      case Field::server: has_server = true; break;
      case Field::other: break;
    }
    head_.append(f.name);
    head_.append(": ");
    head_.append(f.value);
    head_.append("\r\n");
  }
  std::int64_t declared = parse_length(content_length);
  if (body_forbidden(status_)) {
    framing_ = Framing::none;
  } else if (final) {
    framing_ = Framing::length;
    // A HEAD handler may state the length of the body it did not write.
    declared_length_ =
        (head_request_ && declared >= 0) ? declared : static_cast<std::int64_t>(body_bytes_);
  } else if (declared >= 0) {
    framing_ = Framing::length;
    declared_length_ = declared;
  } else if (request_minor_ >= 1) {
    framing_ = Framing::chunked;
  } else {
    framing_ = Framing::close;
    keep_alive_ = false;
  }
  if (has_token(connection, "close") || !sink_->reusable()) keep_alive_ = false;

  if (!has_date) detail::append_date_header(head_);
  if (!has_server) head_.append("Server: goro\r\n");
  if (framing_ == Framing::length) {
    char line[48] = "Content-Length: ";
    constexpr std::size_t kName = sizeof "Content-Length: " - 1;
    auto [end, ec] = std::to_chars(line + kName, line + sizeof line - 2,
                                   static_cast<std::uint64_t>(declared_length_));
    (void)ec;
    end[0] = '\r';
    end[1] = '\n';
    head_.append(line, static_cast<std::size_t>(end + 2 - line));
  } else if (framing_ == Framing::chunked) {
    head_.append("Transfer-Encoding: chunked\r\n");
  }
  if (!keep_alive_) {
    head_.append("Connection: close\r\n");
  } else if (request_minor_ == 0) {
    head_.append("Connection: keep-alive\r\n");
  }
  head_.append("\r\n");

  iovec iov[4];
  int count = 0;
  iov[count++] = {head_.data(), head_.size()};
  char chunk_head[24];
  bool send_buffer = !buffer_.empty() && !head_request_ && framing_ != Framing::none;
  if (send_buffer && framing_ == Framing::chunked) {
    auto [end, ec] = std::to_chars(chunk_head, chunk_head + 20, buffer_.size(), 16);
    (void)ec;
    end[0] = '\r';
    end[1] = '\n';
    iov[count++] = {chunk_head, static_cast<std::size_t>(end + 2 - chunk_head)};
  }
  if (send_buffer) {
    std::size_t n = buffer_.size();
    if (framing_ == Framing::length && !final && static_cast<std::int64_t>(n) > declared_length_) {
      n = static_cast<std::size_t>(declared_length_);
    }
    iov[count++] = {buffer_.data(), n};
  }
  if (send_buffer && framing_ == Framing::chunked) iov[count++] = {const_cast<char*>("\r\n"), 2};
  head_sent_ = true;
  std::error_code ec = sink_->write_out(iov, count);
  buffer_.clear();
  if (ec) return fail(ec);
  if (framing_ == Framing::length && !head_request_ &&
      static_cast<std::int64_t>(body_bytes_) > declared_length_) {
    return fail(errc::content_length_exceeded);
  }
  return {};
}

// The head for a sink that frames the response itself: no HTTP/1.1 head, no chunking;
// the length, when known, is the one a Content-Length would state.
std::error_code ResponseWriter::send_framed_head(bool final) {
  std::int64_t declared = parse_length(headers_.get("content-length"));
  declared_length_ = -1;
  if (body_forbidden(status_)) {
    framing_ = Framing::none;
  } else {
    framing_ = Framing::framed;
    if (final) {
      declared_length_ =
          (head_request_ && declared >= 0) ? declared : static_cast<std::int64_t>(body_bytes_);
    } else {
      declared_length_ = declared;
    }
  }
  std::string_view body;
  if (framing_ == Framing::framed && !head_request_) {
    body = buffer_;
    if (declared_length_ >= 0 && body.size() > static_cast<std::uint64_t>(declared_length_)) {
      body = body.substr(0, static_cast<std::size_t>(declared_length_));
    }
  }
  const bool end = final || head_request_ || framing_ == Framing::none;
  head_sent_ = true;
  std::error_code ec = sink_->write_head(status_, headers_, declared_length_, body, end);
  buffer_.clear();
  if (ec) return fail(ec);
  if (declared_length_ >= 0 && !head_request_ &&
      static_cast<std::int64_t>(body_bytes_) > declared_length_) {
    return fail(errc::content_length_exceeded);
  }
  return {};
}

std::error_code ResponseWriter::send_body(std::string_view data) {
  std::uint64_t before = body_bytes_;
  body_bytes_ += data.size();
  if (head_request_ || framing_ == Framing::none) return {};
  iovec iov[3];
  int count = 0;
  char chunk_head[24];
  bool too_long = false;
  if (framing_ == Framing::chunked) {
    auto [end, ec] = std::to_chars(chunk_head, chunk_head + 20, data.size(), 16);
    (void)ec;
    end[0] = '\r';
    end[1] = '\n';
    iov[count++] = {chunk_head, static_cast<std::size_t>(end + 2 - chunk_head)};
  } else if ((framing_ == Framing::length || framing_ == Framing::framed) &&
             declared_length_ >= 0 && static_cast<std::int64_t>(body_bytes_) > declared_length_) {
    std::int64_t room = declared_length_ - static_cast<std::int64_t>(before);
    data = data.substr(0, room > 0 ? static_cast<std::size_t>(room) : 0);
    too_long = true;
  }
  iov[count++] = {const_cast<char*>(data.data()), data.size()};
  if (framing_ == Framing::chunked) iov[count++] = {const_cast<char*>("\r\n"), 2};
  if (!data.empty()) {
    if (std::error_code ec = sink_->write_out(iov, count)) return fail(ec);
  }
  if (too_long) return fail(errc::content_length_exceeded);
  return {};
}

namespace detail {

void ResponseAccess::begin(ResponseWriter& w, ResponseSink* sink, int request_minor,
                           bool head_request, bool keep_alive, std::size_t buffer_limit) {
  w.sink_ = sink;
  w.headers_.clear();
  w.buffer_.clear();
  w.status_ = 200;
  w.request_minor_ = request_minor;
  w.head_request_ = head_request;
  w.keep_alive_ = keep_alive;
  w.head_sent_ = false;
  w.finished_ = false;
  w.hold_ = false;
  w.framing_ = ResponseWriter::Framing::none;
  w.declared_length_ = -1;
  w.body_bytes_ = 0;
  w.buffer_limit_ = buffer_limit;
  w.error_ = {};
}

std::error_code ResponseAccess::finish(ResponseWriter& w) {
  if (w.finished_) return w.error_;
  w.finished_ = true;
  if (w.error_) return w.error_;
  if (!w.head_sent_) return w.send_head(true);
  if (w.head_request_) return {};
  if (w.framing_ == ResponseWriter::Framing::framed) {
    const bool complete = w.declared_length_ < 0 ||
                          static_cast<std::int64_t>(w.body_bytes_) >= w.declared_length_;
    if (std::error_code ec = w.sink_->end_body(complete)) return w.fail(ec);
    return {};
  }
  if (w.framing_ == ResponseWriter::Framing::chunked) {
    iovec end{const_cast<char*>("0\r\n\r\n"), 5};
    if (std::error_code ec = w.sink_->write_out(&end, 1)) return w.fail(ec);
  } else if (w.framing_ == ResponseWriter::Framing::length &&
             static_cast<std::int64_t>(w.body_bytes_) < w.declared_length_) {
    // Shorter than announced: only closing tells the client the body is cut.
    w.keep_alive_ = false;
  }
  return {};
}

void ResponseAccess::hold(ResponseWriter& w) { w.hold_ = true; }

std::error_code ResponseAccess::replay(ResponseWriter& from, ResponseWriter& to) {
  to.set_status(from.status_);
  for (HeaderField f : from.headers_) to.headers_.add(f.name, f.value);
  return to.write(from.buffer_);
}

void ResponseAccess::discard(ResponseWriter& w) {
  for (std::string_view name :
       {"Content-Type", "Content-Length", "Content-Encoding", "Content-Range", "Content-Language",
        "Content-Disposition", "Content-Location", "ETag", "Last-Modified"}) {
    w.headers_.remove(name);
  }
  w.buffer_.clear();
  w.body_bytes_ = 0;
  w.status_ = 200;
}

void build_error_response(std::string& out, int status, std::string_view message, bool head,
                          const Headers* extra) {
  std::string body;
  append_number(body, static_cast<std::uint64_t>(status));
  body.push_back(' ');
  body.append(reason_phrase(status));
  if (!message.empty()) {
    body.append(": ");
    body.append(message);
  }
  body.push_back('\n');
  out.clear();
  append_status_line(out, status);
  append_date_header(out);
  out.append("Server: goro\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ");
  append_number(out, body.size());
  out.append("\r\nConnection: close\r\n");
  if (extra != nullptr) {
    for (const HeaderField& f : *extra) {
      // A CR or LF would split the reply: such a field is not sent.
      if (f.name.find_first_of("\r\n:") != std::string::npos ||
          f.value.find_first_of("\r\n") != std::string::npos)
        continue;
      out.append(f.name);
      out.append(": ");
      out.append(f.value);
      out.append("\r\n");
    }
  }
  out.append("\r\n");
  if (!head) out.append(body);
}

}  // namespace detail
}  // namespace goro::http
