// The service app_test.py drives: goro::App around three routes.
//   GET /hello        "hello"
//   GET /slow?ms=N    sleeps N ms under the request's context, then "slept"; if the
//                     context ends first, prints "slow: <error>" on stdout
//   GET /stream       writes until the server starts shutting down
//                     (http::shutdown_context), then "stream: shutdown seen" on stdout
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace http = goro::http;

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "app-test"});
  if (!app.args().empty()) {
    std::fprintf(stderr, "app-test: unexpected argument %s\n", app.args()[0].c_str());
    return 2;
  }
  http::Router r;
  r.handle("GET /hello", [](http::Request&, http::ResponseWriter& w) { w.text("hello"); });
  r.handle("GET /slow", [](http::Request& req, http::ResponseWriter& w) {
    const long ms = std::atol(req.query("ms").value_or("100").c_str());
    if (std::error_code ec = goro::sleep(std::chrono::milliseconds(ms), req.context())) {
      std::printf("slow: %s\n", ec.message().c_str());
      std::fflush(stdout);
      return;
    }
    w.text("slept");
  });
  r.handle("GET /stream", [](http::Request& req, http::ResponseWriter& w) {
    w.header().set("Content-Type", "text/plain");
    if (w.write("streaming\n") || w.flush()) return;
    const goro::Context stopping = http::shutdown_context(req);
    goro::select(goro::recv_case(stopping.done()), goro::recv_case(req.context().done()));
    std::printf("stream: %s\n", stopping.err() ? "shutdown seen" : "client gone");
    std::fflush(stdout);
    (void)w.write("bye\n");
  });
  return app.run(r);
}
