// The gRPC wire format that client and server share (internal to goro::grpc): message
// framing and its decoder, grpc-timeout, the percent-encoding of grpc-message, base64
// of -bin metadata, gzip message compression, and the status a non-gRPC HTTP answer
// maps to. PROTOCOL-HTTP2.md (grpc/grpc, doc/) is the specification followed here.
//
// None of these allocate beyond the string they return or fill, and none keeps state
// between calls except MessageDecoder.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <goro/grpc/call.hpp>
#include <goro/grpc/status.hpp>

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace goro::grpc::wire {

// A length-prefixed message: one byte of flags (0: as is, 1: compressed with the call's
// grpc-encoding), then the payload's length, 4 bytes big-endian, then the payload.
inline constexpr std::size_t kMessageHeaderSize = 5;

// Writes the 5-byte prefix of a message of `length` bytes at out.
inline void write_message_header(char* out, bool compressed, std::uint32_t length) noexcept {
  out[0] = compressed ? 1 : 0;
  out[1] = static_cast<char>(length >> 24);
  out[2] = static_cast<char>(length >> 16);
  out[3] = static_cast<char>(length >> 8);
  out[4] = static_cast<char>(length);
}

// Splits a byte stream (the DATA of one direction of a call) into messages. Bytes are
// appended as they arrive; next() yields each complete message in turn. The payload of
// a message is checked against max_message_size from its prefix alone, before its bytes
// are buffered, so an oversized message costs no memory.
class MessageDecoder {
 public:
  enum class Result {
    message,    // out holds the next message
    need_more,  // the buffered bytes hold no complete message
    error,      // the stream is malformed; error() says how; every later call repeats it
  };
  struct Message {
    bool compressed = false;
    // Points into the decoder; valid until the next call to append, next or reset.
    std::string_view payload{};
  };

  explicit MessageDecoder(std::size_t max_message_size = kDefaultMaxReceiveMessageSize)
      : max_(max_message_size) {}

  // Adds received bytes.
  void append(std::string_view bytes);
  // A buffer of at least n bytes at the end of the unread bytes, for the caller to read
  // into (then commit(k) the k bytes read): saves a copy.
  char* prepare(std::size_t n);
  void commit(std::size_t n) noexcept { end_ += n; }
  // The next complete message, or need_more, or error: a flag other than 0 or 1
  // (INTERNAL), a length above max_message_size (RESOURCE_EXHAUSTED).
  Result next(Message& out);
  // At the end of the stream: the status when bytes of an unfinished message remain
  // (INTERNAL, truncated), else OK.
  Status finish() const;
  const Status& error() const noexcept { return error_; }
  // Bytes still missing to complete the next message (or its prefix), as far as the
  // buffered bytes tell.
  std::size_t wanted() const noexcept;
  // Bytes buffered and not yet returned as a message.
  std::size_t buffered() const noexcept { return end_ - begin_; }
  std::size_t max_message_size() const noexcept { return max_; }

 private:
  std::string buf_;
  std::size_t begin_ = 0;  // first unread byte
  std::size_t end_ = 0;    // bytes of buf_ in use
  std::size_t max_;
  Status error_;
};

// Parses a received message into msg, decompressing it first as grpc_encoding (the
// sender's grpc-encoding header, "" when absent) says: OK, or the status the call ends
// with: INTERNAL for a compressed message without grpc-encoding (or with "identity"),
// UNIMPLEMENTED for an encoding this library lacks, RESOURCE_EXHAUSTED when it inflates
// past max_message_size, INTERNAL for a corrupt gzip stream or bytes protobuf cannot
// parse. scratch holds the inflated bytes (reused between messages).
Status parse_message(const MessageDecoder::Message& message, std::string_view grpc_encoding,
                     std::size_t max_message_size, std::string& scratch,
                     google::protobuf::MessageLite& msg);

// The algorithm named by a grpc-encoding value ("identity", "gzip"), nullopt for others.
std::optional<Compression> parse_encoding(std::string_view name) noexcept;
// "identity" or "gzip".
std::string_view encoding_name(Compression algorithm) noexcept;
// Whether a grpc-accept-encoding list ("gzip,deflate") names the algorithm.
bool accepts_encoding(std::string_view accept_list, Compression algorithm) noexcept;
// What this library accepts, for grpc-accept-encoding.
inline constexpr std::string_view kAcceptEncoding = "identity,gzip";

// Appends the gzip stream of in to out.
void compress(Compression algorithm, std::string_view in, std::string& out);
// Replaces out with the decompressed in. Fails with RESOURCE_EXHAUSTED when the result
// would exceed max_size (checked while inflating: a small bomb stops at the limit) and
// INTERNAL when in is not a valid stream.
Status decompress(Compression algorithm, std::string_view in, std::string& out,
                  std::size_t max_size);

// grpc-timeout: 1 to 8 ASCII digits and a unit (H M S m u n). nullopt when malformed.
std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view value) noexcept;
// The shortest exact-or-rounded-up form with at most 8 digits (a timeout is never sent
// shorter than asked); a negative or zero timeout is sent as "0n"... "1n".
std::string format_timeout(std::chrono::nanoseconds timeout);

// grpc-message: bytes outside 0x20..0x7e and '%' become %XX.
std::string percent_encode(std::string_view message);
// Decodes %XX; a '%' not followed by two hex digits is kept as is (the spec asks
// receivers to be lenient).
std::string percent_decode(std::string_view encoded);

// Base64 (standard alphabet); padded when pad.
std::string base64_encode(std::string_view bytes, bool pad = false);
// Accepts padded and unpadded input; nullopt when malformed.
std::optional<std::string> base64_decode(std::string_view text);

// Whether a metadata key names binary values ("-bin" suffix).
inline bool is_binary_key(std::string_view key) noexcept {
  return key.size() > 4 && key.substr(key.size() - 4) == "-bin";
}
// Header fields that are the protocol's, not metadata: pseudo-headers, grpc-*,
// content-type, te, user-agent, content-length, host and HTTP/1.1 connection fields.
bool is_reserved_header(std::string_view name) noexcept;

// grpc-status's value: a decimal code (any value 0..2^31; unknown numbers are kept).
std::optional<StatusCode> parse_status_code(std::string_view value) noexcept;

// The status a client reports for an HTTP answer without grpc-status (the table of
// http-grpc-status-mapping.md): 400 INTERNAL, 401 UNAUTHENTICATED, 403
// PERMISSION_DENIED, 404 UNIMPLEMENTED, 429/502/503/504 UNAVAILABLE, others UNKNOWN.
StatusCode status_from_http(int http_status) noexcept;

// Whether a content-type is gRPC's: application/grpc, alone or followed by '+' or ';'.
bool is_grpc_content_type(std::string_view content_type) noexcept;

}  // namespace goro::grpc::wire
