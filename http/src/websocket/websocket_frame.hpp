// The WebSocket frame codec (RFC 6455 section 5): pure functions and a decoder over
// bytes, with no I/O and no allocation, so that the receiving side can be tested on
// buffers split at every position and fuzzed. The connection
// (websocket_connection.cpp) reads from its stream into a buffer and hands the bytes to a
// FrameDecoder; what to do with a ping, a close or a violation is the connection's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace goro::http::websocket::detail {

namespace opcode {
inline constexpr std::uint8_t continuation = 0x0;
inline constexpr std::uint8_t text = 0x1;
inline constexpr std::uint8_t binary = 0x2;
inline constexpr std::uint8_t close = 0x8;
inline constexpr std::uint8_t ping = 0x9;
inline constexpr std::uint8_t pong = 0xA;
}  // namespace opcode

// Control frames carry at most this many payload bytes (RFC 6455 5.5).
inline constexpr std::size_t kMaxControlPayload = 125;
// The largest frame header: 2 bytes, an 8-byte length, a 4-byte mask.
inline constexpr std::size_t kMaxHeaderSize = 14;

using MaskKey = std::array<unsigned char, 4>;

struct FrameHeader {
  bool fin = false;
  bool rsv1 = false, rsv2 = false, rsv3 = false;
  std::uint8_t opcode = 0;
  bool masked = false;
  MaskKey mask{};
  std::uint64_t length = 0;  // payload bytes
  std::size_t size = 0;      // bytes of the header itself
};

enum class HeaderParse { need_more, ok, bad_length };

// Decodes the frame header at the start of bytes. need_more: bytes hold only part of it;
// bad_length: a 64-bit length with its top bit set (RFC 6455 5.2).
HeaderParse parse_frame_header(std::string_view bytes, FrameHeader& out) noexcept;

// Writes a frame header into out (at least kMaxHeaderSize bytes) and returns its size.
// mask == nullptr: unmasked (a server's frames).
std::size_t encode_frame_header(char* out, bool fin, bool rsv1, std::uint8_t opcode,
                                std::uint64_t length, const MaskKey* mask) noexcept;

// XORs n payload bytes with mask; offset is the position of data[0] in the payload.
void apply_mask(char* data, std::size_t n, const MaskKey& mask, std::uint64_t offset) noexcept;

// Incremental UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF) of text that arrives in pieces split anywhere.
class Utf8Validator {
 public:
  // Feeds the next bytes; false as soon as they cannot be part of valid UTF-8 (and from
  // then on until reset()).
  bool feed(std::string_view bytes) noexcept;
  // Whether the bytes so far end between two characters.
  bool complete() const noexcept { return need_ == 0 && !failed_; }
  void reset() noexcept { *this = Utf8Validator(); }

 private:
  std::uint8_t need_ = 0;                  // continuation bytes still expected
  std::uint8_t low_ = 0x80, high_ = 0xBF;  // range of the next continuation byte
  bool failed_ = false;
};

inline bool valid_utf8(std::string_view s) noexcept {
  Utf8Validator v;
  return v.feed(s) && v.complete();
}

// Whether code may be sent in a close frame (RFC 6455 7.4: 1000-1003, 1007-1014, the
// registered codes, and 3000-4999).
bool sendable_close_code(std::uint16_t code) noexcept;

// Why a frame (or the bytes so far) must end the connection: the close code to send
// and a short reason. code == 0: nothing wrong.
struct Violation {
  std::uint16_t code = 0;
  const char* reason = "";
  explicit operator bool() const noexcept { return code != 0; }
};

// The receiving side of a connection, over the bytes it reads. Payloads are unmasked in
// place, in the caller's buffer. Checks everything RFC 6455 asks of a receiver: reserved
// bits, opcodes, control frame rules, masking by role, fragmentation order, close
// payloads, UTF-8 of uncompressed text, and the message size limit.
// The most a compressed message of at most limit bytes can take on the wire: deflate
// stores what it cannot shrink, at 5 bytes of framing per 16 KiB stored block and a few
// more per message (zlib's deflateBound, raw). Saturates.
inline std::uint64_t compressed_limit(std::uint64_t limit) noexcept {
  const std::uint64_t slack = (limit >> 12) + (limit >> 14) + (limit >> 25) + 16;
  return limit > UINT64_MAX - slack ? UINT64_MAX : limit + slack;
}

class FrameDecoder {
 public:
  struct Rules {
    bool server = true;    // frames come from a client: they must be masked
    bool deflate = false;  // permessage-deflate agreed: RSV1 marks a compressed message
    // Message bytes. A compressed message's frames may carry a little more (deflate's
    // worst case for incompressible data, compressed_limit); its decompressed size is held
    // to this by the inflater.
    std::uint64_t max_message_size = 1 << 20;
  };

  enum class Kind {
    need_more,    // consumed what it could; read more (bytes may have been consumed)
    payload,      // bytes of the current data message: `payload`
    message_end,  // the current data message is complete
    ping,         // a ping: `payload` (answer with a pong of the same payload)
    pong,         // a pong: `payload`
    close,        // the peer's close: close_code (1005 when it sent none), close_reason
    violation,    // the connection must be failed: `violation` (again on every later call)
  };

  struct Event {
    Kind kind = Kind::need_more;
    std::string_view payload;
    std::uint16_t close_code = 0;
    std::string_view close_reason;
    Violation violation;
  };

  explicit FrameDecoder(Rules rules) noexcept : rules_(rules) {}

  // The next event in bytes[0, n). consumed: how many bytes it used; those of a payload,
  // ping, pong or close event are the end of them (views into bytes). A control frame is
  // taken only whole (it waits for its header and payload, at most 139 bytes).
  Event next(char* bytes, std::size_t n, std::size_t& consumed) noexcept;

  // Payload bytes of the current data frame not yet seen (0 between frames): a caller
  // may read that many straight into its message buffer and pass them to
  // take_payload() instead of next().
  std::uint64_t payload_left() const noexcept { return in_payload_ ? frame_left_ : 0; }
  // Unmasks and checks n (<= payload_left()) bytes of the current frame's payload that
  // the caller read itself: a payload event for them, or a violation.
  Event take_payload(char* bytes, std::size_t n) noexcept;

  // The type of the message in progress (or last ended), and whether it is compressed.
  std::uint8_t message_opcode() const noexcept { return message_opcode_; }
  bool message_compressed() const noexcept { return compressed_; }
  // Whether a data message has begun and not ended (or a frame's payload is part way).
  bool in_message() const noexcept { return in_message_ || in_payload_; }

 private:
  Event fail(std::uint16_t code, const char* reason) noexcept;
  Violation check_header(const FrameHeader& h) const noexcept;
  Event payload_event(char* bytes, std::size_t n) noexcept;
  Event control_event(char* payload) noexcept;

  // (The small fields together: a decoder lives in every WebSocket, idle ones included.)
  Rules rules_;
  Violation failed_;
  FrameHeader frame_;
  std::uint64_t frame_left_ = 0;
  std::uint64_t frame_offset_ = 0;  // payload bytes of the frame already seen (for the mask)
  std::uint64_t message_size_ = 0;
  bool in_payload_ = false;  // inside a data frame's payload
  bool in_message_ = false;  // a data message has started and not ended
  std::uint8_t message_opcode_ = 0;
  bool compressed_ = false;
  Utf8Validator utf8_;
};

}  // namespace goro::http::websocket::detail
