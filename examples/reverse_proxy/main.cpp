// goro-reverse-proxy: forwards every request to one backend through a keep-alive
// goro::http::Client pool, one goroutine per client connection, all blocking code.
//
//   $ ./goro-demo --addr 127.0.0.1:8081 &
//   $ ./goro-reverse-proxy --addr 127.0.0.1:8080 http://127.0.0.1:8081
//   $ curl localhost:8080/json
//
// Bodies are buffered whole in both directions (the Client returns complete responses);
// hop-by-hop headers are dropped, X-Forwarded-For is added. Each backend call runs under
// its request's context: a client that leaves abandons the backend call at once.
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <cstdio>
#include <string>

namespace http = goro::http;

namespace {

bool hop_by_hop(std::string_view name) {
  for (std::string_view h : {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                             "te", "trailer", "upgrade", "content-length", "host"}) {
    if (http::iequals(name, h)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "goro-reverse-proxy"});
  app.flags().set_description(
      "Forwards every request to the backend its one argument names (http://host:port).");
  if (std::optional<int> exit = app.parse()) return *exit;
  if (app.args().size() != 1) {
    app.log("takes one argument, the backend's URL (see --help)");
    return 2;
  }
  std::string backend = app.args()[0];
  while (!backend.empty() && backend.back() == '/') backend.pop_back();

  http::ClientOptions options;
  options.read_timeout = std::chrono::seconds(30);
  http::Client client(options);
  return app.run([&](http::Request& req, http::ResponseWriter& w) {
    http::ClientRequest out;
    out.method = std::string(req.method());
    out.url = backend + std::string(req.target());
    for (const http::HeaderField& f : req.headers()) {
      if (!hop_by_hop(f.name)) out.headers.add(f.name, f.value);
    }
    std::string remote(req.remote_addr());
    out.headers.add("X-Forwarded-For", remote.substr(0, remote.rfind(':')));
    goro::Result<std::string> body = req.body();
    if (!body) return;
    out.body = std::move(*body);
    // The backend call ends (and its connection closes) as soon as the client leaves.
    out.context = req.context();

    goro::Result<http::ClientResponse> in = client.send(out);
    if (!in) {
      if (!req.context().err()) w.text("502 bad gateway: " + in.error().message() + "\n", 502);
      return;
    }
    for (http::HeaderField f : in->headers) {
      if (!hop_by_hop(f.name)) w.header().add(f.name, f.value);
    }
    w.set_status(in->status);
    w.write(in->body);
  });
}
