// Liveness and readiness probes (probes.hpp): the readiness of the server that serves
// the request, found through the request's exchange.
#include <goro/http/probes.hpp>

#include <string>

#include "access.hpp"
#include "core/exchange.hpp"
#include "core/server_impl.hpp"

namespace goro::http {

namespace {

void answer(ResponseWriter& w, int status, std::string body) {
  w.header().set("Cache-Control", "no-store");
  w.text(body, status);
}

// The server behind req; nullptr for a request no Server made.
const Server::Impl* server_of(Request& req) {
  auto* x = dynamic_cast<detail::Exchange*>(detail::RequestAccess::host(req));
  return x != nullptr ? &x->server() : nullptr;
}

void serve_readiness(Request& req, ResponseWriter& w) {
  const Server::Impl* server = server_of(req);
  Readiness r = server != nullptr ? detail::readiness(*server, req.context()) : Readiness{true, {}};
  const bool verbose = req.query("verbose").has_value();
  if (r.ready && !verbose) return answer(w, 200, "ok\n");
  std::string body;
  for (const std::string& line : r.lines) body += line + "\n";
  body += r.ready ? "readyz check passed\n" : "readyz check failed\n";
  answer(w, r.ready ? 200 : 503, std::move(body));
}

}  // namespace

Handler liveness_handler() {
  return [](Request&, ResponseWriter& w) { answer(w, 200, "ok\n"); };
}

Handler readiness_handler() { return serve_readiness; }

Middleware probes(ProbeOptions options) {
  return [options = std::move(options)](Handler next) -> Handler {
    return [options, next = std::move(next)](Request& req, ResponseWriter& w) {
      const bool get = req.method() == "GET" || req.method() == "HEAD";
      if (get && !options.liveness_path.empty() && req.path() == options.liveness_path) {
        return answer(w, 200, "ok\n");
      }
      if (get && !options.readiness_path.empty() && req.path() == options.readiness_path) {
        return serve_readiness(req, w);
      }
      next(req, w);
    };
  };
}

}  // namespace goro::http
