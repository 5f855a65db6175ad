// goro-grpc-interop-server: grpc.testing.TestService, the service of the gRPC interop
// tests (grpc/grpc doc/interop-test-descriptions.md, "Server"), served by goro::grpc.
//
//   goro-grpc-interop-server --port=10000 [--use_tls --tls_cert_file=F --tls_key_file=F]
//
// The flags are grpc-go's interop server's. --port=0 listens on a free port; whatever the
// port, the server prints "listening on port N" once it accepts calls (the interop driver,
// run_interop.py, waits for that line). It listens on 127.0.0.1 and serves until killed.
//
// What the interop clients check, and how this serves it:
// - payloads are zero bytes of the sizes the request names (SimpleRequest.response_size,
//   each ResponseParameters.size, after its interval_us);
// - a request's response_status ends the call with that code and message (Echo Status);
// - x-grpc-test-echo-initial comes back in the response headers and
//   x-grpc-test-echo-trailing-bin in the trailers (Echo Metadata);
// - StreamingInputCall answers the sum of the payload sizes it read;
// - UnimplementedCall, and UnimplementedService as a whole, are not served: the generated
//   default and the server's unknown-service answer give UNIMPLEMENTED.
// Each call is a goroutine written as blocking code: sleeps and writes park it, and a
// cancelled or timed-out call stops at its next write or sleep.
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/grpc/grpc.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "flags.hpp"
#include "proto/grpc/testing/test.goro.grpc.hpp"

namespace {

namespace testing = ::grpc::testing;
using goro::grpc::ServerContext;
using goro::grpc::Status;
using goro::grpc::StatusCode;

constexpr std::string_view kEchoInitialKey = "x-grpc-test-echo-initial";
constexpr std::string_view kEchoTrailingKey = "x-grpc-test-echo-trailing-bin";

void echo_metadata(ServerContext& ctx) {
  const goro::grpc::Metadata& md = ctx.client_metadata();
  if (md.has(kEchoInitialKey)) ctx.add_initial_metadata(kEchoInitialKey, md.get(kEchoInitialKey));
  if (md.has(kEchoTrailingKey)) ctx.add_trailing_metadata(kEchoTrailingKey, md.get(kEchoTrailingKey));
}

// The status a request's response_status asks for; OK when it asks for none.
Status echo_status(bool has_status, const testing::EchoStatus& status) {
  if (!has_status || status.code() == 0) return {};
  return Status(static_cast<StatusCode>(status.code()), status.message());
}

// Fills payload with size zero bytes; INVALID_ARGUMENT for a negative size.
Status fill_payload(int size, testing::Payload* payload) {
  if (size < 0) {
    return Status(StatusCode::invalid_argument, "negative payload size " + std::to_string(size));
  }
  payload->set_type(testing::COMPRESSABLE);
  payload->set_body(std::string(static_cast<std::size_t>(size), '\0'));
  return {};
}

// Sends the responses one request's parameters describe, each after its interval.
// Parks in the sleeps and in writes; stops with CANCELLED once the call is over (the
// client cancelled, its deadline passed), which the runtime then reports as it saw it.
template <class Writer>
Status send_responses(ServerContext& ctx, const testing::StreamingOutputCallRequest& request,
                      Writer& writer) {
  for (const testing::ResponseParameters& params : request.response_parameters()) {
    if (params.interval_us() > 0) {
      if (goro::sleep(std::chrono::microseconds(params.interval_us()), ctx.context())) {
        return Status(StatusCode::cancelled, "cancelled while waiting to respond");
      }
    }
    testing::StreamingOutputCallResponse response;
    if (Status s = fill_payload(params.size(), response.mutable_payload()); !s.ok()) return s;
    if (!writer.write(response)) return Status(StatusCode::cancelled, "the call is over");
  }
  return {};
}

class TestServiceImpl final : public testing::TestService::Service {
 public:
  Status EmptyCall(ServerContext&, const testing::Empty&, testing::Empty*) override { return {}; }

  Status UnaryCall(ServerContext& ctx, const testing::SimpleRequest& request,
                   testing::SimpleResponse* response) override {
    echo_metadata(ctx);
    if (Status s = echo_status(request.has_response_status(), request.response_status()); !s.ok()) {
      return s;
    }
    return fill_payload(request.response_size(), response->mutable_payload());
  }

  // Answers the time, so that two answers differ unless a caching proxy served one.
  Status CacheableUnaryCall(ServerContext& ctx, const testing::SimpleRequest&,
                            testing::SimpleResponse* response) override {
    ctx.add_initial_metadata("cache-control", "max-age=60, public");
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    response->mutable_payload()->set_body(
        std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
    return {};
  }

  Status StreamingOutputCall(ServerContext& ctx, const testing::StreamingOutputCallRequest& request,
                             goro::grpc::ServerWriter<testing::StreamingOutputCallResponse>& writer) override {
    if (Status s = echo_status(request.has_response_status(), request.response_status()); !s.ok()) {
      return s;
    }
    return send_responses(ctx, request, writer);
  }

  Status StreamingInputCall(ServerContext&,
                            goro::grpc::ServerReader<testing::StreamingInputCallRequest>& reader,
                            testing::StreamingInputCallResponse* response) override {
    std::size_t total = 0;
    testing::StreamingInputCallRequest request;
    while (reader.read(&request)) total += request.payload().body().size();
    // read() is false at the end of the stream and when the call failed; a failed call
    // keeps its own status whatever this returns.
    response->set_aggregated_payload_size(static_cast<std::int32_t>(total));
    return {};
  }

  Status FullDuplexCall(ServerContext& ctx,
                        goro::grpc::ServerReaderWriter<testing::StreamingOutputCallResponse,
                                                       testing::StreamingOutputCallRequest>& stream) override {
    echo_metadata(ctx);
    testing::StreamingOutputCallRequest request;
    while (stream.read(&request)) {
      if (Status s = echo_status(request.has_response_status(), request.response_status()); !s.ok()) {
        return s;
      }
      if (Status s = send_responses(ctx, request, stream); !s.ok()) return s;
    }
    return {};
  }

  Status HalfDuplexCall(ServerContext& ctx,
                        goro::grpc::ServerReaderWriter<testing::StreamingOutputCallResponse,
                                                       testing::StreamingOutputCallRequest>& stream) override {
    std::vector<testing::StreamingOutputCallRequest> requests;
    testing::StreamingOutputCallRequest request;
    while (stream.read(&request)) requests.push_back(request);
    for (const auto& buffered : requests) {
      if (Status s = send_responses(ctx, buffered, stream); !s.ok()) return s;
    }
    return {};
  }
};

int serve(const goro_interop::Flags& flags) {
  const std::optional<int> port = flags.port("port");
  if (!port) return 2;
  const std::string address = "127.0.0.1:" + std::to_string(*port);

  TestServiceImpl service;
  goro::grpc::Server server;
  server.register_service(service);

  auto announce = [](const goro::net::Addr& addr) {
    std::printf("listening on port %u\n", static_cast<unsigned>(addr.port()));
    std::fflush(stdout);
  };
  std::error_code ec;
  if (flags.boolean("use_tls")) {
    goro::net::TlsConfig config;
    config.certificates.push_back({flags.str("tls_cert_file"), flags.str("tls_key_file")});
    config.alpn = {"h2"};
    auto ctx = goro::net::TlsContext::server(config);
    if (!ctx) {
      std::fprintf(stderr, "TLS certificate %s / key %s: %s\n", flags.str("tls_cert_file").c_str(),
                   flags.str("tls_key_file").c_str(), ctx.error().message().c_str());
      return 1;
    }
    auto listener = goro::net::tls_listen("tcp", address, *ctx);
    if (!listener) {
      std::fprintf(stderr, "listen on %s: %s\n", address.c_str(), listener.error().message().c_str());
      return 1;
    }
    announce(listener->addr());
    ec = server.serve(*listener);
  } else {
    auto listener = goro::net::listen("tcp", address);
    if (!listener) {
      std::fprintf(stderr, "listen on %s: %s\n", address.c_str(), listener.error().message().c_str());
      return 1;
    }
    announce(listener->addr());
    ec = server.serve(*listener);
  }
  if (ec) {
    std::fprintf(stderr, "serve: %s\n", ec.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = goro_interop::Flags::parse(
      argc, argv, {{"port", "10000"}, {"use_tls", "false"}, {"tls_cert_file", ""}, {"tls_key_file", ""}});
  if (!flags) return 2;
  if (flags->boolean("use_tls") && (flags->str("tls_cert_file").empty() || flags->str("tls_key_file").empty())) {
    std::fprintf(stderr, "--use_tls needs --tls_cert_file and --tls_key_file\n");
    return 2;
  }
  return goro::run([&] { return serve(*flags); });
}
