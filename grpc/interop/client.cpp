// goro-grpc-interop-client: runs one test case of the gRPC interop tests (grpc/grpc
// doc/interop-test-descriptions.md, "Client") against a server, on goro::grpc's Channel
// and the stubs protoc-gen-goro generates from proto/grpc/testing/test.proto.
//
//   goro-grpc-interop-client --server_host=127.0.0.1 --server_port=10000
//       --test_case=large_unary [--use_tls --ca_file=ca.pem --server_host_override=NAME]
//
// The flags are grpc-go's interop client's. It prints "<case>: passed" and exits 0 when
// every assertion of the case held; otherwise it prints what differed and exits 1 (2 for
// bad flags). Each call has a deadline (--case_timeout, 10 s) so that a server that
// never answers fails the case instead of hanging it.
//
// A case is straight-line blocking code on one goroutine, as a goro user writes a
// client: a failed assertion throws Failure, which main reports.
#include <goro/scheduler/runtime.hpp>
#include <goro/grpc/grpc.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "flags.hpp"
#include "proto/grpc/testing/test.goro.grpc.hpp"

namespace {

namespace testing = ::grpc::testing;
using goro::grpc::ClientContext;
using goro::grpc::Status;
using goro::grpc::StatusCode;

// A test assertion that did not hold.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(bool condition, const std::string& message) {
  if (!condition) throw Failure(message);
}

// Checks a stream operation; when it failed, the message ends with the call's status
// (finish() is called only then: it ends the call).
template <class Stream>
void check_call(bool succeeded, const std::string& what, Stream& stream) {
  if (!succeeded) throw Failure(what + stream.finish().to_string());
}

void check_ok(const std::string& what, const Status& status) {
  check(status.ok(), what + ": " + status.to_string());
}

void check_status(const std::string& what, const Status& status, StatusCode code) {
  check(status.code() == code, what + ": status " + status.to_string() + ", want " +
                                   std::string(goro::grpc::status_code_name(code)));
}

const std::vector<int> kRequestSizes = {27182, 8, 1828, 45904};
const std::vector<int> kResponseSizes = {31415, 9, 2653, 58979};
constexpr std::string_view kInitialKey = "x-grpc-test-echo-initial";
constexpr std::string_view kInitialValue = "test_initial_metadata_value";
constexpr std::string_view kTrailingKey = "x-grpc-test-echo-trailing-bin";
const std::string kTrailingValue = "\xab\xab\xab";

void set_zeros(testing::Payload* payload, int size) {
  payload->set_type(testing::COMPRESSABLE);
  payload->set_body(std::string(static_cast<std::size_t>(size), '\0'));
}

void check_payload(const std::string& what, const testing::Payload& payload, int size) {
  check(payload.type() == testing::COMPRESSABLE, what + ": payload type is not COMPRESSABLE");
  check(payload.body().size() == static_cast<std::size_t>(size),
        what + ": payload of " + std::to_string(payload.body().size()) + " bytes, want " +
            std::to_string(size));
  check(payload.body() == std::string(static_cast<std::size_t>(size), '\0'),
        what + ": payload is not all zeros");
}

testing::StreamingOutputCallRequest output_request(int request_size, std::vector<int> response_sizes) {
  testing::StreamingOutputCallRequest request;
  request.set_response_type(testing::COMPRESSABLE);
  if (request_size > 0) set_zeros(request.mutable_payload(), request_size);
  for (int size : response_sizes) request.add_response_parameters()->set_size(size);
  return request;
}

class Cases {
 public:
  Cases(std::shared_ptr<goro::grpc::Channel> channel, std::chrono::nanoseconds call_timeout)
      : channel_(channel), stub_(channel), call_timeout_(call_timeout) {}

  void empty_unary() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    testing::Empty reply;
    check_ok("EmptyCall", stub_.EmptyCall(ctx, testing::Empty(), &reply));
  }

  void large_unary() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    testing::SimpleRequest request;
    request.set_response_type(testing::COMPRESSABLE);
    request.set_response_size(314159);
    set_zeros(request.mutable_payload(), 271828);
    testing::SimpleResponse reply;
    check_ok("UnaryCall", stub_.UnaryCall(ctx, request, &reply));
    check_payload("UnaryCall", reply.payload(), 314159);
  }

  void client_streaming() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    testing::StreamingInputCallResponse reply;
    auto stream = stub_.StreamingInputCall(ctx, &reply);
    int total = 0;
    for (int size : kRequestSizes) {
      testing::StreamingInputCallRequest request;
      set_zeros(request.mutable_payload(), size);
      check_call(stream->write(request), "StreamingInputCall: write failed: ", *stream);
      total += size;
    }
    check_ok("StreamingInputCall", stream->finish());
    check(reply.aggregated_payload_size() == total,
          "aggregated_payload_size " + std::to_string(reply.aggregated_payload_size()) + ", want " +
              std::to_string(total));
  }

  void server_streaming() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    auto stream = stub_.StreamingOutputCall(ctx, output_request(0, kResponseSizes));
    testing::StreamingOutputCallResponse reply;
    for (std::size_t i = 0; i < kResponseSizes.size(); i++) {
      check_call(stream->read(&reply), "response #" + std::to_string(i) + " missing: ", *stream);
      check_payload("response #" + std::to_string(i), reply.payload(), kResponseSizes[i]);
    }
    check(!stream->read(&reply), "a fifth response, want the end of the stream");
    check_ok("StreamingOutputCall", stream->finish());
  }

  void ping_pong() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    auto stream = stub_.FullDuplexCall(ctx);
    testing::StreamingOutputCallResponse reply;
    for (std::size_t i = 0; i < kRequestSizes.size(); i++) {
      check_call(stream->write(output_request(kRequestSizes[i], {kResponseSizes[i]})), "FullDuplexCall: write #" + std::to_string(i) + " failed: ", *stream);
      check_call(stream->read(&reply), "response #" + std::to_string(i) + " missing: ", *stream);
      check_payload("response #" + std::to_string(i), reply.payload(), kResponseSizes[i]);
    }
    check(stream->writes_done(), "FullDuplexCall: half-close failed");
    check(!stream->read(&reply), "a response after the half-close, want the end of the stream");
    check_ok("FullDuplexCall", stream->finish());
  }

  void empty_stream() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    auto stream = stub_.FullDuplexCall(ctx);
    check(stream->writes_done(), "FullDuplexCall: half-close failed");
    testing::StreamingOutputCallResponse reply;
    check(!stream->read(&reply), "a response, want none");
    check_ok("FullDuplexCall", stream->finish());
  }

  void timeout_on_sleeping_server() {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::milliseconds(1));
    auto stream = stub_.FullDuplexCall(ctx);
    // The write may already fail (the deadline passed): the status says why.
    stream->write(output_request(27182, {}));
    testing::StreamingOutputCallResponse reply;
    check(!stream->read(&reply), "a response, want DEADLINE_EXCEEDED");
    check_status("FullDuplexCall", stream->finish(), StatusCode::deadline_exceeded);
  }

  void cancel_after_begin() {
    ClientContext ctx;
    testing::StreamingInputCallResponse reply;
    auto stream = stub_.StreamingInputCall(ctx, &reply);
    ctx.cancel();
    check_status("StreamingInputCall", stream->finish(), StatusCode::cancelled);
  }

  void cancel_after_first_response() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    auto stream = stub_.FullDuplexCall(ctx);
    check_call(stream->write(output_request(27182, {31415})), "FullDuplexCall: write failed: ", *stream);
    testing::StreamingOutputCallResponse reply;
    check_call(stream->read(&reply), "no response: ", *stream);
    check_payload("response", reply.payload(), 31415);
    ctx.cancel();
    check(!stream->read(&reply), "a response after cancel");
    check_status("FullDuplexCall", stream->finish(), StatusCode::cancelled);
  }

  void echo_status(const std::string& message, bool duplex) {
    testing::EchoStatus status;
    status.set_code(2);
    status.set_message(message);
    {
      ClientContext ctx;
      ctx.set_timeout(call_timeout_);
      testing::SimpleRequest request;
      *request.mutable_response_status() = status;
      testing::SimpleResponse reply;
      Status got = stub_.UnaryCall(ctx, request, &reply);
      check_status("UnaryCall", got, StatusCode::unknown);
      check(got.message() == message, "UnaryCall: status message \"" + got.message() + "\", want \"" + message + "\"");
    }
    if (!duplex) return;
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    auto stream = stub_.FullDuplexCall(ctx);
    testing::StreamingOutputCallRequest request;
    *request.mutable_response_status() = status;
    stream->write(request);
    stream->writes_done();
    testing::StreamingOutputCallResponse reply;
    check(!stream->read(&reply), "FullDuplexCall: a response, want UNKNOWN");
    Status got = stream->finish();
    check_status("FullDuplexCall", got, StatusCode::unknown);
    check(got.message() == message, "FullDuplexCall: status message \"" + got.message() + "\", want \"" + message + "\"");
  }

  void custom_metadata() {
    {
      ClientContext ctx;
      ctx.set_timeout(call_timeout_);
      ctx.add_metadata(kInitialKey, kInitialValue);
      ctx.add_metadata(kTrailingKey, kTrailingValue);
      testing::SimpleRequest request;
      request.set_response_size(314159);
      set_zeros(request.mutable_payload(), 271828);
      testing::SimpleResponse reply;
      check_ok("UnaryCall", stub_.UnaryCall(ctx, request, &reply));
      check_payload("UnaryCall", reply.payload(), 314159);
      check_echoed("UnaryCall", ctx);
    }
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    ctx.add_metadata(kInitialKey, kInitialValue);
    ctx.add_metadata(kTrailingKey, kTrailingValue);
    auto stream = stub_.FullDuplexCall(ctx);
    check_call(stream->write(output_request(271828, {314159})), "FullDuplexCall: write failed: ", *stream);
    check(stream->writes_done(), "FullDuplexCall: half-close failed");
    testing::StreamingOutputCallResponse reply;
    check_call(stream->read(&reply), "FullDuplexCall: no response: ", *stream);
    check_payload("FullDuplexCall", reply.payload(), 314159);
    check(!stream->read(&reply), "FullDuplexCall: a second response, want the end of the stream");
    check_ok("FullDuplexCall", stream->finish());
    check_echoed("FullDuplexCall", ctx);
  }

  void unimplemented_method() {
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    testing::Empty reply;
    check_status("TestService/UnimplementedCall", stub_.UnimplementedCall(ctx, testing::Empty(), &reply),
                 StatusCode::unimplemented);
  }

  void unimplemented_service() {
    testing::UnimplementedService::Stub other(channel_);
    ClientContext ctx;
    ctx.set_timeout(call_timeout_);
    testing::Empty reply;
    check_status("UnimplementedService/UnimplementedCall", other.UnimplementedCall(ctx, testing::Empty(), &reply),
                 StatusCode::unimplemented);
  }

 private:
  static void check_echoed(const std::string& what, const ClientContext& ctx) {
    const std::string initial(ctx.initial_metadata().get(kInitialKey));
    check(ctx.initial_metadata().has(kInitialKey) && initial == kInitialValue,
          what + ": initial metadata " + std::string(kInitialKey) + " = \"" + initial + "\", want \"" +
              std::string(kInitialValue) + "\"");
    const std::string trailing(ctx.trailing_metadata().get(kTrailingKey));
    check(ctx.trailing_metadata().has(kTrailingKey) && trailing == kTrailingValue,
          what + ": trailing metadata " + std::string(kTrailingKey) + " is " +
              std::to_string(trailing.size()) + " bytes, want 0xababab");
  }

  std::shared_ptr<goro::grpc::Channel> channel_;
  testing::TestService::Stub stub_;
  std::chrono::nanoseconds call_timeout_;
};

int run_case(const goro_interop::Flags& flags) {
  const std::optional<int> port = flags.port("server_port");
  if (!port) return 2;
  const std::optional<int> timeout_s = flags.port("case_timeout");
  if (!timeout_s) return 2;

  goro::grpc::ChannelOptions options;
  options.tls = flags.boolean("use_tls");
  options.ca_file = flags.str("ca_file");
  options.server_name_override = flags.str("server_host_override");
  const std::string target = flags.str("server_host") + ":" + std::to_string(*port);
  Cases cases(goro::grpc::Channel::create(target, options), std::chrono::seconds(*timeout_s));

  const std::string special = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n";
  const std::map<std::string, std::function<void()>> table = {
      {"empty_unary", [&] { cases.empty_unary(); }},
      {"large_unary", [&] { cases.large_unary(); }},
      {"client_streaming", [&] { cases.client_streaming(); }},
      {"server_streaming", [&] { cases.server_streaming(); }},
      {"ping_pong", [&] { cases.ping_pong(); }},
      {"empty_stream", [&] { cases.empty_stream(); }},
      {"timeout_on_sleeping_server", [&] { cases.timeout_on_sleeping_server(); }},
      {"cancel_after_begin", [&] { cases.cancel_after_begin(); }},
      {"cancel_after_first_response", [&] { cases.cancel_after_first_response(); }},
      {"status_code_and_message", [&] { cases.echo_status("test status message", true); }},
      {"special_status_message", [&] { cases.echo_status(special, false); }},
      {"custom_metadata", [&] { cases.custom_metadata(); }},
      {"unimplemented_method", [&] { cases.unimplemented_method(); }},
      {"unimplemented_service", [&] { cases.unimplemented_service(); }},
  };
  const std::string& name = flags.str("test_case");
  auto it = table.find(name);
  if (it == table.end()) {
    std::fprintf(stderr, "unknown test case \"%s\"; known:", name.c_str());
    for (const auto& entry : table) std::fprintf(stderr, " %s", entry.first.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  try {
    it->second();
  } catch (const Failure& failure) {
    std::fprintf(stderr, "%s: FAILED: %s\n", name.c_str(), failure.what());
    return 1;
  }
  std::printf("%s: passed\n", name.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = goro_interop::Flags::parse(argc, argv,
                                          {{"server_host", "localhost"},
                                           {"server_port", "10000"},
                                           {"server_host_override", ""},
                                           {"test_case", "large_unary"},
                                           {"use_tls", "false"},
                                           {"ca_file", ""},
                                           {"case_timeout", "10"}});
  if (!flags) return 2;
  return goro::run([&] { return run_case(*flags); });
}
