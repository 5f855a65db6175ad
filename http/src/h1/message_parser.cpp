#include "message_parser.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace goro::http::detail {

// The page pool of read buffers.
namespace {

// Pages are carved from slabs mapped kSlabPages at a time and never unmapped; free
// pages are kept in a list outside them, so a released page stays untouched.
constexpr std::size_t kSlabPages = 256;

std::mutex pool_mu;
std::vector<char*> free_pages;  // (pool_mu)
char* slab_next = nullptr;      // (pool_mu)
char* slab_end = nullptr;       // (pool_mu)

}  // namespace

char* page_alloc() {
  std::lock_guard lock(pool_mu);
  if (!free_pages.empty()) {
    char* p = free_pages.back();
    free_pages.pop_back();
    return p;
  }
  if (slab_next == slab_end) {
    void* slab = mmap(nullptr, kSlabPages * kPoolPage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slab == MAP_FAILED) {
      std::fprintf(stderr, "goro/http: cannot map read buffers: %s\n", std::strerror(errno));
      std::abort();
    }
    slab_next = static_cast<char*>(slab);
    slab_end = slab_next + kSlabPages * kPoolPage;
  }
  char* p = slab_next;
  slab_next += kPoolPage;
  return p;
}

void page_free(char* p, bool release) noexcept {
  if (p == nullptr) return;
  if (release) madvise(p, kPoolPage, MADV_DONTNEED);
  std::lock_guard lock(pool_mu);
  free_pages.push_back(p);
}

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
constexpr std::array<bool, 256> kHostChars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!$%&'()*+,-.:;=[]_~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

bool valid_host(std::string_view host) noexcept {
  const char* e = host.data() + host.size();
  return skip_class(kHostChars, host.data(), e) == e;
}

// The authority of an absolute-form request-target ("http://h:8080/p" -> "h:8080");
// empty for the other forms (origin "/p", asterisk "*", CONNECT's authority "h:443").
std::string_view target_authority(std::string_view target) noexcept {
  if (target.empty() || target.front() == '/') return {};
  std::size_t scheme = target.find("://");
  if (scheme == std::string_view::npos) return {};
  std::string_view rest = target.substr(scheme + 3);
  return rest.substr(0, rest.find_first_of("/?#"));
}

MessageParser* self(llhttp_t* p) { return static_cast<MessageParser*>(p->data); }

}  // namespace

const llhttp_settings_t MessageParser::settings_ = [] {
  llhttp_settings_t s;
  llhttp_settings_init(&s);
  s.on_message_begin = &MessageParser::on_message_begin;
  s.on_url = &MessageParser::on_url;
  s.on_url_complete = &MessageParser::on_url_complete;
  s.on_status = &MessageParser::on_status;
  s.on_header_field = &MessageParser::on_header_field;
  s.on_header_field_complete = &MessageParser::on_header_field_complete;
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
  // A head that starts after earlier messages moves to the start before a read would
  // have less than half the buffer.
  if (in_head_ && msg_start_ != 0 && capacity_ - end_ < capacity_ / 2) compact_head();
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

// Moves the head being read, and whatever follows it, to the buffer's start. Only
// offsets refer to it yet (its views are made once it is whole, after the last move),
// and llhttp keeps no pointer into the buffer between calls.
void MessageParser::compact_head() noexcept {
  const std::size_t by = msg_start_;
  std::memmove(buffer_.get(), buffer_.get() + by, end_ - by);
  end_ -= by;
  parse_pos_ -= by;
  msg_start_ = 0;
  url_offset_ -= by;
  url_end_ -= by;
  if (status_size_ != 0) status_offset_ -= by;
  for (FieldOffsets& f : offsets_) {
    f.name_offset -= static_cast<std::uint32_t>(by);
    if (f.value_started) f.value_offset -= static_cast<std::uint32_t>(by);
  }
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
    case HPE_INVALID_METHOD: refuse_request_line(false); break;
    case HPE_INVALID_CONSTANT:
      // llhttp reports an RTSP/ICE method on an HTTP request as a bad constant.
      if (std::string_view(reason).find("method") != std::string_view::npos) {
        refuse_request_line(false);
      } else {
        error_ = {400, reason};
      }
      break;
    case HPE_INVALID_VERSION: refuse_request_line(true); break;
    // llhttp's word for a chunked that is not the last coding (see check_request_head).
    case HPE_INVALID_TRANSFER_ENCODING:
      error_ = {400, "Transfer-Encoding does not end in one chunked"};
      break;
    default: error_ = {400, reason}; break;
  }
}

// llhttp says only "bad method" or "bad version", and says it at the first byte it
// cannot take, before the rest of the line has arrived. The whole request line tells a
// well-formed request we do not implement from a malformed one, so it is waited for
// (classify_request_line runs again as input comes); the answer is then the same
// however the line was split into reads.
void MessageParser::refuse_request_line(bool bad_version) noexcept {
  if (mode_ != Mode::request) {
    error_ = {400, bad_version ? "malformed HTTP version" : "malformed status line"};
    return;
  }
  request_line_refused_ = true;
  request_line_bad_version_ = bad_version;
  error_ = classify_request_line();
}

// RFC 9112 3: request-line = method SP request-target SP HTTP-version CRLF. A line of
// that form is answered 505 when its version is not 1.0 or 1.1, else 501 (its method
// is a token llhttp does not know); any other line is a 400, whatever its first word
// looks like. Returns the refusal once the line is complete or too long to be one, else
// status 0: wait for the rest.
ParseError MessageParser::classify_request_line() const noexcept {
  std::string_view line(buffer_.get() + msg_start_, end_ - msg_start_);
  while (line.starts_with("\r\n") || line.starts_with("\n"))
    line.remove_prefix(line.front() == '\r' ? 2 : 1);
  std::size_t lf = line.find('\n');
  if (lf == std::string_view::npos) {
    if (line.size() <= limits_.max_request_line + kHeadSlack) return {};
    return {400, "malformed request line"};
  }
  line = line.substr(0, lf);
  const bool crlf = line.ends_with('\r');
  if (crlf) line.remove_suffix(1);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  bool well_formed = crlf && sp2 != std::string_view::npos && is_token(line.substr(0, sp1));
  if (well_formed) {
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = line.substr(sp2 + 1);
    well_formed =
        !target.empty() &&
        std::none_of(target.begin(), target.end(),
                     [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; }) &&
        version.size() == 8 && version.starts_with("HTTP/") && version[5] >= '0' &&
        version[5] <= '9' && version[6] == '.' && version[7] >= '0' && version[7] <= '9';
    if (well_formed && (version == "HTTP/1.1" || version == "HTTP/1.0")) {
      return request_line_bad_version_ ? ParseError{400, "malformed HTTP version"}
                                       : ParseError{501, "unknown method"};
    }
  }
  return well_formed ? ParseError{505, "HTTP version not supported"}
                     : ParseError{400, "malformed request line"};
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
  if (n > 0) m->field_name_seen_ = true;
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

// llhttp takes a field line that starts with ':' (no name), in the head and in a
// chunked body's trailers alike; RFC 9110 5.1 says a name is a token, one byte or more.
int MessageParser::on_header_field_complete(llhttp_t* p) {
  MessageParser* m = self(p);
  if (!m->field_name_seen_ && m->mode_ == Mode::request) {
    return m->fail(400, m->in_head_ ? "empty header field name" : "empty trailer field name");
  }
  m->field_name_seen_ = false;
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
  if (version_major() != 1) {
    // llhttp takes "GET /" for HTTP/0.9's simple request: the line tells it from a
    // well-formed line of another version (the line has ended: the head has).
    ParseError refusal = classify_request_line();
    return fail(refusal.status, refusal.message);
  }
  const char* b = buffer_.get();
  // llhttp takes a bare LF after the request line, though nowhere else in a head. RFC
  // 9112 2.2 lets a server refuse it; refused everywhere, no line is left that another
  // parser on the path (a proxy) could end elsewhere. (The plain reader took CRLF only.)
  if (!plain_head_) {
    std::string_view version_and_rest(b + url_end_, end_ - url_end_);
    std::size_t lf = version_and_rest.find('\n');
    if (lf == std::string_view::npos || lf == 0 || version_and_rest[lf - 1] != '\r')
      return fail(400, "request line not ended by CRLF");
  }
  int hosts = 0;
  bool has_transfer_encoding = false;
  int codings = 0;
  int chunked = 0;
  bool chunked_last = false;
  for (const FieldOffsets& f : offsets_) {
    // Most fields are none of the three: their length tells, before any comparison.
    if (f.name_size != 4 && f.name_size != 17 && f.name_size != 6) continue;
    std::string_view name(b + f.name_offset, f.name_size);
    std::string_view value = trim_ows({b + f.value_offset, f.value_size});
    if (iequals(name, "host")) {
      ++hosts;
      if (!valid_host(value)) return fail(400, "malformed Host header");
    } else if (iequals(name, "transfer-encoding")) {
      has_transfer_encoding = true;
      for_each_coding(value, [&](std::string_view coding) {
        ++codings;
        chunked_last = iequals(coding, "chunked");
        if (chunked_last) ++chunked;
      });
    } else if (iequals(name, "expect")) {
      if (iequals(value, "100-continue")) {
        // RFC 9110 10.1.1: a 100-continue expectation in HTTP/1.0 is ignored.
        if (version_minor() >= 1) expect_continue_ = true;
      } else if (!value.empty()) {
        return fail(417, "unsupported expectation");
      }
    }
  }
  if (hosts > 1) return fail(400, "repeated Host header");
  if (hosts == 0 && version_minor() >= 1) return fail(400, "missing Host header");
  // RFC 9112 3.2.2: with an absolute-form target the server uses the target's authority
  // and ignores Host (build_views puts it in Host's place); userinfo ("user@") or an
  // empty host there is refused, as in a Host header.
  std::string_view target(b + url_offset_, url_size_);
  if (!target.empty() && target.front() != '/' && target.find("://") != std::string_view::npos) {
    std::string_view authority = target_authority(target);
    if (authority.empty() || !valid_host(authority))
      return fail(400, "malformed authority in the request target");
  }
  if (has_transfer_encoding) {
    if (version_minor() == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    // RFC 9112 6.1: without chunked as the final coding (applied once, RFC 9112 7) the
    // body's length cannot be known: 400, a MUST. Another coding before it is one goro
    // does not implement: 501.
    if (!chunked_last || chunked != 1)
      return fail(400, "Transfer-Encoding does not end in one chunked");
    if (codings != 1) return fail(501, "unsupported Transfer-Encoding");
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
  MessageParser* m = self(p);
  ++m->chunks_;
  // The last chunk: llhttp pauses here, so that parse_body knows where the trailer
  // section starts (see trailer_folded).
  if (p->content_length == 0 && m->mode_ == Mode::request) {
    m->in_trailers_ = true;
    return HPE_PAUSED;
  }
  return 0;
}

// Whether bytes [from, to) of a request's trailer section hold a line that starts with
// SP or HTAB, an obs-fold; llhttp takes them in trailers, which are not kept, so the
// bytes are scanned. Where a line starts is kept across reads.
bool MessageParser::trailer_folded(std::size_t from, std::size_t to) noexcept {
  for (std::size_t i = from; i < to; ++i) {
    const char c = buffer_[i];
    if (trailer_line_start_ && (c == ' ' || c == '\t')) return true;
    trailer_line_start_ = c == '\n';
  }
  return false;
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
  if (request_line_refused_) {
    error_ = classify_request_line();
    return error_.status != 0 ? ParseStatus::error : ParseStatus::need_more;
  }
  if (plain_heads_ && !llhttp_only_ && mode_ == Mode::request && read_plain_head()) {
    if (error_.status != 0) return ParseStatus::error;
    body_start_ = body_read_ = body_write_ = parse_pos_;
    build_views();
    return ParseStatus::complete;
  }
  // The head is llhttp's from its first byte on (a partial one is never read again).
  if (end_ != parse_pos_) llhttp_only_ = true;
  const char* data = buffer_.get() + parse_pos_;
  llhttp_errno_t err = llhttp_execute(&parser_, data, end_ - parse_pos_);
  if (err == HPE_OK) {
    parse_pos_ = end_;
    // Bytes llhttp skips without a callback still count: nothing grows without bound.
    if (mode_ == Mode::request && !url_complete_ &&
        parse_pos_ - msg_start_ > limits_.max_request_line + kHeadSlack) {
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
    // A refused request line waits for its end before it is answered.
    return error_.status != 0 ? ParseStatus::error : ParseStatus::need_more;
  }
  parse_pos_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - buffer_.get());
  // llhttp ends a head at a bare LF in place of its last CRLF, though at no other line
  // end of it: refused, as everywhere else (see check_request_head). The head is
  // whole in the buffer, and llhttp paused right after its last byte.
  if (mode_ == Mode::request) {
    const std::string_view head(buffer_.get() + msg_start_, parse_pos_ - msg_start_);
    if (!head.ends_with("\r\n")) {
      fail(400, "head not ended by CRLF");
      return ParseStatus::error;
    }
    // A folded value whose first line is empty ("X:" CRLF SP "v") comes to on_header_value
    // as one piece, as if unfolded; the head's bytes show the fold.
    for (std::size_t lf = head.find('\n'); lf != std::string_view::npos && lf + 1 < head.size();
         lf = head.find('\n', lf + 1)) {
      if (head[lf + 1] == ' ' || head[lf + 1] == '\t') {
        fail(400, "obsolete line folding in header");
        return ParseStatus::error;
      }
    }
  }
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
  // A body to come: its window starts where the head ends, at the buffer's start if the
  // head came after other messages and the window would not fit after it.
  if (!message_complete_ && msg_start_ != 0 && capacity_ - end_ < kBodyWindow) compact_head();
  body_start_ = body_read_ = body_write_ = parse_pos_;
  if (!message_complete_ && capacity_ - end_ < kBodyWindow) grow(kBodyWindow);
  build_views();
  return ParseStatus::complete;
}

bool MessageParser::expose_partial_head() {
  if (mode_ != Mode::request || !url_complete_) return false;
  // Whole fields only: the one the error cut (a name without its value) is left out,
  // or it would be there or not depending on where a read happened to end.
  if (!offsets_.empty() && !offsets_.back().complete) offsets_.pop_back();
  build_views();
  return true;
}

void MessageParser::build_views() {
  const char* b = buffer_.get();
  if (mode_ == Mode::request) {
    method_ = llhttp_method_name(static_cast<llhttp_method_t>(method_id()));
    target_ = {b + url_offset_, url_size_};
  } else {
    status_text_ = {b + status_offset_, status_size_};
  }
  fields_.clear();
  const std::string_view authority = mode_ == Mode::request ? target_authority(target_) : "";
  for (const FieldOffsets& f : offsets_) {
    std::string_view name(b + f.name_offset, f.name_size);
    fields_.push_back({name, !authority.empty() && iequals(name, "host")
                                 ? authority
                                 : trim_ows({b + f.value_offset, f.value_size})});
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
  std::size_t trailers_from = from;
  llhttp_errno_t err = llhttp_execute(&parser_, buffer_.get() + parse_pos_, end_ - parse_pos_);
  if (err == HPE_PAUSED && !message_complete_) {
    // Paused after the last chunk's line (on_chunk_header): the trailer section follows.
    parse_pos_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - buffer_.get());
    trailers_from = parse_pos_;
    trailer_line_start_ = true;
    llhttp_resume(&parser_);
    err = llhttp_execute(&parser_, buffer_.get() + parse_pos_, end_ - parse_pos_);
  }
  // What llhttp took, up to a pause or an error: a fold before an error is reported as
  // the fold, the first thing wrong, however the input was split.
  const std::size_t parsed_to =
      err == HPE_OK ? end_
                    : static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - buffer_.get());
  if (in_trailers_ && trailer_folded(trailers_from, parsed_to)) {
    fail(400, "obsolete line folding in trailer");
    return ParseStatus::error;
  }
  if (err == HPE_OK) {
    parse_pos_ = end_;
    body_raw_bytes_ += parse_pos_ - from;
    last_raw_byte_ = buffer_[end_ - 1];
    if (chunk_overhead_exceeded()) {
      fail(400, "chunked body framing too large for its data (extensions or padding)");
      return ParseStatus::error;
    }
    return ParseStatus::need_more;
  }
  if (err == HPE_PAUSED) {
    parse_pos_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - buffer_.get());
    body_raw_bytes_ += parse_pos_ - from;
    // llhttp also ends a chunked body at a bare LF in place of its last CRLF: a request
    // another parser on the path (a proxy) would end elsewhere. The CR may have come
    // in the previous read, whose bytes the buffer may no longer hold.
    if (mode_ == Mode::request && chunked_) {
      const char before_lf = parse_pos_ - from >= 2 ? buffer_[parse_pos_ - 2] : last_raw_byte_;
      if (before_lf != '\r') {
        fail(400, "chunked body not ended by CRLF");
        return ParseStatus::error;
      }
    }
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
  llhttp_only_ = !keep_alive_;
  std::size_t left = end_ - parse_pos_;
  if (capacity_ >= kShrinkAbove && left <= initial_capacity_) {
    Buffer smaller = make_buffer(initial_capacity_);
    std::memcpy(smaller.get(), buffer_.get() + parse_pos_, left);
    buffer_ = std::move(smaller);
    capacity_ = initial_capacity_;
    end_ = left;
    parse_pos_ = 0;
  } else if (left == 0) {
    end_ = parse_pos_ = 0;
  }
  // Otherwise the next message stays where it is, after this one: it moves to the
  // buffer's start only when a read or its body window needs the room (compact_head).
  msg_start_ = parse_pos_;
  in_head_ = true;
  head_started_ = false;
  request_line_refused_ = request_line_bad_version_ = false;
  plain_head_ = false;
  url_complete_ = false;
  url_size_ = 0;
  url_offset_ = url_end_ = msg_start_;
  status_offset_ = status_size_ = 0;
  offsets_.clear();
  fields_.clear();
  method_ = target_ = status_text_ = {};
  content_length_ = -1;
  chunked_ = keep_alive_ = upgrade_ = expect_continue_ = false;
  trailer_bytes_ = 0;
  body_start_ = body_read_ = body_write_ = 0;
  body_bytes_ = body_raw_bytes_ = chunks_ = 0;
  last_raw_byte_ = 0;
  in_trailers_ = false;
  message_complete_ = false;
}

}  // namespace goro::http::detail
