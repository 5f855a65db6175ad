// The per-connection HTTP/1.x parsing engine: llhttp (strict mode) over one reusable
// read buffer. It does no I/O, so it is tested on byte buffers; the server and the client
// read from their connection into read_space() and call commit().
//
// Buffer layout (offsets into one allocation):
//
//   [0, head_end)            the message head; header views point here
//   [body_start, body_read)  decoded body bytes already taken
//   [body_read, body_write)  decoded body bytes not yet taken
//   [parse_pos, end)         raw bytes not yet fed to llhttp (a pipelined next message)
//   [end, capacity)          free
//
// Chunked bodies are decoded in place: llhttp reports each piece of chunk data with a
// pointer into the buffer, and the piece is moved down to body_write, which never passes
// the parse position, so no byte is overwritten before llhttp has read it.
//
// While the head is being parsed the buffer may grow (up to what the limits allow), so
// everything is kept as offsets; the views are built once the head is complete, after
// making room for the body, and from then until next_message() the buffer never moves.
#pragma once

#include <llhttp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <goro/http/headers.hpp>

namespace goro::http::detail {

// The read buffers: page-sized buffers whose memory an idle connection can give back to
// the kernel. A buffer from new[] that is freed stays in malloc's free lists and in the
// process's RSS; a page from this pool can be released with madvise and comes back
// zeroed, on first touch, when it is used again.

inline constexpr std::size_t kPoolPage = 4096;

// A page-aligned buffer of kPoolPage bytes, contents unspecified. Thread-safe.
char* page_alloc();
// Returns p to the pool; with release, its memory is given back to the kernel first
// (one madvise call).
void page_free(char* p, bool release) noexcept;

// Owns a buffer from page_alloc() (pooled) or new[] (any other size).
struct BufferDeleter {
  bool pooled = false;
  void operator()(char* p) const noexcept {
    if (pooled) {
      page_free(p, false);
    } else {
      delete[] p;
    }
  }
};
using Buffer = std::unique_ptr<char[], BufferDeleter>;

// A buffer of size bytes: from the pool when size is kPoolPage.
inline Buffer make_buffer(std::size_t size) {
  if (size == kPoolPage) return Buffer(page_alloc(), BufferDeleter{true});
  return Buffer(new char[size], BufferDeleter{false});
}

// Frees b, giving a pooled page's memory back to the kernel.
inline void release_buffer_memory(Buffer& b) noexcept {
  if (b && b.get_deleter().pooled) {
    page_free(b.release(), true);
  } else {
    b.reset();
  }
}

// RFC 9110 5.6.2: a token (a method, a field name) is one or more tchars.
inline bool is_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum &&
        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
      return false;
  }
  return true;
}

// RFC 9110 5.5: a field value holds no control character but horizontal tab.
inline bool is_field_value(std::string_view s) noexcept {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}

// Calls f with each non-empty coding of a Transfer-Encoding value ("gzip, chunked").
template <class F>
void for_each_coding(std::string_view value, F f) {
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view coding = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
      coding.remove_prefix(1);
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
      coding.remove_suffix(1);
    if (!coding.empty()) f(coding);
  }
}

struct ParserLimits {
  std::size_t max_request_line = 8 * 1024;   // bytes of the request-target (414 past it)
  std::size_t max_header_bytes = 64 * 1024;  // all header (and trailer) bytes (431)
  std::uint64_t max_body_bytes = 16u << 20;  // decoded body bytes (413)
};

// Why a message was rejected: the status a server answers with and a short text.
struct ParseError {
  int status = 0;
  const char* message = "";
};

enum class ParseStatus { need_more, complete, error };

// The first byte from p on (before e) that `in` does not take, a byte class such as the
// characters of a field name: four bytes a step while all four are in it.
inline const char* skip_class(const std::array<bool, 256>& in, const char* p,
                              const char* e) noexcept {
  // As unsigned: the four are and-ed without a branch each.
  auto has = [&in](char c) { return static_cast<unsigned>(in[static_cast<unsigned char>(c)]); };
  while (e - p >= 4 && (has(p[0]) & has(p[1]) & has(p[2]) & has(p[3])) != 0) p += 4;
  while (p != e && has(*p) != 0) ++p;
  return p;
}

// s without the spaces and tabs (RFC 9110's OWS) at either end.
inline std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

class MessageParser {
 public:
  enum class Mode { request, response };

  MessageParser(Mode mode, ParserLimits limits, std::size_t initial_capacity = 4096);
  MessageParser(const MessageParser&) = delete;
  MessageParser& operator=(const MessageParser&) = delete;

  // --- input
  // Free space for the next read; never empty (the buffer grows while a head is parsed,
  // and in the body phase the space is reclaimed once every decoded byte is taken).
  std::span<char> read_space();
  // Frees the buffer while it holds nothing (between messages, nothing pipelined):
  // an idle keep-alive connection need not hold it. The next read_space() makes it again.
  void release_buffer() noexcept;
  // Records that n bytes were read into read_space().
  void commit(std::size_t n) noexcept { end_ += n; }
  // Raw bytes received and not yet parsed (a pipelined next message, a partial head).
  std::size_t buffered() const noexcept { return end_ - parse_pos_; }
  // The raw bytes received and not yet parsed; after the head of an upgrade (and its
  // message_complete()), what the peer sent in the new protocol.
  std::string_view unparsed() const noexcept {
    return {buffer_.get() + parse_pos_, end_ - parse_pos_};
  }
  // True once any byte of the current message (other than leading CRLFs) has arrived.
  bool head_started() const noexcept { return head_started_; }

  // --- head
  // Parses what was received of the message head. complete: the accessors below are
  // valid; for a message without a body message_complete() is already true.
  //
  // A request head that arrived whole, with no body and nothing unusual in it (a
  // common method, an origin-form target of RFC 3986 characters, HTTP/1.1 or 1.0 with
  // keep-alive, field lines of visible ASCII, no framing or Upgrade field) is read by
  // read_plain_head(), without llhttp; anything else goes to llhttp. The two agree on
  // every input the first takes (fuzz/targets/http_head_paths.cpp checks it).
  ParseStatus parse_head();
  // Whether parse_head may use read_plain_head() (on by default): off, every head goes
  // through llhttp, which the fuzz target compares against.
  void set_plain_heads(bool on) noexcept { plain_heads_ = on; }

  // Response mode: the next response answers a HEAD request (it has no body).
  void set_response_to_head(bool head) noexcept { response_to_head_ = head; }

  // After parse_head failed: makes method(), target() and headers() describe what was
  // read of the head (the fields complete so far) and returns true, once the request
  // target was read; false otherwise (they stay empty).
  bool expose_partial_head();

  std::string_view method() const noexcept { return method_; }
  bool is_head_method() const noexcept { return method_id() == HTTP_HEAD; }
  // Whether the request line was read far enough to know the method is HEAD (for an
  // error answered before the head was complete).
  bool head_request_seen() const noexcept { return url_complete_ && method_id() == HTTP_HEAD; }
  std::string_view target() const noexcept { return target_; }
  int status_code() const noexcept { return parser_.status_code; }
  std::string_view status_text() const noexcept { return status_text_; }
  // The version of a complete head (of a refused one, it means nothing).
  int version_major() const noexcept { return plain_head_ ? 1 : parser_.http_major; }
  int version_minor() const noexcept { return plain_head_ ? plain_minor_ : parser_.http_minor; }
  std::span<const HeaderField> headers() const noexcept { return fields_; }
  // The first value of header `name`, or empty.
  std::string_view header(std::string_view name) const noexcept;
  // Content-Length, or -1 when the body is chunked or runs until the connection closes.
  std::int64_t content_length() const noexcept { return content_length_; }
  bool chunked() const noexcept { return chunked_; }
  // Whether the connection may carry another message after this one.
  bool keep_alive() const noexcept { return keep_alive_; }
  // Upgrade or CONNECT: what follows the head is not HTTP; the connection is closed
  // after the response.
  bool upgrade() const noexcept { return upgrade_; }
  // Request mode: the client sent "Expect: 100-continue".
  bool expect_continue() const noexcept { return expect_continue_; }

  // --- body
  // Feeds received raw bytes to llhttp, decoding body bytes into the buffer.
  // complete: the message ended; need_more: read more (read_space() has room).
  ParseStatus parse_body();
  // Decoded body bytes waiting to be taken.
  std::size_t available() const noexcept { return body_write_ - body_read_; }
  std::string_view peek_body() const noexcept {
    return {buffer_.get() + body_read_, body_write_ - body_read_};
  }
  // Copies up to n decoded bytes out; returns how many.
  std::size_t take(void* out, std::size_t n) noexcept;
  // Drops up to n decoded bytes; returns how many.
  std::size_t skip(std::size_t n) noexcept;
  bool message_complete() const noexcept { return message_complete_; }
  // Decoded body bytes seen so far.
  std::uint64_t body_bytes() const noexcept { return body_bytes_; }
  // Response mode: the peer closed the connection. Ends a body delimited by the close;
  // anything else still open is an error.
  ParseStatus finish_on_eof();

  // --- next message
  // Prepares for the next message of the connection, keeping pipelined bytes.
  // Precondition: message_complete().
  void next_message();

  const ParseError& error() const noexcept { return error_; }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  struct FieldOffsets {
    std::uint32_t name_offset = 0, name_size = 0, value_offset = 0, value_size = 0;
    bool value_started = false;
    bool complete = false;
  };

  static int on_message_begin(llhttp_t* p);
  static int on_url(llhttp_t* p, const char* at, std::size_t n);
  static int on_url_complete(llhttp_t* p);
  static int on_status(llhttp_t* p, const char* at, std::size_t n);
  static int on_header_field(llhttp_t* p, const char* at, std::size_t n);
  static int on_header_field_complete(llhttp_t* p);
  static int on_header_value(llhttp_t* p, const char* at, std::size_t n);
  static int on_header_value_complete(llhttp_t* p);
  static int on_headers_complete(llhttp_t* p);
  static int on_body(llhttp_t* p, const char* at, std::size_t n);
  static int on_chunk_header(llhttp_t* p);
  static int on_message_complete(llhttp_t* p);
  static const llhttp_settings_t settings_;

  int fail(int status, const char* message) noexcept;
  int check_request_head() noexcept;
  int check_response_head() noexcept;
  bool chunk_overhead_exceeded() const noexcept;
  bool trailer_folded(std::size_t from, std::size_t to) noexcept;
  void refuse_request_line(bool bad_version) noexcept;
  ParseError classify_request_line() const noexcept;
  void fail_from_llhttp(llhttp_errno_t err) noexcept;
  bool header_bytes_exceeded(const char* at, std::size_t n) noexcept;
  void grow(std::size_t min_free);
  void compact_head() noexcept;
  void build_views();
  bool read_plain_head() noexcept;
  // The request's method, as llhttp numbers them.
  unsigned method_id() const noexcept { return plain_head_ ? plain_method_ : parser_.method; }
  std::uint32_t offset_of(const char* at) const noexcept {
    return static_cast<std::uint32_t>(at - buffer_.get());
  }

  Mode mode_;
  ParserLimits limits_;
  llhttp_t parser_;
  Buffer buffer_;  // from the page pool at the usual 4 KiB (release_buffer)
  std::size_t initial_capacity_;
  std::size_t capacity_;
  std::size_t end_ = 0;
  std::size_t parse_pos_ = 0;
  // Where the current message starts: after the messages read before it in the same
  // bytes (pipelining), until its head needs the room (compact_head).
  std::size_t msg_start_ = 0;

  // Head, as offsets while parsing, as views once complete.
  bool in_head_ = true;
  bool head_started_ = false;
  bool plain_heads_ = true;
  // The current head is llhttp's to read: it was given bytes of it, or the previous
  // message closed the connection (llhttp refuses whatever follows).
  bool llhttp_only_ = false;
  // read_plain_head() read the current head: its method and version are these, not
  // llhttp's. (llhttp's own are left alone: it still owes the end of the last message it
  // read, which it judges by them when it is next given input.)
  bool plain_head_ = false;
  std::uint8_t plain_method_ = 0;
  std::uint8_t plain_minor_ = 0;
  // llhttp refused the request line (its method or version); the status is chosen
  // once the whole line is in (classify_request_line).
  bool request_line_refused_ = false;
  bool request_line_bad_version_ = false;
  bool url_complete_ = false;
  std::size_t url_size_ = 0;
  std::size_t url_offset_ = 0;
  std::size_t url_end_ = 0;
  std::size_t status_offset_ = 0, status_size_ = 0;
  std::vector<FieldOffsets> offsets_;
  std::vector<HeaderField> fields_;
  std::string_view method_, target_, status_text_;
  std::int64_t content_length_ = -1;
  bool chunked_ = false;
  bool keep_alive_ = false;
  bool upgrade_ = false;
  bool expect_continue_ = false;
  bool response_to_head_ = false;
  std::size_t trailer_bytes_ = 0;

  // Body.
  std::size_t body_start_ = 0, body_read_ = 0, body_write_ = 0;
  std::uint64_t body_bytes_ = 0;
  std::uint64_t body_raw_bytes_ = 0;  // input consumed after the head (framing included)
  std::uint64_t chunks_ = 0;
  char last_raw_byte_ = 0;           // the last byte parse_body gave llhttp, kept across reads
  bool field_name_seen_ = false;     // a byte of the field name being read
  bool in_trailers_ = false;         // a request's last chunk was read
  bool trailer_line_start_ = false;  // the next trailer byte starts a line
  bool message_complete_ = false;

  ParseError error_;
};

}  // namespace goro::http::detail
