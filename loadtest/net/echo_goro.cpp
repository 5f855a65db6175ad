// Echo server on goro: one goroutine per connection, read then write back.
//   bench_net_echo_goro [address]      (default 127.0.0.1:9000; Ps from GORO_MAXPROCS)
#include <cstdio>
#include <functional>
#include <string>

#include <goro/net/net.hpp>
#include <goro/scheduler/runtime.hpp>

int main(int argc, char** argv) {
  std::string address = argc > 1 ? argv[1] : "127.0.0.1:9000";
  std::function<int()> serve = [&]() -> int {
    auto ln = goro::net::listen("tcp", address);
    if (!ln) {
      std::fprintf(stderr, "listen %s: %s\n", address.c_str(), ln.error().message().c_str());
      return 1;
    }
    std::fprintf(stderr, "goro echo on %s with %d Ps\n", ln->addr().to_string().c_str(),
                 goro::maxprocs());
    for (;;) {
      auto c = ln->accept();
      if (!c) {
        std::fprintf(stderr, "accept: %s\n", c.error().message().c_str());
        return 1;
      }
      goro::go([conn = std::move(*c)]() mutable {
        char buf[4096];
        for (;;) {
          auto n = conn.read(buf, sizeof buf);
          if (!n || *n == 0) return;
          if (!conn.write(buf, *n)) return;
        }
      });
    }
  };
  return goro::run(serve);
}
