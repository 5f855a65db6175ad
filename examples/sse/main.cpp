// goro-sse: server-sent events, fanned out over channels.
//
//   $ ./goro-sse 127.0.0.1:8080
//   $ curl -N localhost:8080/events            # in several terminals
//   $ curl -d 'hello' localhost:8080/publish   # every subscriber prints "data: hello"
//
// A ticker goroutine also publishes the time every second. Each subscriber is one
// connection goroutine blocked on its own buffered channel; the hub goroutine owns the
// subscriber list, so no lock is needed: subscribe, unsubscribe and publish are all
// messages to it. A subscriber that cannot keep up loses messages instead of slowing the
// others (try_send).
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
  std::string addr = argc > 1 ? argv[1] : "127.0.0.1:8080";
  return goro::run([&]() -> int {
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
      while (!req.client_gone()) {
        std::optional<std::string> message;
        if (goro::select(goro::recv_case(mine, message), goro::timeout_case(15s)) ==
            goro::select_timeout) {
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

    std::printf("goro-sse: curl -N http://%s/events\n", addr.c_str());
    std::fflush(stdout);
    std::error_code ec = http::listen_and_serve(addr, r);
    std::fprintf(stderr, "goro-sse: %s\n", ec.message().c_str());
    return 1;
  });
}
