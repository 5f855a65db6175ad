// goro::grpc::Metadata — the custom key/value pairs of a call (headers and trailers).
//
// Keys are lower-case ASCII. A key ending in "-bin" holds bytes: the API carries them
// raw and the wire base64 (sent unpadded, accepted padded or not); every other value is
// printable ASCII. Keys that begin with "grpc-" are reserved for the protocol, and the
// HTTP/2 fields the protocol uses (content-type, te, user-agent, ...) are not metadata.
#pragma once

#include <goro/http/headers.hpp>

namespace goro::grpc {

using Metadata = http::Headers;

}  // namespace goro::grpc
