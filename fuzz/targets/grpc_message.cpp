// grpc_message: a call's stream of gRPC messages as the server receives it — the framing
// decoder (grpc/src/wire), decompression and protobuf parsing — over arbitrary bytes.
//
// Settings byte: bits 0-1 pick the sender's grpc-encoding ("", "identity", "gzip", or
// "snappy", which goro lacks); bit 2 a small message limit (256 bytes) instead of 64 KiB;
// the byte as a whole picks the read sizes (read_steps). The rest is the body of the
// request: length-prefixed messages, each parsed as a google.protobuf.Struct (nested
// maps and lists: a parser with depth).
//
// Properties: no message longer than the limit reaches the parser, compressed or not;
// every failure is one of the statuses the protocol names for it (INTERNAL for bad flags,
// truncation, compression without an encoding, corrupt gzip or protobuf;
// RESOURCE_EXHAUSTED past the limit; UNIMPLEMENTED for an unknown encoding); the decoder
// stays failed once failed; the outcome is the same whether the bytes arrive whole or in
// pieces. Each step consumes input, so there is no hang.
#include <google/protobuf/struct.pb.h>

#include <string>

#include "harness.hpp"
#include "wire/wire.hpp"

namespace goro::fuzz {
namespace {

using grpc::Status;
using grpc::StatusCode;
using grpc::wire::MessageDecoder;

struct Outcome {
  std::string log;      // one line per message and the final status
  std::string failure;  // a broken property
};

bool expected_code(StatusCode code) {
  return code == StatusCode::internal || code == StatusCode::resource_exhausted ||
         code == StatusCode::unimplemented;
}

Outcome receive(std::string_view body, const std::vector<std::size_t>& steps,
                std::string_view encoding, std::size_t max) {
  Outcome out;
  MessageDecoder decoder(max);
  std::string scratch;
  std::size_t at = 0, step = 0;
  Status status;
  for (;;) {
    MessageDecoder::Message m;
    const MessageDecoder::Result r = decoder.next(m);
    if (r == MessageDecoder::Result::error) {
      status = decoder.error();
      MessageDecoder::Message again;
      if (decoder.next(again) != MessageDecoder::Result::error)
        out.failure = "the decoder recovered from an error";
      break;
    }
    if (r == MessageDecoder::Result::message) {
      if (m.payload.size() > max) {
        out.failure = "a message longer than the limit got through the decoder";
        return out;
      }
      google::protobuf::Struct msg;
      status = grpc::wire::parse_message(m, encoding, max, scratch, msg);
      if (!status.ok()) break;
      if (m.compressed && scratch.size() > max) {
        out.failure = "a message inflated past the limit";
        return out;
      }
      if (m.compressed && (encoding.empty() || encoding == "identity")) {
        out.failure = "a compressed message without grpc-encoding was accepted";
        return out;
      }
      out.log += "message " + std::to_string(m.payload.size()) + " " +
                 std::to_string(msg.fields_size()) + "\n";
      continue;
    }
    if (at == body.size()) {
      status = decoder.finish();
      break;
    }
    const std::size_t n =
        std::min(body.size() - at, std::max<std::size_t>(1, steps[step++ % steps.size()]));
    decoder.append(body.substr(at, n));
    at += n;
  }
  if (!status.ok() && !expected_code(status.code()))
    out.failure = "unexpected status " + status.to_string();
  out.log += std::string(grpc::status_code_name(status.code())) + "\n";
  return out;
}

}  // namespace

std::string grpc_message(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  const std::string_view body = input.substr(1);
  static constexpr std::string_view kEncodings[] = {"", "identity", "gzip", "snappy"};
  const std::string_view encoding = kEncodings[settings & 3];
  const std::size_t max = (settings & 4) ? 256 : 64 * 1024;
  const Outcome whole = receive(body, {body.size() + 1}, encoding, max);
  if (!whole.failure.empty()) return whole.failure;
  const Outcome pieces = receive(body, read_steps(settings), encoding, max);
  if (!pieces.failure.empty()) return pieces.failure;
  if (whole.log != pieces.log)
    return "different outcomes whole and in pieces:\n" + whole.log + "vs\n" + pieces.log;
  return {};
}

}  // namespace goro::fuzz
