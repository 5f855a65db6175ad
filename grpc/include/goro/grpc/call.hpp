// What the server and the client share about a call: its kind and name, and the
// options every call honours.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace goro::grpc {

enum class CallKind {
  unary,             // one request, one response
  server_streaming,  // one request, a stream of responses
  client_streaming,  // a stream of requests, one response
  bidi_streaming,    // both streams, independent of each other
};

// Which method a call is for: what interceptors see.
struct MethodInfo {
  std::string_view full_name;  // "/helloworld.Greeter/SayHello"
  CallKind kind = CallKind::unary;
};

// Message compression of the gRPC protocol (grpc-encoding). Only gzip is built in.
enum class Compression { identity, gzip };

inline constexpr std::size_t kDefaultMaxReceiveMessageSize = 4u << 20;  // as grpc-go
inline constexpr std::size_t kDefaultMaxSendMessageSize = 0x7fffffff;

}  // namespace goro::grpc
