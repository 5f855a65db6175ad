// cors(): the CORS protocol's server side (Fetch standard, "CORS protocol").
#include <goro/http/cors.hpp>

#include <algorithm>
#include <memory>
#include <utility>

#include <goro/http/headers.hpp>
#include <goro/http/request.hpp>
#include <goro/http/response.hpp>

namespace goro::http {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string join(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& item : list) {
    if (!out.empty()) out.append(", ");
    out.append(item);
  }
  return out;
}

struct Cors {
  CorsOptions options;
  bool any_origin = false;
  bool any_header = false;
  std::string exposed;

  explicit Cors(CorsOptions o) : options(std::move(o)) {
    const auto& origins = options.allowed_origins;
    any_origin = std::find(origins.begin(), origins.end(), "*") != origins.end();
    const auto& headers = options.allowed_headers;
    any_header = std::find(headers.begin(), headers.end(), "*") != headers.end();
    exposed = join(options.exposed_headers);
  }

  bool origin_allowed(std::string_view origin) const {
    if (any_origin) return true;
    for (const std::string& allowed : options.allowed_origins) {
      if (iequals(allowed, origin)) return true;
    }
    return options.allow_origin && options.allow_origin(origin);
  }

  bool method_allowed(std::string_view method) const {
    const auto& methods = options.allowed_methods;
    return std::find(methods.begin(), methods.end(), method) != methods.end();
  }

  // Whether every header of the preflight's comma-separated list is allowed.
  bool headers_allowed(std::string_view requested) const {
    if (any_header) return true;
    while (!requested.empty()) {
      std::size_t comma = requested.find(',');
      std::string_view name = trim(requested.substr(0, comma));
      requested = comma == std::string_view::npos ? std::string_view{} : requested.substr(comma + 1);
      if (name.empty()) continue;
      bool found = std::any_of(options.allowed_headers.begin(), options.allowed_headers.end(),
                               [&](const std::string& h) { return iequals(h, name); });
      if (!found) return false;
    }
    return true;
  }

  void allow(Headers& h, std::string_view origin) const {
    // "*" only where no credentials go with it; else the one origin, which is why the
    // response varies with Origin.
    h.set("Access-Control-Allow-Origin",
          any_origin && !options.allow_credentials ? std::string_view("*") : origin);
    if (options.allow_credentials) h.set("Access-Control-Allow-Credentials", "true");
  }

  void preflight(Request& req, ResponseWriter& w, std::string_view origin) const {
    Headers& h = w.header();
    h.add("Vary", "Access-Control-Request-Method");
    h.add("Vary", "Access-Control-Request-Headers");
    std::string_view method = req.header("access-control-request-method");
    std::string_view requested = req.header("access-control-request-headers");
    if (origin_allowed(origin) && method_allowed(method) && headers_allowed(requested)) {
      allow(h, origin);
      h.set("Access-Control-Allow-Methods", method);
      if (!trim(requested).empty()) h.set("Access-Control-Allow-Headers", trim(requested));
      if (options.max_age.count() > 0) {
        h.set("Access-Control-Max-Age", std::to_string(options.max_age.count()));
      }
    }
    w.set_status(204);
    (void)w.flush();
  }
};

}  // namespace

Middleware cors(CorsOptions options) {
  auto state = std::make_shared<const Cors>(std::move(options));
  return [state](Handler next) -> Handler {
    return [state, next = std::move(next)](Request& req, ResponseWriter& w) {
      w.header().add("Vary", "Origin");
      std::string_view origin = req.header("origin");
      if (origin.empty()) {
        next(req, w);
        return;
      }
      if (req.method() == "OPTIONS" && req.has_header("access-control-request-method")) {
        state->preflight(req, w, origin);
        return;
      }
      if (state->origin_allowed(origin)) {
        state->allow(w.header(), origin);
        if (!state->exposed.empty()) {
          w.header().set("Access-Control-Expose-Headers", state->exposed);
        }
      }
      next(req, w);
    };
  };
}

}  // namespace goro::http
