// The opening handshake's pieces that tests check on their own (RFC 6455 4).
#pragma once

#include <string>
#include <string_view>

namespace goro::http::websocket::detail {

// Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + the RFC's GUID)).
std::string accept_key(std::string_view key);

// Whether a Sec-WebSocket-Key is 16 bytes in base64 (24 characters ending in "==").
bool valid_key(std::string_view key) noexcept;

// Whether a request's Origin (absent, or "scheme://host[:port]") names the same
// host[:port] as its Host header, default ports aside.
bool same_origin(std::string_view origin, std::string_view host) noexcept;

}  // namespace goro::http::websocket::detail
