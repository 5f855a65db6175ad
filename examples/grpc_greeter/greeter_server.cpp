// goro-grpc-greeter-server: serves helloworld.Greeter on h2c until SIGINT or SIGTERM,
// then finishes the calls in flight (up to 5 s) and exits.
//
//   goro-grpc-greeter-server [--port 50051]
//
// SayHello is plain blocking code on a goroutine of its own; there is no thread pool
// and no completion queue to manage.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <goro/grpc/grpc.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/signal.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "helloworld.goro.grpc.hpp"

namespace {

class GreeterImpl final : public helloworld::Greeter::Service {
  goro::grpc::Status SayHello(goro::grpc::ServerContext&, const helloworld::HelloRequest& request,
                              helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + request.name());
    return {};
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string port = "50051";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--port") port = argv[i + 1];
  }
  return goro::run([&] {
    goro::Result<goro::net::Listener> listener = goro::net::listen("tcp", "0.0.0.0:" + port);
    if (!listener) {
      std::fprintf(stderr, "listen :%s: %s\n", port.c_str(), listener.error().message().c_str());
      return 1;
    }
    GreeterImpl greeter;
    goro::grpc::Server server;
    server.register_service(greeter);

    goro::Chan<int> signals(1);
    goro::signal_notify(signals, {SIGINT, SIGTERM});
    goro::WaitGroup stopped;
    stopped.add(1);
    goro::go([&] {
      signals.recv();
      server.shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(5));
      stopped.done();
    });

    std::printf("greeter listening on %s\n", listener->addr().to_string().c_str());
    std::fflush(stdout);
    server.serve(*listener);
    stopped.wait();
    return 0;
  });
}
