#include "websocket_frame.hpp"

#include <algorithm>
#include <cstring>

namespace goro::http::websocket::detail {

HeaderParse parse_frame_header(std::string_view bytes, FrameHeader& out) noexcept {
  if (bytes.size() < 2) return HeaderParse::need_more;
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  FrameHeader h;
  h.fin = (b[0] & 0x80) != 0;
  h.rsv1 = (b[0] & 0x40) != 0;
  h.rsv2 = (b[0] & 0x20) != 0;
  h.rsv3 = (b[0] & 0x10) != 0;
  h.opcode = b[0] & 0x0F;
  h.masked = (b[1] & 0x80) != 0;
  const unsigned length7 = b[1] & 0x7F;
  std::size_t size = 2;
  if (length7 == 126) {
    size += 2;
  } else if (length7 == 127) {
    size += 8;
  }
  if (h.masked) size += 4;
  if (bytes.size() < size) return HeaderParse::need_more;
  if (length7 == 126) {
    h.length = (std::uint64_t{b[2]} << 8) | b[3];
  } else if (length7 == 127) {
    if (b[2] & 0x80) return HeaderParse::bad_length;
    for (int i = 0; i < 8; ++i) h.length = (h.length << 8) | b[2 + i];
  } else {
    h.length = length7;
  }
  if (h.masked) std::memcpy(h.mask.data(), b + size - 4, 4);
  h.size = size;
  out = h;
  return HeaderParse::ok;
}

std::size_t encode_frame_header(char* out, bool fin, bool rsv1, std::uint8_t op,
                                std::uint64_t length, const MaskKey* mask) noexcept {
  auto* b = reinterpret_cast<unsigned char*>(out);
  b[0] = static_cast<unsigned char>((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (op & 0x0F));
  const unsigned char mask_bit = mask != nullptr ? 0x80 : 0;
  std::size_t size = 2;
  if (length < 126) {
    b[1] = static_cast<unsigned char>(mask_bit | length);
  } else if (length <= 0xFFFF) {
    b[1] = mask_bit | 126;
    b[2] = static_cast<unsigned char>(length >> 8);
    b[3] = static_cast<unsigned char>(length);
    size = 4;
  } else {
    b[1] = mask_bit | 127;
    for (int i = 0; i < 8; ++i) b[2 + i] = static_cast<unsigned char>(length >> (56 - 8 * i));
    size = 10;
  }
  if (mask != nullptr) {
    std::memcpy(b + size, mask->data(), 4);
    size += 4;
  }
  return size;
}

void apply_mask(char* data, std::size_t n, const MaskKey& mask, std::uint64_t offset) noexcept {
  std::size_t i = 0;
  // Eight bytes at a time with the key repeated (and rotated to the payload position);
  // memcpy keeps the loads and stores free of alignment and aliasing assumptions.
  if (n >= 16) {
    unsigned char key8[8];
    for (int k = 0; k < 8; ++k) key8[k] = mask[(offset + k) & 3];
    std::uint64_t key;
    std::memcpy(&key, key8, 8);
    for (; i + 8 <= n; i += 8) {
      std::uint64_t word;
      std::memcpy(&word, data + i, 8);
      word ^= key;
      std::memcpy(data + i, &word, 8);
    }
  }
  for (; i < n; ++i) data[i] = static_cast<char>(data[i] ^ mask[(offset + i) & 3]);
}

bool Utf8Validator::feed(std::string_view bytes) noexcept {
  if (failed_) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = p + bytes.size();
  while (p < end) {
    if (need_ == 0) {
      // ASCII runs eight bytes at a time.
      while (end - p >= 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        if (word & 0x8080808080808080ull) break;
        p += 8;
      }
      if (p == end) break;
      const unsigned char c = *p++;
      if (c < 0x80) continue;
      if (c >= 0xC2 && c <= 0xDF) {
        need_ = 1;
      } else if (c >= 0xE0 && c <= 0xEF) {
        need_ = 2;
        if (c == 0xE0) low_ = 0xA0;   // overlong
        if (c == 0xED) high_ = 0x9F;  // surrogates
      } else if (c >= 0xF0 && c <= 0xF4) {
        need_ = 3;
        if (c == 0xF0) low_ = 0x90;   // overlong
        if (c == 0xF4) high_ = 0x8F;  // past U+10FFFF
      } else {
        failed_ = true;
        return false;
      }
      continue;
    }
    const unsigned char c = *p++;
    if (c < low_ || c > high_) {
      failed_ = true;
      return false;
    }
    low_ = 0x80;
    high_ = 0xBF;
    --need_;
  }
  return true;
}

bool sendable_close_code(std::uint16_t code) noexcept {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

FrameDecoder::Event FrameDecoder::fail(std::uint16_t code, const char* reason) noexcept {
  failed_ = {code, reason};
  Event e;
  e.kind = Kind::violation;
  e.violation = failed_;
  return e;
}

Violation FrameDecoder::check_header(const FrameHeader& h) const noexcept {
  const bool control = (h.opcode & 0x8) != 0;
  if (h.rsv2 || h.rsv3) return {1002, "reserved bits RSV2/RSV3 set"};
  if (h.rsv1 && (!rules_.deflate || control || h.opcode == opcode::continuation))
    return {1002, "reserved bit RSV1 set outside the first frame of a compressed message"};
  if (h.opcode != opcode::continuation && h.opcode != opcode::text && h.opcode != opcode::binary &&
      h.opcode != opcode::close && h.opcode != opcode::ping && h.opcode != opcode::pong)
    return {1002, "unknown opcode"};
  if (rules_.server && !h.masked) return {1002, "a client frame is not masked"};
  if (!rules_.server && h.masked) return {1002, "a server frame is masked"};
  if (control) {
    if (!h.fin) return {1002, "a fragmented control frame"};
    if (h.length > kMaxControlPayload) return {1002, "a control frame longer than 125 bytes"};
    return {};
  }
  if (h.opcode == opcode::continuation && !in_message_)
    return {1002, "a continuation frame outside a message"};
  if (h.opcode != opcode::continuation && in_message_)
    return {1002, "a new message before the previous one ended"};
  return {};
}

FrameDecoder::Event FrameDecoder::payload_event(char* bytes, std::size_t n) noexcept {
  if (frame_.masked) apply_mask(bytes, n, frame_.mask, frame_offset_);
  frame_offset_ += n;
  frame_left_ -= n;
  if (message_opcode_ == opcode::text && !compressed_ && !utf8_.feed({bytes, n}))
    return fail(1007, "a text message that is not valid UTF-8");
  Event e;
  e.kind = Kind::payload;
  e.payload = {bytes, n};
  return e;
}

FrameDecoder::Event FrameDecoder::control_event(char* payload) noexcept {
  const std::size_t n = static_cast<std::size_t>(frame_.length);
  if (frame_.masked) apply_mask(payload, n, frame_.mask, 0);
  Event e;
  e.payload = {payload, n};
  if (frame_.opcode == opcode::ping) {
    e.kind = Kind::ping;
    return e;
  }
  if (frame_.opcode == opcode::pong) {
    e.kind = Kind::pong;
    return e;
  }
  e.kind = Kind::close;
  if (n == 0) {
    e.close_code = 1005;
    return e;
  }
  if (n == 1) return fail(1002, "a close frame with a 1-byte payload");
  const auto* b = reinterpret_cast<const unsigned char*>(payload);
  e.close_code = static_cast<std::uint16_t>((b[0] << 8) | b[1]);
  if (!sendable_close_code(e.close_code)) return fail(1002, "an invalid close code");
  e.close_reason = {payload + 2, n - 2};
  if (!valid_utf8(e.close_reason)) return fail(1007, "a close reason that is not valid UTF-8");
  return e;
}

FrameDecoder::Event FrameDecoder::next(char* bytes, std::size_t n, std::size_t& consumed) noexcept {
  consumed = 0;
  if (failed_) {
    Event e;
    e.kind = Kind::violation;
    e.violation = failed_;
    return e;
  }
  for (;;) {
    if (in_payload_) {
      if (frame_left_ == 0) {
        in_payload_ = false;
        if (!frame_.fin) continue;
        in_message_ = false;
        if (message_opcode_ == opcode::text && !compressed_ && !utf8_.complete())
          return fail(1007, "a text message that is not valid UTF-8");
        Event e;
        e.kind = Kind::message_end;
        return e;
      }
      if (consumed == n) return {};
      const std::size_t k =
          static_cast<std::size_t>(std::min<std::uint64_t>(n - consumed, frame_left_));
      char* at = bytes + consumed;
      consumed += k;
      return payload_event(at, k);
    }
    FrameHeader h;
    switch (parse_frame_header({bytes + consumed, n - consumed}, h)) {
      case HeaderParse::need_more: return {};
      case HeaderParse::bad_length: return fail(1002, "a frame length with its top bit set");
      case HeaderParse::ok: break;
    }
    if (Violation v = check_header(h)) return fail(v.code, v.reason);
    if (h.opcode & 0x8) {
      if (n - consumed < h.size + h.length) return {};
      char* payload = bytes + consumed + h.size;
      consumed += h.size + static_cast<std::size_t>(h.length);
      frame_ = h;
      return control_event(payload);
    }
    if (h.opcode != opcode::continuation) {
      in_message_ = true;
      message_opcode_ = h.opcode;
      compressed_ = h.rsv1;
      message_size_ = 0;
      utf8_.reset();
    }
    const std::uint64_t limit =
        compressed_ ? compressed_limit(rules_.max_message_size) : rules_.max_message_size;
    if (h.length > limit - message_size_) return fail(1009, "a message longer than the limit");
    message_size_ += h.length;
    frame_ = h;
    in_payload_ = true;
    frame_left_ = h.length;
    frame_offset_ = 0;
    consumed += h.size;
  }
}

FrameDecoder::Event FrameDecoder::take_payload(char* bytes, std::size_t n) noexcept {
  if (failed_) {
    Event e;
    e.kind = Kind::violation;
    e.violation = failed_;
    return e;
  }
  return payload_event(bytes, n);
}

}  // namespace goro::http::websocket::detail
