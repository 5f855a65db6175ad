// goro-middleware: two middlewares written against goro's public headers only, as a user
// would write them — gzip compression (gzip.hpp) and ETags with conditional GET
// (etag.hpp) — each a ResponseWriter wrapping the server's.
//
//   $ ./goro-middleware --addr 127.0.0.1:8080
//   $ curl -s --compressed -D- localhost:8080/report       # Content-Encoding: gzip
//   $ curl -s -D- -H 'If-None-Match: <the ETag>' localhost:8080/report   # 304
//   $ curl -sN --compressed localhost:8080/ticks          # compressed, and still a stream
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <chrono>
#include <string>

#include "etag.hpp"
#include "gzip.hpp"

namespace http = goro::http;

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "middleware"});
  http::Router r;
  // A body worth compressing and worth not sending twice.
  r.handle("GET /report", [](http::Request&, http::ResponseWriter& w) {
    std::string body;
    for (int i = 0; i < 200; ++i) body += "line " + std::to_string(i) + ": all is well\n";
    w.text(body);
  });
  // A stream: each flush sends what is compressed so far.
  r.handle("GET /ticks", [](http::Request& req, http::ResponseWriter& w) {
    w.header().set("Content-Type", "text/event-stream");
    for (int i = 0; i < 5; ++i) {
      if (w.write("data: tick " + std::to_string(i) + "\n\n") || w.flush()) return;
      if (goro::sleep(std::chrono::milliseconds(200), req.context())) return;
    }
  });
  // etag outside gzip: the tag names the body as it is sent, so the compressed and the
  // plain representation each have their own (as Vary: Accept-Encoding says they differ).
  return app.run(http::chain(r, {example::etag(), example::gzip()}));
}
