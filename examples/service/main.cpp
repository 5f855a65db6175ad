#include <goro/goro.hpp>

namespace http = goro::http;
using namespace std::chrono_literals;

// GET /quote/{name} asks a backend (--backend, e.g. goro-demo) and answers 504 if it
// takes over 1 s; a client that leaves ends the backend call at once.
int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "service", .request_ids = true});
  const std::string& backend =
      app.flags().add("backend", "http://127.0.0.1:8081", "ask the backend at `URL`");
  if (std::optional<int> exit = app.parse()) return *exit;  // --help, a bad flag
  http::Client client;

  http::Router r;
  r.handle("GET /quote/{name}", [&](http::Request& req, http::ResponseWriter& w) {
    auto [ctx, cancel] = goro::with_timeout(req.context(), 1s);
    auto reply =
        client.get(backend + "/sleep?ms=" + std::string(req.query("ms").value_or("0")), ctx);
    if (!reply) {
      const bool slow = reply.error() == goro::context_errc::deadline_exceeded;
      w.text(std::string(slow ? "backend too slow" : reply.error().message()) + "\n",
             slow ? 504 : 502);
      return;
    }
    w.text("quote for " + std::string(req.path_value("name")) + ": " + reply->body + "\n");
  });
  // SIGTERM: drain 5 s, stop accepting, let requests finish (10 s), exit 0.
  return app.run(http::chain(r, {http::recover()}));
}
