// Cross-origin resource sharing (the Fetch standard's CORS protocol) as middleware.
//
//   Handler app = chain(api, {http::cors({.allowed_origins = {"https://app.example"},
//                                         .allowed_methods = {"GET", "PUT", "DELETE"},
//                                         .allowed_headers = {"Content-Type", "X-Token"},
//                                         .allow_credentials = true})});
//
// A request whose Origin is allowed gets Access-Control-Allow-Origin (and the other
// fields its options ask for); one from any other origin gets no CORS field at all, so
// the browser keeps the response from the page. A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) is answered 204 here, without running the handler.
// Every response gets "Vary: Origin", since what it holds depends on the Origin.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/middleware.hpp>

namespace goro::http {

struct CorsOptions {
  // Origins allowed, exactly as browsers send them ("https://a.example:8443"), compared
  // case-insensitively; "*" allows every origin. Empty (and no allow_origin): none.
  std::vector<std::string> allowed_origins{};
  // Asked for an origin the list does not hold; allows it when it returns true.
  std::function<bool(std::string_view origin)> allow_origin{};
  // Methods a preflight may ask for (compared exactly, as methods are case-sensitive).
  std::vector<std::string> allowed_methods{"GET", "HEAD", "POST"};
  // Request headers a preflight may ask for (case-insensitive); "*" allows any.
  std::vector<std::string> allowed_headers{};
  // Response headers the page may read beyond the safelisted ones
  // (Access-Control-Expose-Headers).
  std::vector<std::string> exposed_headers{};
  // Access-Control-Allow-Credentials: true (cookies, HTTP auth). The allowed origin is
  // then always echoed, never "*", which browsers refuse with credentials.
  bool allow_credentials = false;
  // How long a browser may cache a preflight's answer (Access-Control-Max-Age); zero
  // sends none (browsers then use 5 s).
  std::chrono::seconds max_age{0};
};

// The CORS middleware for options (see above).
Middleware cors(CorsOptions options);

}  // namespace goro::http
