// Liveness and readiness probes: what a load balancer, Kubernetes or systemd asks a
// server before sending it traffic.
//
//   router.handle("GET /healthz", goro::http::liveness_handler());
//   router.handle("GET /readyz", goro::http::readiness_handler());
//   // or, in front of any handler (goro::App does this):
//   handler = goro::http::chain(handler, {goro::http::probes()});
//
//   GET /healthz          200 "ok": the process is alive and its server answers. Never
//                         false while it serves, draining included: a liveness probe
//                         that fails gets the process restarted.
//   GET /readyz           200 "ok" when the server serving the request is ready
//                         (Server::readiness: accepting, not draining, every
//                         ServerOptions::readiness_checks holding); else 503 with one
//                         line per condition and "readyz check failed"
//   GET /readyz?verbose   the lines in either case, as Kubernetes' own /readyz:
//                         "[+]serving ok", "[-]draining failed: the server is shutting
//                         down", ..., then "readyz check passed" or "readyz check failed"
//
// The replies are text/plain, never cached (Cache-Control: no-store), and HEAD is
// answered as GET. A request that no Server made (handed to the handler through
// httptest's ResponseRecorder) has no server to ask: it is answered ready.
#pragma once

#include <string>

#include <goro/http/middleware.hpp>
#include <goro/http/server.hpp>

namespace goro::http {

// Answers 200 "ok".
Handler liveness_handler();
// Answers the readiness of the server serving the request (see above); blocks while its
// readiness checks run.
Handler readiness_handler();

struct ProbeOptions {
  std::string liveness_path = "/healthz";   // empty: not served
  std::string readiness_path = "/readyz";   // empty: not served
};
// Serves GET and HEAD on the two paths before the handler it wraps sees anything (so
// middleware further in, an access log or request metrics, does not count the probes);
// every other request goes on.
Middleware probes(ProbeOptions options = {});

}  // namespace goro::http
