// The HTTP/1.1 engine (h1/conn.cpp): frames a connection's bytes into requests and
// responses, and hands each request to the runner (core/exchange.hpp).
#pragma once

#include <string_view>

#include "core/conn.hpp"

namespace goro::http::detail::h1 {

// Serves self as HTTP/1.1 from its first bytes (early: read already while the protocol
// was chosen) until it ends, or parks it idle (self is then left empty).
void serve(ConnRef& self, std::string_view early);

}  // namespace goro::http::detail::h1
