// The gRPC C++ greeter of the grpc-* load-test scenarios (loadtest/run.sh): Debian's
// libgrpc++ (1.51) with the callback API, as the gRPC C++ documentation tells a user to
// write a server today: a grpc::CallbackService whose unary method finishes a
// ServerUnaryReactor at once, and whose streaming method is a ServerWriteReactor that
// writes the next reply from OnWriteDone (gRPC's route_guide callback example does the
// same; each write is sent on its own: WriteOptions().set_buffer_hint() would let gRPC
// coalesce them, which the examples do not show). gRPC runs them on its own threads;
// run.sh gives the process one core with taskset, as the other servers get one.
//
//   loadtest_grpc_cpp_greeter --addr 127.0.0.1:50051 --stream-replies 100
//
// Default server options (plus no SO_REUSEPORT, so that a port taken by another process
// fails the start instead of sharing it): the comparison is with gRPC C++ as it ships.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "helloworld.grpc.pb.h"

namespace {

class GreeterService final : public helloworld::Greeter::CallbackService {
 public:
  explicit GreeterService(int stream_replies) : stream_replies_(stream_replies) {}

  grpc::ServerUnaryReactor* SayHello(grpc::CallbackServerContext* context,
                                     const helloworld::HelloRequest* request,
                                     helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + request->name());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerWriteReactor<helloworld::HelloReply>* SayHelloStreamReply(
      grpc::CallbackServerContext* /*context*/, const helloworld::HelloRequest* request) override {
    // One reactor per call, deleted by itself when gRPC says the call is done.
    class Replies final : public grpc::ServerWriteReactor<helloworld::HelloReply> {
     public:
      Replies(const std::string& name, int count) : left_(count) {
        reply_.set_message("Hello " + name);
        Next();
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::UNKNOWN, "write failed"));
          return;
        }
        Next();
      }
      void OnDone() override { delete this; }
      void OnCancel() override {}

     private:
      void Next() {
        if (left_ == 0) {
          Finish(grpc::Status::OK);
          return;
        }
        --left_;
        StartWrite(&reply_);
      }
      helloworld::HelloReply reply_;
      int left_;
    };
    return new Replies(request->name(), stream_replies_);
  }

 private:
  int stream_replies_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string addr = "127.0.0.1:50051";
  int stream_replies = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--addr") == 0 && i + 1 < argc) {
      addr = argv[++i];
    } else if (std::strcmp(argv[i], "--stream-replies") == 0 && i + 1 < argc) {
      stream_replies = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--addr host:port] [--stream-replies N]\n", argv[0]);
      return 2;
    }
  }
  if (stream_replies < 0) {
    std::fprintf(stderr, "--stream-replies must be >= 0\n");
    return 2;
  }
  GreeterService service(stream_replies);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(addr, grpc::InsecureServerCredentials(), &bound_port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    std::fprintf(stderr, "gRPC C++ greeter: cannot listen on %s (address in use?)\n", addr.c_str());
    return 1;
  }
  std::fprintf(stderr, "gRPC C++ greeter on %s\n", addr.c_str());
  server->Wait();
  return 0;
}
