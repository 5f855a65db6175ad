#include "message_parser.hpp"

#include <algorithm>
#include <cstring>

namespace goro::http::detail {
namespace {

// Room kept free after the head for reading a body, so body reads are not one small
// read() each; allocated before the header views are handed out.
constexpr std::size_t kBodyWindow = 16 * 1024;
// A buffer that grew past this for one big head goes back to its initial size afterwards,
// so an idle keep-alive connection costs its small buffer again.
constexpr std::size_t kShrinkAbove = 64 * 1024;
// Bytes llhttp consumes without a callback (leading empty lines, the method, spaces)
// allowed beyond the limits before the head is declared too large.
constexpr std::size_t kHeadSlack = 1024;
// Framing a chunked body may cost beyond its data bytes (chunk-size lines, extensions,
// padding zeros, CRLFs): this much, plus 16 bytes per chunk and twice its data, as Go's
// chunked reader allows. Past it the body is a resource attack, not a message.
constexpr std::uint64_t kChunkOverheadSlack = 16 * 1024;

// A Host value holds only the characters of an authority (RFC 3986: reg-name, IP
// literal, port, %-escapes), as Go's httpguts.ValidHostHeader checks.
bool valid_host(std::string_view host) noexcept {
  for (unsigned char c : host) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
    if (std::string_view("!$%&'()*+,-.:;=[]_~").find(static_cast<char>(c)) ==
        std::string_view::npos)
      return false;
  }
  return true;
}

MessageParser* self(llhttp_t* p) { return static_cast<MessageParser*>(p->data); }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const llhttp_settings_t MessageParser::settings_ = [] {
  llhttp_settings_t s;
  llhttp_settings_init(&s);
  s.on_message_begin = &MessageParser::on_message_begin;
  s.on_url = &MessageParser::on_url;
  s.on_url_complete = &MessageParser::on_url_complete;
  s.on_status = &MessageParser::on_status;
  s.on_header_field = &MessageParser::on_header_field;
  s.on_header_value = &MessageParser::on_header_value;
  s.on_header_value_complete = &MessageParser::on_header_value_complete;
  s.on_headers_complete = &MessageParser::on_headers_complete;
  s.on_body = &MessageParser::on_body;
  s.on_chunk_header = &MessageParser::on_chunk_header;
  s.on_message_complete = &MessageParser::on_message_complete;
  return s;
}();

MessageParser::MessageParser(Mode mode, ParserLimits limits, std::size_t initial_capacity)
    : mode_(mode),
      limits_(limits),
      buffer_(make_buffer(initial_capacity)),
      initial_capacity_(initial_capacity),
      capacity_(initial_capacity) {
  llhttp_init(&parser_, mode == Mode::request ? HTTP_REQUEST : HTTP_RESPONSE, &settings_);
  parser_.data = this;
}

void MessageParser::release_buffer() noexcept {
  if (end_ != 0 || !in_head_) return;
  release_buffer_memory(buffer_);
  capacity_ = 0;
}

std::span<char> MessageParser::read_space() {
  if (!buffer_) {
    buffer_ = make_buffer(initial_capacity_);
    capacity_ = initial_capacity_;
  }
  if (!in_head_ && !message_complete_ && available() == 0 && parse_pos_ == end_) {
    // Every body byte received so far was taken: reuse the body window from its start.
    body_read_ = body_write_ = parse_pos_ = end_ = body_start_;
  }
  if (end_ == capacity_) {
    if (in_head_) {
      grow(capacity_);
    } else if (body_read_ > body_start_ && parse_pos_ == end_) {
      std::size_t n = available();
      std::memmove(buffer_.get() + body_start_, buffer_.get() + body_read_, n);
      body_read_ = body_start_;
      body_write_ = parse_pos_ = end_ = body_start_ + n;
    }
  }
  return {buffer_.get() + end_, capacity_ - end_};
}

void MessageParser::grow(std::size_t min_free) {
  std::size_t new_capacity = std::max(capacity_ * 2, end_ + min_free);
  Buffer bigger = make_buffer(new_capacity);
  std::memcpy(bigger.get(), buffer_.get(), end_);
  buffer_ = std::move(bigger);
  capacity_ = new_capacity;
}

int MessageParser::fail(int status, const char* message) noexcept {
  error_ = {status, message};
  llhttp_set_error_reason(&parser_, message);
  return HPE_USER;
}

void MessageParser::fail_from_llhttp(llhttp_errno_t err) noexcept {
  if (error_.status != 0) return;  // a callback failed with its own status
  const char* reason = llhttp_get_error_reason(&parser_);
  if (reason == nullptr) reason = llhttp_errno_name(err);
  switch (err) {
    case HPE_INVALID_METHOD: classify_request_line_error(false); break;
    case HPE_INVALID_CONSTANT:
      // llhttp reports an RTSP/ICE method on an HTTP request as a bad constant.
      if (std::string_view(reason).find("method") != std::string_view::npos) {
        classify_request_line_error(false);
      } else {
        error_ = {400, reason};
      }
      break;
    case HPE_INVALID_VERSION: classify_request_line_error(true); break;
    case HPE_INVALID_TRANSFER_ENCODING: error_ = {501, "unsupported Transfer-Encoding"}; break;
    default: error_ = {400, reason}; break;
  }
}

// llhttp says only "bad method" or "bad version"; the request line itself tells a
// well-formed request we do not implement (501 for an unknown method token, 505 for an
// HTTP/d.d other than 1.0 and 1.1) from a malformed one (400), as Go does.
void MessageParser::classify_request_line_error(bool bad_version) noexcept {
  if (mode_ != Mode::request) {
    error_ = {400, bad_version ? "malformed HTTP version" : "malformed status line"};
    return;
  }
  std::string_view line(buffer_.get(), end_);
  while (line.starts_with("\r\n") || line.starts_with("\n"))
    line.remove_prefix(line.front() == '\r' ? 2 : 1);
  line = line.substr(0, line.find('\n'));
  if (line.ends_with('\r')) line.remove_suffix(1);
  std::size_t sp = line.find(' ');
  const bool method_ok = sp != std::string_view::npos && is_token(line.substr(0, sp));
  if (!bad_version) {
    error_ =
        method_ok ? ParseError{501, "unknown method"} : ParseError{400, "malformed request line"};
    return;
  }
  std::size_t last = line.rfind(' ');
  std::string_view version =
      last == std::string_view::npos ? std::string_view{} : line.substr(last + 1);
  bool well_formed = method_ok && last > sp && version.size() == 8 &&
                     version.starts_with("HTTP/") && version[5] >= '0' && version[5] <= '9' &&
                     version[6] == '.' && version[7] >= '0' && version[7] <= '9';
  if (well_formed) {
    error_ = {505, "HTTP version not supported"};
  } else {
    error_ = {400, "malformed HTTP version"};
  }
}

bool MessageParser::header_bytes_exceeded(const char* at, std::size_t n) noexcept {
  if (!in_head_) {
    trailer_bytes_ += n;
    return trailer_bytes_ > limits_.max_header_bytes;
  }
  return offset_of(at) + n - url_end_ > limits_.max_header_bytes;
}

int MessageParser::on_message_begin(llhttp_t* p) {
  self(p)->head_started_ = true;
  return 0;
}

int MessageParser::on_url(llhttp_t* p, const char* at, std::size_t n) {
  MessageParser* m = self(p);
  if (m->url_size_ == 0) m->url_offset_ = m->offset_of(at);
  m->url_size_ += n;
  if (m->url_size_ > m->limits_.max_request_line) return m->fail(414, "request target too long");
  return 0;
}

int MessageParser::on_url_complete(llhttp_t* p) {
  MessageParser* m = self(p);
  m->url_complete_ = true;
  m->url_end_ = m->url_offset_ + m->url_size_;
  return 0;
}

int MessageParser::on_status(llhttp_t* p, const char* at, std::size_t n) {
  MessageParser* m = self(p);
  if (m->status_size_ == 0) m->status_offset_ = m->offset_of(at);
  m->status_size_ += n;
  return 0;
}

int MessageParser::on_header_field(llhttp_t* p, const char* at, std::size_t n) {
  MessageParser* m = self(p);
  if (m->header_bytes_exceeded(at, n)) {
    return m->fail(431, m->in_head_ ? "header fields too large" : "trailer fields too large");
  }
  if (!m->in_head_) return 0;  // trailers are counted, not kept
  if (m->offsets_.empty() || m->offsets_.back().complete) {
    FieldOffsets f;
    f.name_offset = m->offset_of(at);
    f.name_size = static_cast<std::uint32_t>(n);
    m->offsets_.push_back(f);
  } else {
    m->offsets_.back().name_size += static_cast<std::uint32_t>(n);
  }
  return 0;
}

int MessageParser::on_header_value(llhttp_t* p, const char* at, std::size_t n) {
  MessageParser* m = self(p);
  if (m->header_bytes_exceeded(at, n)) {
    return m->fail(431, m->in_head_ ? "header fields too large" : "trailer fields too large");
  }
  if (!m->in_head_) return 0;
  FieldOffsets& f = m->offsets_.back();
  std::uint32_t offset = m->offset_of(at);
  if (!f.value_started) {
    f.value_started = true;
    f.value_offset = offset;
    f.value_size = static_cast<std::uint32_t>(n);
  } else if (offset == f.value_offset + f.value_size) {
    // The rest of a value split across two reads: contiguous in the buffer.
    f.value_size += static_cast<std::uint32_t>(n);
  } else {
    // llhttp reports an obs-fold continuation line as a second, detached piece.
    return m->fail(400, "obsolete line folding in header");
  }
  return 0;
}

int MessageParser::on_header_value_complete(llhttp_t* p) {
  MessageParser* m = self(p);
  if (m->in_head_ && !m->offsets_.empty()) m->offsets_.back().complete = true;
  return 0;
}

int MessageParser::check_request_head() noexcept {
  if (parser_.http_major != 1) return fail(505, "HTTP version not supported");
  const char* b = buffer_.get();
  int hosts = 0;
  bool has_transfer_encoding = false;
  int codings = 0;
  bool only_chunked = true;
  for (const FieldOffsets& f : offsets_) {
    std::string_view name(b + f.name_offset, f.name_size);
    std::string_view value = trim_ows({b + f.value_offset, f.value_size});
    if (name.empty()) return fail(400, "empty header field name");
    if (iequals(name, "host")) {
      ++hosts;
      if (!valid_host(value)) return fail(400, "malformed Host header");
    } else if (iequals(name, "transfer-encoding")) {
      has_transfer_encoding = true;
      for_each_coding(value, [&](std::string_view coding) {
        ++codings;
        if (!iequals(coding, "chunked")) only_chunked = false;
      });
    } else if (iequals(name, "expect")) {
      if (iequals(value, "100-continue")) {
        // RFC 9110 10.1.1: a 100-continue expectation in HTTP/1.0 is ignored.
        if (parser_.http_minor >= 1) expect_continue_ = true;
      } else if (!value.empty()) {
        return fail(417, "unsupported expectation");
      }
    }
  }
  if (hosts > 1) return fail(400, "repeated Host header");
  if (hosts == 0 && parser_.http_minor >= 1) return fail(400, "missing Host header");
  if (has_transfer_encoding) {
    if (parser_.http_minor == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (codings != 1 || !only_chunked) return fail(501, "unsupported Transfer-Encoding");
  }
  return 0;
}

int MessageParser::check_response_head() noexcept {
  if (parser_.http_major != 1) return fail(505, "response version is not HTTP/1.x");
  // Only chunked (llhttp checked it is last): anything else would hand the caller the
  // still-encoded bytes, or leave the framing to guesswork (Go refuses it too).
  if (parser_.flags & F_TRANSFER_ENCODING) {
    const char* b = buffer_.get();
    bool only_chunked = true;
    for (const FieldOffsets& f : offsets_) {
      if (!iequals(std::string_view(b + f.name_offset, f.name_size), "transfer-encoding")) continue;
      for_each_coding({b + f.value_offset, f.value_size}, [&](std::string_view coding) {
        only_chunked = only_chunked && iequals(coding, "chunked");
      });
    }
    if (!only_chunked) return fail(501, "unsupported Transfer-Encoding in the response");
  }
  return 0;
}

int MessageParser::on_headers_complete(llhttp_t* p) {
  MessageParser* m = self(p);
  m->in_head_ = false;
  if (m->mode_ == Mode::request) {
    if (int err = m->check_request_head(); err != 0) return err;
  } else {
    if (int err = m->check_response_head(); err != 0) return err;
  }
  m->chunked_ = (p->flags & F_CHUNKED) != 0;
  if (p->flags & F_CONTENT_LENGTH) {
    m->content_length_ = static_cast<std::int64_t>(p->content_length);
  } else if (m->chunked_ || (m->mode_ == Mode::response && llhttp_message_needs_eof(p))) {
    m->content_length_ = -1;
  } else {
    m->content_length_ = 0;
  }
  // llhttp lets an HTTP/1.0 "keep-alive" win over a "close" in the same message; close
  // wins (RFC 9112 9.3).
  m->keep_alive_ = llhttp_should_keep_alive(p) != 0 && (p->flags & F_CONNECTION_CLOSE) == 0;
  m->upgrade_ = p->upgrade != 0;
  if (m->mode_ == Mode::response) {
    // No body, whatever Content-Length or Transfer-Encoding say: a response to HEAD,
    // and 1xx, 204 and 304 responses (RFC 9112 6.3). (101 ends the HTTP exchange;
    // llhttp treats it as an upgrade, which the pause below leaves to the caller.)
    const int code = p->status_code;
    if (m->response_to_head_ || (code >= 100 && code < 200 && code != 101) || code == 204 ||
        code == 304) {
      m->content_length_ = 0;
      m->chunked_ = false;
      return 1;
    }
  }
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > m->limits_.max_body_bytes) {
    return m->fail(
        413, m->mode_ == Mode::request ? "request body too large" : "response body too large");
  }
  return HPE_PAUSED;
}

int MessageParser::on_body(llhttp_t* p, const char* at, std::size_t n) {
  MessageParser* m = self(p);
  m->body_bytes_ += n;
  if (m->body_bytes_ > m->limits_.max_body_bytes) {
    return m->fail(
        413, m->mode_ == Mode::request ? "request body too large" : "response body too large");
  }
  char* to = m->buffer_.get() + m->body_write_;
  if (to != at) std::memmove(to, at, n);
  m->body_write_ += n;
  return 0;
}

int MessageParser::on_chunk_header(llhttp_t* p) {
  ++self(p)->chunks_;
  return 0;
}

bool MessageParser::chunk_overhead_exceeded() const noexcept {
  if (!chunked_) return false;
  const std::uint64_t allowed =
      kChunkOverheadSlack + trailer_bytes_ + 16 * chunks_ + 2 * body_bytes_;
  return body_raw_bytes_ > body_bytes_ + allowed;
}

int MessageParser::on_message_complete(llhttp_t* p) {
  self(p)->message_complete_ = true;
  return HPE_PAUSED;
}

ParseStatus MessageParser::parse_head() {
  if (error_.status != 0) return ParseStatus::error;
  const char* data = buffer_.get() + parse_pos_;
  llhttp_errno_t err = llhttp_execute(&parser_, data, end_ - parse_pos_);
  if (err == HPE_OK) {
    parse_pos_ = end_;
    // Bytes llhttp skips without a callback still count: nothing grows without bound.
    if (mode_ == Mode::request && !url_complete_ &&
        parse_pos_ > limits_.max_request_line + kHeadSlack) {
      fail(414, "request line too long");
      return ParseStatus::error;
    }
    if (parse_pos_ > url_end_ + limits_.max_header_bytes + kHeadSlack) {
      fail(431, "header fields too large");
      return ParseStatus::error;
    }
    return ParseStatus::need_more;
  }
  if (err != HPE_PAUSED) {
    fail_from_llhttp(err);
    return ParseStatus::error;
  }
  parse_pos_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - buffer_.get());
  llhttp_resume(&parser_);
  if (!message_complete_ && !chunked_ && content_length_ == 0) {
    // No body: let llhttp reach the end of the message now (it needs no input).
    err = llhttp_execute(&parser_, buffer_.get() + parse_pos_, 0);
    if (err == HPE_PAUSED) {
      llhttp_resume(&parser_);
    } else if (err != HPE_OK) {
      fail_from_llhttp(err);
      return ParseStatus::error;
    }
  }
  body_start_ = body_read_ = body_write_ = parse_pos_;
  if (!message_complete_ && capacity_ - end_ < kBodyWindow) grow(kBodyWindow);
  build_views();
  return ParseStatus::complete;
}

bool MessageParser::expose_partial_head() {
  if (mode_ != Mode::request || !url_complete_) return false;
  build_views();
  return true;
}

void MessageParser::build_views() {
  const char* b = buffer_.get();
  if (mode_ == Mode::request) {
    method_ = llhttp_method_name(static_cast<llhttp_method_t>(parser_.method));
    target_ = {b + url_offset_, url_size_};
  } else {
    status_text_ = {b + status_offset_, status_size_};
  }
  fields_.clear();
  for (const FieldOffsets& f : offsets_) {
    fields_.push_back(
        {{b + f.name_offset, f.name_size}, trim_ows({b + f.value_offset, f.value_size})});
  }
}

std::string_view MessageParser::header(std::string_view name) const noexcept {
  for (const HeaderField& f : fields_) {
    if (iequals(f.name, name)) return f.value;
  }
  return {};
}

ParseStatus MessageParser::parse_body() {
  if (error_.status != 0) return ParseStatus::error;
  if (message_complete_) return ParseStatus::complete;
  if (parse_pos_ == end_) return ParseStatus::need_more;
  const std::size_t from = parse_pos_;
  llhttp_errno_t err = llhttp_execute(&parser_, buffer_.get() + parse_pos_, end_ - parse_pos_);
  if (err == HPE_OK) {
    parse_pos_ = end_;
    body_raw_bytes_ += parse_pos_ - from;
    if (chunk_overhead_exceeded()) {
      fail(400, "chunked body framing too large for its data (extensions or padding)");
      return ParseStatus::error;
    }
    return ParseStatus::need_more;
  }
  if (err == HPE_PAUSED) {
    parse_pos_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - buffer_.get());
    body_raw_bytes_ += parse_pos_ - from;
    llhttp_resume(&parser_);
    return ParseStatus::complete;
  }
  fail_from_llhttp(err);
  return ParseStatus::error;
}

ParseStatus MessageParser::finish_on_eof() {
  if (error_.status != 0) return ParseStatus::error;
  if (message_complete_) return ParseStatus::complete;
  llhttp_errno_t err = llhttp_finish(&parser_);
  if ((err == HPE_OK || err == HPE_PAUSED) && message_complete_) {
    llhttp_resume(&parser_);
    return ParseStatus::complete;
  }
  error_ = {400, "connection closed before the message ended"};
  return ParseStatus::error;
}

std::size_t MessageParser::take(void* out, std::size_t n) noexcept {
  std::size_t k = std::min(n, available());
  std::memcpy(out, buffer_.get() + body_read_, k);
  body_read_ += k;
  return k;
}

std::size_t MessageParser::skip(std::size_t n) noexcept {
  std::size_t k = std::min(n, available());
  body_read_ += k;
  return k;
}

void MessageParser::next_message() {
  std::size_t left = end_ - parse_pos_;
  if (capacity_ >= kShrinkAbove && left <= initial_capacity_) {
    Buffer smaller = make_buffer(initial_capacity_);
    std::memcpy(smaller.get(), buffer_.get() + parse_pos_, left);
    buffer_ = std::move(smaller);
    capacity_ = initial_capacity_;
  } else if (left != 0 && parse_pos_ != 0) {
    std::memmove(buffer_.get(), buffer_.get() + parse_pos_, left);
  }
  end_ = left;
  parse_pos_ = 0;
  in_head_ = true;
  head_started_ = false;
  url_complete_ = false;
  url_size_ = url_offset_ = url_end_ = 0;
  status_offset_ = status_size_ = 0;
  offsets_.clear();
  fields_.clear();
  method_ = target_ = status_text_ = {};
  content_length_ = -1;
  chunked_ = keep_alive_ = upgrade_ = expect_continue_ = false;
  trailer_bytes_ = 0;
  body_start_ = body_read_ = body_write_ = 0;
  body_bytes_ = body_raw_bytes_ = chunks_ = 0;
  message_complete_ = false;
}

}  // namespace goro::http::detail
