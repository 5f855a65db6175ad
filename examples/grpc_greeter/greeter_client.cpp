// goro-grpc-greeter-client: calls helloworld.Greeter/SayHello once, with a 1 s deadline.
//
//   goro-grpc-greeter-client [--target 127.0.0.1:50051] [--name world]
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include <goro/grpc/grpc.hpp>
#include <goro/scheduler/runtime.hpp>

#include "helloworld.goro.grpc.hpp"

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:50051";
  std::string name = "world";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--target") target = argv[i + 1];
    if (std::string_view(argv[i]) == "--name") name = argv[i + 1];
  }
  return goro::run([&] {
    helloworld::Greeter::Stub stub(goro::grpc::Channel::create(target));
    goro::grpc::ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(1));
    helloworld::HelloRequest request;
    request.set_name(name);
    helloworld::HelloReply reply;
    goro::grpc::Status status = stub.SayHello(ctx, request, &reply);  // parks this goroutine
    if (!status.ok()) {
      std::fprintf(stderr, "SayHello: %s\n", status.to_string().c_str());
      return 1;
    }
    std::printf("%s\n", reply.message().c_str());
    return 0;
  });
}
