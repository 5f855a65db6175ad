// goro-sse: server-sent events, fanned out over channels.
//
//   $ ./goro-sse --addr 127.0.0.1:8080
//   $ curl -N localhost:8080/events            # in several terminals
//   $ curl -d 'hello' localhost:8080/publish   # every subscriber prints "data: hello"
//
// A ticker goroutine also publishes the time every second. Each subscriber is one
// connection goroutine blocked on its own buffered channel; the hub goroutine owns the
// subscriber list, so no lock is needed: subscribe, unsubscribe and publish are all
// messages to it. A subscriber that cannot keep up loses messages instead of slowing the
// others (try_send).
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

namespace http = goro::http;
using namespace std::chrono_literals;

namespace {

using Subscriber = goro::Chan<std::string>;

struct Hub {
  goro::Chan<Subscriber> subscribe{0};
  goro::Chan<Subscriber> unsubscribe{0};
  goro::Chan<std::string> publish{16};

  // The hub goroutine: the only owner of the subscriber list.
  void run() {
    std::vector<Subscriber> subscribers;
    for (;;) {
      std::optional<Subscriber> joined, left;
      std::optional<std::string> message;
      switch (goro::select(goro::recv_case(subscribe, joined), goro::recv_case(unsubscribe, left),
                           goro::recv_case(publish, message))) {
        case 0:
          if (joined) subscribers.push_back(*joined);
          break;
        case 1:
          if (left) std::erase(subscribers, *left);
          break;
        case 2:
          if (message) {
            for (Subscriber& s : subscribers) s.try_send(*message);
          }
          break;
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "goro-sse"});
  return app.run([]() -> http::Handler {
    // Made on the main goroutine once the runtime is up: it starts goroutines.
    auto hub = std::make_shared<Hub>();
    goro::go([hub] { hub->run(); });
    goro::go([hub] {
      for (;;) {
        goro::sleep(1s);
        std::time_t now = std::time(nullptr);
        char text[64];
        std::strftime(text, sizeof text, "tick %H:%M:%S", std::gmtime(&now));
        hub->publish.send(text);
      }
    });

    http::Router r;
    r.handle("GET /events", [hub](http::Request& req, http::ResponseWriter& w) {
      w.header().set("Content-Type", "text/event-stream");
      w.header().set("Cache-Control", "no-cache");
      if (w.flush()) return;
      Subscriber mine(64);
      hub->subscribe.send(mine);
      // The stream ends when the client leaves (the request's context) or the server
      // starts shutting down, instead of holding the shutdown to its deadline.
      const goro::Context& ctx = req.context();
      const goro::Context stopping = http::shutdown_context(req);
      for (;;) {
        std::optional<std::string> message;
        const int fired =
            goro::select(goro::recv_case(mine, message), goro::recv_case(ctx.done()),
                         goro::recv_case(stopping.done()), goro::timeout_case(15s));
        if (fired == 1 || fired == 2) break;
        if (fired == goro::select_timeout) {
          if (w.write(": keep-alive\n\n") || w.flush()) break;
          continue;
        }
        if (!message || w.write("data: " + *message + "\n\n") || w.flush()) break;
      }
      hub->unsubscribe.send(mine);
    });
    r.handle("POST /publish", [hub](http::Request& req, http::ResponseWriter& w) {
      goro::Result<std::string> body = req.body();
      if (!body) return;
      hub->publish.send(*body);
      w.text("published\n");
    });
    return r;
  });
}
