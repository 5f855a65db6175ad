// The plain-head reader: a request head that needs nothing of llhttp's, read in one
// pass (see MessageParser::parse_head).
#include <array>
#include <bit>
#include <cstring>
#include <string_view>

#include "bytes.hpp"
#include "message_parser.hpp"

namespace goro::http::detail {

namespace {

// What read_plain_head() takes, a subset of what llhttp takes: RFC 3986's characters of
// an origin-form path and query (unreserved, sub-delims, ':', '@', '%', '/', '?'); RFC
// 9110's tchars for a field name; visible ASCII, SP and HTAB in a field value.
constexpr std::array<bool, 256> kPlainTargetChars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("-._~!$&'()*+,;=:@%/?")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

constexpr std::array<bool, 256> kTokenChars = [] {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

constexpr std::array<bool, 256> kPlainValueChars = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x7f; ++c) t[c] = true;
  t['\t'] = true;
  return t;
}();

// Whether the 10 or more bytes at p start with "HTTP/1.".
bool version_prefix(const char* p) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    return (load64(p) & 0x00ffffffffffffffu) == load_tail("HTTP/1.", 7);
  } else {
    return std::memcmp(p, "HTTP/1.", 7) == 0;
  }
}

}  // namespace

// Reads a request head that is whole in the buffer and plain (see parse_head), leaving
// the parser as llhttp would have: true once it has (the head may still be refused by
// check_request_head: error_ says so). false for any other input, with nothing changed:
// llhttp reads it then.
bool MessageParser::read_plain_head() noexcept {
  const char* const b = buffer_.get();
  const char* p = b + parse_pos_;
  const char* const e = b + end_;
  auto fall_back = [this] {
    offsets_.clear();
    return false;
  };
  struct Method {
    std::string_view word;
    llhttp_method_t id;
  };
  static constexpr Method kMethods[] = {
      {"GET ", HTTP_GET},       {"POST ", HTTP_POST},   {"HEAD ", HTTP_HEAD},
      {"PUT ", HTTP_PUT},       {"DELETE ", HTTP_DELETE}, {"PATCH ", HTTP_PATCH},
      {"OPTIONS ", HTTP_OPTIONS}};
  const std::string_view input(p, static_cast<std::size_t>(e - p));
  const Method* method = nullptr;
  // Most requests are GETs: one word compare (a request line is longer than 8 bytes).
  if (std::endian::native == std::endian::little && e - p >= 8 &&
      (load64(p) & 0xffffffffu) == load_tail("GET ", 4)) {
    method = &kMethods[0];
  } else {
    for (const Method& m : kMethods) {
      if (input.starts_with(m.word)) {
        method = &m;
        break;
      }
    }
  }
  if (method == nullptr) return false;
  p += method->word.size();

  const char* const target = p;
  if (p == e || *p != '/') return false;
  p = skip_class(kPlainTargetChars, p, e);
  const auto target_size = static_cast<std::size_t>(p - target);
  if (p == e || *p != ' ' || target_size > limits_.max_request_line) return false;
  ++p;
  if (e - p < 10 || !version_prefix(p) || (p[7] != '0' && p[7] != '1') ||
      p[8] != '\r' || p[9] != '\n')
    return false;
  const int minor = p[7] - '0';
  p += 10;

  bool keep_alive = minor == 1;
  for (;;) {
    if (e - p < 2) return fall_back();
    if (p[0] == '\r') {
      if (p[1] != '\n') return fall_back();
      p += 2;
      break;
    }
    const char* const name = p;
    p = skip_class(kTokenChars, p, e);
    if (p == name || p == e || *p != ':') return fall_back();
    const std::string_view field(name, static_cast<std::size_t>(p - name));
    ++p;
    while (p != e && (*p == ' ' || *p == '\t')) ++p;
    const char* const value = p;
    p = skip_class(kPlainValueChars, p, e);
    if (e - p < 2 || p[0] != '\r' || p[1] != '\n') return fall_back();
    const std::string_view field_value(value, static_cast<std::size_t>(p - value));
    p += 2;
    // The fields llhttp reads itself, for the framing and the connection's fate: only a
    // lone keep-alive is taken here.
    switch (field.size()) {
      case 7:   // Upgrade
      case 14:  // Content-Length
      case 16:  // Proxy-Connection
      case 17:  // Transfer-Encoding
        if (iequals(field, "upgrade") || iequals(field, "content-length") ||
            iequals(field, "proxy-connection") || iequals(field, "transfer-encoding"))
          return fall_back();
        break;
      case 10:
        if (iequals(field, "connection")) {
          if (!iequals(trim_ows(field_value), "keep-alive")) return fall_back();
          keep_alive = true;
        }
        break;
      default: break;
    }
    FieldOffsets f;
    f.name_offset = offset_of(name);
    f.name_size = static_cast<std::uint32_t>(field.size());
    f.value_offset = offset_of(value);
    f.value_size = static_cast<std::uint32_t>(field_value.size());
    f.value_started = f.complete = true;
    offsets_.push_back(f);
  }
  // A connection that ends with this message, or a head past the limit (counted, as
  // header_bytes_exceeded counts, from the end of the target): llhttp's to refuse or to
  // end as it does.
  if (!keep_alive ||
      static_cast<std::size_t>(p - (target + target_size)) > limits_.max_header_bytes)
    return fall_back();

  head_started_ = true;
  url_offset_ = offset_of(target);
  url_size_ = target_size;
  url_end_ = url_offset_ + url_size_;
  url_complete_ = true;
  plain_head_ = true;
  plain_method_ = static_cast<std::uint8_t>(method->id);
  plain_minor_ = static_cast<std::uint8_t>(minor);
  in_head_ = false;
  if (check_request_head() != 0) return true;
  parse_pos_ = offset_of(p);
  content_length_ = 0;
  chunked_ = upgrade_ = false;
  keep_alive_ = true;
  message_complete_ = true;
  return true;
}

}  // namespace goro::http::detail
