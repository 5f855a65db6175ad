// websocket_frame: the WebSocket frame decoder (http/src/websocket_frame.hpp) over
// arbitrary bytes, fed as a connection feeds it.
//
// Settings byte: bit 0 set, the bytes come from a client (frames must be masked), else
// from a server; bit 1, permessage-deflate was agreed (RSV1 allowed); the byte as a
// whole picks the read sizes (read_steps). The rest of the input is the byte stream.
//
// Properties: the decoder never consumes more than it is given; when it asks for more
// input, what it left unconsumed is at most a header and a control frame (so the
// connection's 4 KiB buffer always has room for what it waits for); payloads read
// straight into the message (take_payload) give what next() would; the events are the
// same whether the stream arrives whole or in pieces; a message is never longer than
// the limit; an uncompressed text message that ends is valid UTF-8; a compressed one
// inflates within the limit or is refused.
#include <cstring>
#include <string>

#include "harness.hpp"
#include "websocket/websocket_deflate.hpp"
#include "websocket/websocket_frame.hpp"

namespace goro::fuzz {
namespace {

using http::websocket::detail::FrameDecoder;
using Kind = FrameDecoder::Kind;

constexpr std::size_t kBuffer = 4096;
constexpr std::size_t kDirectRead = 1024;
constexpr std::uint64_t kMaxMessage = 64 * 1024;

struct Outcome {
  std::string log;  // the events, in order
  std::string failure;
};

// Decodes stream in reads of the given sizes through a buffer of kBuffer bytes, as
// websocket_connection.cpp does; direct: take long payloads past the buffer.
Outcome decode(std::string_view stream, const std::vector<std::size_t>& steps, bool server,
               bool deflate, bool direct) {
  FrameDecoder decoder({.server = server, .deflate = deflate, .max_message_size = kMaxMessage});
  http::websocket::detail::Inflater inflater(15, false);
  Outcome out;
  char buffer[kBuffer];
  std::size_t begin = 0, end = 0, step = 0;
  std::string message;
  auto next_read = [&](std::size_t room) {
    return std::min({room, stream.size(), std::max<std::size_t>(1, steps[step++ % steps.size()])});
  };
  for (;;) {
    std::size_t used = 0;
    FrameDecoder::Event e = decoder.next(buffer + begin, end - begin, used);
    if (used > end - begin) {
      out.failure = "next() consumed more than it was given";
      return out;
    }
    begin += used;
    switch (e.kind) {
      case Kind::payload:
        message.append(e.payload);
        if (message.size() > kMaxMessage) out.failure = "a message past the limit";
        continue;
      case Kind::message_end: {
        const bool text = decoder.message_opcode() == http::websocket::detail::opcode::text;
        if (decoder.message_compressed()) {
          std::string inflated;
          auto r = inflater.decompress(message, kMaxMessage, inflated);
          if (inflated.size() > kMaxMessage + 1) out.failure = "inflate wrote past the limit";
          out.log += r == decltype(r)::ok ? "deflated:" + std::to_string(inflated.size()) + "|"
                                          : "bad-deflate|";
          if (r != decltype(r)::ok) return out;
        } else {
          if (text && !http::websocket::detail::valid_utf8(message))
            out.failure = "a text message that is not UTF-8 was accepted";
          out.log += (text ? "text:" : "binary:") + message + "|";
        }
        message.clear();
        if (!out.failure.empty()) return out;
        continue;
      }
      case Kind::ping: out.log += "ping:" + std::string(e.payload) + "|"; continue;
      case Kind::pong: out.log += "pong:" + std::string(e.payload) + "|"; continue;
      case Kind::close:
        out.log += "close:" + std::to_string(e.close_code) + "|";
        return out;  // a connection reads nothing after the close
      case Kind::violation:
        out.log += "violation:" + std::to_string(e.violation.code) + "|";
        return out;
      case Kind::need_more: break;
    }
    if (end - begin > http::websocket::detail::kMaxHeaderSize +
                          http::websocket::detail::kMaxControlPayload) {
      out.failure = "asked for more input with " + std::to_string(end - begin) + " bytes unused";
      return out;
    }
    if (stream.empty()) return out;
    const std::uint64_t left = decoder.payload_left();
    if (direct && begin == end && left >= kDirectRead) {
      std::string piece(stream.substr(0, next_read(static_cast<std::size_t>(
                                             std::min<std::uint64_t>(left, 64 * 1024)))));
      stream.remove_prefix(piece.size());
      FrameDecoder::Event p = decoder.take_payload(piece.data(), piece.size());
      if (p.kind == Kind::violation) {
        out.log += "violation:" + std::to_string(p.violation.code) + "|";
        return out;
      }
      message.append(piece);
      if (message.size() > kMaxMessage) out.failure = "a message past the limit";
      continue;
    }
    std::memmove(buffer, buffer + begin, end - begin);
    end -= begin;
    begin = 0;
    const std::size_t n = next_read(kBuffer - end);
    std::memcpy(buffer + end, stream.data(), n);
    stream.remove_prefix(n);
    end += n;
  }
}

}  // namespace

std::string websocket_frame(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  const std::string_view stream = input.substr(1);
  const bool server = (settings & 1) != 0;
  const bool deflate = (settings & 2) != 0;
  const Outcome whole = decode(stream, {stream.size()}, server, deflate, false);
  if (!whole.failure.empty()) return "whole: " + whole.failure;
  const Outcome pieces = decode(stream, read_steps(settings), server, deflate, true);
  if (!pieces.failure.empty()) return "in pieces: " + pieces.failure;
  if (pieces.log != whole.log) return "the events depend on how the input is split";
  return {};
}

}  // namespace goro::fuzz
