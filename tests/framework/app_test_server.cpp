// The service app_test.py drives: goro::App around three routes, and three flags of its
// own: --greeting (what /hello says), --max-body BYTES (read before the options are
// final: it sets the server's body limit) and --ready-file PATH (a readiness check that
// holds while PATH exists).
//   GET /hello        "hello", or --greeting; POST reads the body first
//   GET /slow?ms=N    sleeps N ms under the request's context, then "slept"; if the
//                     context ends first, prints "slow: <error>" on stdout
//   GET /stream       writes until the server starts shutting down
//                     (http::shutdown_context), then "stream: shutdown seen" on stdout
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace http = goro::http;

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "app-test"});
  const std::string& greeting = app.flags().add("greeting", "hello", "what /hello answers");
  const std::int64_t& max_body =
      app.flags().add("max-body", std::int64_t{1} << 20, "the largest request body, in `BYTES`");
  const std::string& ready_file =
      app.flags().add("ready-file", "", "ready (/readyz) only while `PATH` exists");
  if (std::optional<int> exit = app.parse()) return *exit;
  if (!ready_file.empty()) {
    app.add_readiness_check("ready-file", [&ready_file](const goro::Context&) -> goro::Error {
      if (::access(ready_file.c_str(), F_OK) == 0) return {};
      return goro::Error(std::make_error_code(std::errc::no_such_file_or_directory),
                         ready_file + " does not exist");
    });
  }
  if (!app.args().empty()) {
    std::fprintf(stderr, "app-test: unexpected argument %s\n", app.args()[0].c_str());
    return 2;
  }
  app.options().server.max_body_bytes = static_cast<std::uint64_t>(max_body);
  http::Router r;
  r.handle("/hello", [&greeting](http::Request& req, http::ResponseWriter& w) {
    if (!req.body()) return;
    w.text(greeting);
  });
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
