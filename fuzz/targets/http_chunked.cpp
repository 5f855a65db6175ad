// http_chunked: a chunked request body, decoded by the server's MessageParser.
//
// The input (after its settings byte) follows the head of a chunked POST. What the
// parser makes of it is checked three ways: against itself given the input in one
// piece, against a plain decoder of RFC 9112 7.1 (whatever the parser accepts, the RFC
// accepts, with the same data and the same end), and for a chunked body it completes,
// nothing of what follows (a pipelined request) may have been taken as body.
//
// Settings byte: bits 0-1 how the input is split into reads (read_steps); bits 4-7 the
// size of each take() of decoded bytes minus one.
#include <cstring>
#include <string>

#include "harness.hpp"
#include "parser_feed.hpp"

namespace goro::fuzz {
namespace {

using http::detail::MessageParser;
using http::detail::ParseStatus;

constexpr std::string_view kHead =
    "POST /upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

struct Decoded {
  ParseStatus status = ParseStatus::need_more;
  int error_status = 0;
  std::string body;
  std::size_t consumed = 0;  // bytes of the body input the message took
};

Decoded decode(std::string_view body_input, std::vector<std::size_t> steps, std::size_t take_step) {
  MessageParser p(MessageParser::Mode::request, {8 * 1024, 4 * 1024, 1 << 20}, 64);
  std::string input(kHead);
  input.append(body_input);
  ParserFeed feed(p, input, std::move(steps));
  Decoded d;
  if (feed.head() != ParseStatus::complete || !p.chunked()) {
    d.status = ParseStatus::error;
    d.error_status = -1;  // the fixed head was refused
    return d;
  }
  char buf[16];
  for (;;) {
    if (p.available() > 0) {
      d.body.append(buf, p.take(buf, std::min(take_step, sizeof buf)));
      continue;
    }
    if (p.message_complete()) {
      d.status = ParseStatus::complete;
      break;
    }
    ParseStatus st = p.parse_body();
    if (st == ParseStatus::error) {
      d.status = st;
      d.error_status = p.error().status;
      return d;
    }
    if (st == ParseStatus::complete || p.available() > 0) continue;
    if (!feed.feed()) return d;
  }
  d.consumed = body_input.size() - p.buffered() - feed.rest().size();
  return d;
}

// RFC 9112 7.1, written plainly: the grammar, nothing lenient.
class Rfc9112Chunked {
 public:
  enum class Result { complete, incomplete, invalid };

  explicit Rfc9112Chunked(std::string_view in) : in_(in) {}

  Result run() {
    for (;;) {
      std::uint64_t size = 0;
      std::size_t digits = 0;
      while (pos_ < in_.size() && hex(in_[pos_]) >= 0) {
        if (size > (~std::uint64_t{0} >> 4)) return Result::invalid;  // would overflow
        size = size * 16 + static_cast<std::uint64_t>(hex(in_[pos_++]));
        ++digits;
      }
      if (pos_ == in_.size()) return Result::incomplete;
      if (digits == 0) return Result::invalid;
      if (Result r = extensions(); r != Result::complete) return r;
      if (Result r = crlf(); r != Result::complete) return r;
      if (size == 0) return trailers();
      if (in_.size() - pos_ < size) return Result::incomplete;
      body_.append(in_.substr(pos_, size));
      pos_ += size;
      if (Result r = crlf(); r != Result::complete) return r;
    }
  }
  const std::string& body() const { return body_; }
  std::size_t consumed() const { return pos_; }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static bool tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
  }
  bool at_end() const { return pos_ == in_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(in_[pos_]); }
  void ows() {
    while (!at_end() && (peek() == ' ' || peek() == '\t')) ++pos_;
  }
  Result token() {
    std::size_t start = pos_;
    while (!at_end() && peek() != 0 && tchar(peek())) ++pos_;
    if (at_end()) return Result::incomplete;
    return pos_ > start ? Result::complete : Result::invalid;
  }
  // chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ), taken
  // here as any bytes up to the line's CR: extensions carry no meaning for goro, llhttp
  // 8 takes some the grammar does not (an empty name, a quote inside a token), and
  // what matters for framing is only that the line cannot end anywhere else.
  Result extensions() {
    std::size_t before = pos_;  // BWS belongs to an extension, not to the line
    ows();
    if (at_end()) return Result::incomplete;
    if (peek() != ';') {
      pos_ = before;
      return Result::complete;
    }
    while (!at_end() && peek() != '\r') {
      if (peek() == '\n') return Result::invalid;
      ++pos_;
    }
    return at_end() ? Result::incomplete : Result::complete;
  }
  Result crlf() {
    if (at_end()) return Result::incomplete;
    if (peek() != '\r') return Result::invalid;
    ++pos_;
    if (at_end()) return Result::incomplete;
    if (peek() != '\n') return Result::invalid;
    ++pos_;
    return Result::complete;
  }
  // trailer-section = *( field-line CRLF ) CRLF
  Result trailers() {
    for (;;) {
      if (at_end()) return Result::incomplete;
      if (peek() == '\r') return crlf();
      if (Result r = token(); r != Result::complete) return r;
      if (peek() != ':') return Result::invalid;
      ++pos_;
      for (;;) {
        if (at_end()) return Result::incomplete;
        unsigned char c = peek();
        if (c == '\r') break;
        if (c != '\t' && (c < 0x20 || c == 0x7f)) return Result::invalid;
        ++pos_;
      }
      if (Result r = crlf(); r != Result::complete) return r;
    }
  }

  std::string_view in_;
  std::size_t pos_ = 0;
  std::string body_;
};

}  // namespace

std::string http_chunked(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  input.remove_prefix(1);
  Decoded split = decode(input, read_steps(settings), (settings >> 4) + 1u);
  Decoded whole = decode(input, read_steps(0), 16);
  if (split.status != whole.status || split.error_status != whole.error_status)
    return std::string("in pieces: ") + status_name(split.status) +
           ", in one piece: " + status_name(whole.status);
  // After an error, how much was decoded before it depends on the pieces.
  if (whole.status != ParseStatus::error &&
      (split.body != whole.body || split.consumed != whole.consumed))
    return "other body or end in pieces than in one piece";
  Rfc9112Chunked rfc(input);
  Rfc9112Chunked::Result expected = rfc.run();
  if (whole.status == ParseStatus::complete) {
    if (expected != Rfc9112Chunked::Result::complete)
      return "a body RFC 9112 does not accept was decoded";
    if (whole.body != rfc.body()) return "decoded data differs from RFC 9112's";
    if (whole.consumed != rfc.consumed()) return "the body ends elsewhere than RFC 9112 says";
  } else if (whole.status == ParseStatus::need_more) {
    if (expected == Rfc9112Chunked::Result::invalid)
      return "framing RFC 9112 refuses is waiting for more input instead of failing";
    if (expected == Rfc9112Chunked::Result::complete) return "a complete body was not seen to end";
  }
  return {};
}

}  // namespace goro::fuzz
