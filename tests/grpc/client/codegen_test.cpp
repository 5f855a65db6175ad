// protoc-gen-goro's output, without a network: the classes have the documented shape
// (checked at compile time), the Service registers its methods under their gRPC names
// with the serve_* adapter of their kind (driven here through a fake ServerCall), the
// defaults answer UNIMPLEMENTED, comments reach the header, and the plugin refuses a
// .proto it cannot generate with a clear error.
#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>

#include "goro/test/client/echo.goro.grpc.hpp"

namespace goro::grpc {
namespace {

namespace echo = ::goro::test::client::v1;
using ::goro::test::client::common::Outer_Inner;

// The Stub's methods, as the team notes and client.hpp describe them.
static_assert(std::is_same_v<decltype(&echo::Echo::Stub::Unary),
                             Status (echo::Echo::Stub::*)(ClientContext&, const echo::EchoRequest&,
                                                          echo::EchoResponse*)>);
static_assert(std::is_same_v<decltype(&echo::Echo::Stub::ServerStream),
                             std::unique_ptr<ClientReader<echo::EchoResponse>> (echo::Echo::Stub::*)(
                                 ClientContext&, const echo::EchoRequest&)>);
static_assert(std::is_same_v<decltype(&echo::Echo::Stub::ClientStream),
                             std::unique_ptr<ClientWriter<echo::EchoRequest>> (echo::Echo::Stub::*)(
                                 ClientContext&, echo::EchoResponse*)>);
static_assert(std::is_same_v<
              decltype(&echo::Echo::Stub::Bidi),
              std::unique_ptr<ClientReaderWriter<echo::EchoRequest, echo::EchoResponse>> (
                  echo::Echo::Stub::*)(ClientContext&)>);
static_assert(std::is_same_v<decltype(&echo::Echo::Stub::Nested),
                             Status (echo::Echo::Stub::*)(ClientContext&, const Outer_Inner&,
                                                          ::google::protobuf::Empty*)>);
// The server interface: virtual, overridable with these signatures.
static_assert(std::is_base_of_v<Service, echo::Echo::Service>);
static_assert(std::is_same_v<decltype(&echo::Echo::Service::Unary),
                             Status (echo::Echo::Service::*)(ServerContext&, const echo::EchoRequest&,
                                                             echo::EchoResponse*)>);
static_assert(std::is_same_v<decltype(&echo::Echo::Service::ServerStream),
                             Status (echo::Echo::Service::*)(ServerContext&, const echo::EchoRequest&,
                                                             ServerWriter<echo::EchoResponse>&)>);
static_assert(std::is_same_v<decltype(&echo::Echo::Service::ClientStream),
                             Status (echo::Echo::Service::*)(ServerContext&,
                                                             ServerReader<echo::EchoRequest>&,
                                                             echo::EchoResponse*)>);
static_assert(std::is_same_v<
              decltype(&echo::Echo::Service::Bidi),
              Status (echo::Echo::Service::*)(
                  ServerContext&, ServerReaderWriter<echo::EchoResponse, echo::EchoRequest>&)>);
static_assert(echo::Echo::service_name == "goro.test.client.v1.Echo");
static_assert(echo::Unserved::service_name == "goro.test.client.v1.Unserved");

class FakeContext final : public ServerContext {
 public:
  const Context& context() const override { return ctx_; }
  void set_context(Context ctx) override { ctx_ = std::move(ctx); }
  const Metadata& client_metadata() const override { return metadata_; }
  void add_initial_metadata(std::string_view, std::string_view) override {}
  void add_trailing_metadata(std::string_view, std::string_view) override {}
  std::error_code send_initial_metadata() override { return {}; }
  std::string_view method() const override { return "/fake"; }
  std::string_view peer() const override { return "127.0.0.1:1"; }
  std::optional<std::chrono::steady_clock::time_point> deadline() const override { return {}; }
  void set_compression(Compression) override {}

 private:
  Context ctx_;
  Metadata metadata_;
};

// A call whose requests are given up front and whose responses are kept, serialized.
class FakeCall final : public ServerCall {
 public:
  explicit FakeCall(std::deque<std::string> requests) : requests_(std::move(requests)) {}
  ServerContext& context() override { return context_; }
  bool read(google::protobuf::MessageLite& msg) override {
    if (requests_.empty()) return false;
    bool ok = msg.ParseFromString(requests_.front());
    requests_.pop_front();
    return ok;
  }
  bool write(const google::protobuf::MessageLite& msg) override {
    responses.push_back(msg.SerializeAsString());
    return true;
  }
  std::vector<std::string> responses;

 private:
  FakeContext context_;
  std::deque<std::string> requests_;
};

std::string request(const std::string& text) {
  echo::EchoRequest r;
  r.set_message(text);
  return r.SerializeAsString();
}

std::string response_text(const std::string& bytes) {
  echo::EchoResponse r;
  EXPECT_TRUE(r.ParseFromString(bytes));
  return r.message();
}

const Service::Method& find(const Service& service, std::string_view name) {
  for (const Service::Method& m : service.methods()) {
    if (m.name == name) return m;
  }
  ADD_FAILURE() << "no method " << name;
  return service.methods().front();
}

TEST(GeneratedService, RegistersEveryMethodWithItsKindAndPath) {
  echo::Echo::Service service;
  EXPECT_EQ(service.full_name(), "goro.test.client.v1.Echo");
  ASSERT_EQ(service.methods().size(), 6u);
  struct Want {
    const char* name;
    CallKind kind;
  };
  for (Want want : {Want{"Unary", CallKind::unary}, Want{"ServerStream", CallKind::server_streaming},
                    Want{"ClientStream", CallKind::client_streaming},
                    Want{"Bidi", CallKind::bidi_streaming}, Want{"Relay", CallKind::unary},
                    Want{"Nested", CallKind::unary}}) {
    const Service::Method& m = find(service, want.name);
    EXPECT_EQ(m.full_name, std::string("/goro.test.client.v1.Echo/") + want.name);
    EXPECT_EQ(m.kind, want.kind) << want.name;
  }
}

TEST(GeneratedService, DefaultsAnswerUnimplemented) {
  echo::Echo::Service service;
  for (const Service::Method& m : service.methods()) {
    FakeCall call({m.name == "Nested" ? Outer_Inner().SerializeAsString() : request("x")});
    Status status = m.handler(call);
    EXPECT_EQ(status.code(), StatusCode::unimplemented) << m.name;
    EXPECT_TRUE(call.responses.empty()) << m.name;
  }
}

// Each override sees its requests and its responses reach the call.
class Impl final : public echo::Echo::Service {
 public:
  Status Unary(ServerContext&, const echo::EchoRequest& req, echo::EchoResponse* resp) override {
    resp->set_message("unary:" + req.message());
    return {};
  }
  Status ServerStream(ServerContext&, const echo::EchoRequest& req,
                      ServerWriter<echo::EchoResponse>& writer) override {
    for (int i = 0; i < 3; ++i) {
      echo::EchoResponse r;
      r.set_message(req.message() + std::to_string(i));
      writer.write(r);
    }
    return {};
  }
  Status ClientStream(ServerContext&, ServerReader<echo::EchoRequest>& reader,
                      echo::EchoResponse* resp) override {
    echo::EchoRequest req;
    std::string joined;
    while (reader.read(&req)) joined += req.message();
    resp->set_message(joined);
    return {};
  }
  Status Bidi(ServerContext&,
              ServerReaderWriter<echo::EchoResponse, echo::EchoRequest>& stream) override {
    echo::EchoRequest req;
    while (stream.read(&req)) {
      echo::EchoResponse r;
      r.set_message("<" + req.message() + ">");
      stream.write(r);
    }
    return Status(StatusCode::aborted, "done");
  }
};

TEST(GeneratedService, AdaptersCallTheOverrides) {
  Impl service;
  {
    FakeCall call({request("a")});
    EXPECT_TRUE(find(service, "Unary").handler(call).ok());
    ASSERT_EQ(call.responses.size(), 1u);
    EXPECT_EQ(response_text(call.responses[0]), "unary:a");
  }
  {
    FakeCall call({request("s")});
    EXPECT_TRUE(find(service, "ServerStream").handler(call).ok());
    ASSERT_EQ(call.responses.size(), 3u);
    EXPECT_EQ(response_text(call.responses[2]), "s2");
  }
  {
    FakeCall call({request("x"), request("y"), request("z")});
    EXPECT_TRUE(find(service, "ClientStream").handler(call).ok());
    ASSERT_EQ(call.responses.size(), 1u);
    EXPECT_EQ(response_text(call.responses[0]), "xyz");
  }
  {
    FakeCall call({request("1"), request("2")});
    Status status = find(service, "Bidi").handler(call);
    EXPECT_EQ(status.code(), StatusCode::aborted);
    ASSERT_EQ(call.responses.size(), 2u);
    EXPECT_EQ(response_text(call.responses[1]), "<2>");
  }
  {
    // A unary call without its request message is refused before the override runs.
    FakeCall call({});
    EXPECT_FALSE(find(service, "Unary").handler(call).ok());
    EXPECT_TRUE(call.responses.empty());
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GeneratedHeader, CarriesTheProtoComments) {
  const std::string header =
      read_file(std::filesystem::path(GORO_TEST_GENERATED_DIR) / "goro/test/client/echo.goro.grpc.hpp");
  ASSERT_FALSE(header.empty());
  EXPECT_NE(header.find("// Echo answers what it is sent.\nclass Echo {"), std::string::npos);
  EXPECT_NE(header.find("    // Joins the messages it receives, in order.\n    virtual"),
            std::string::npos);
  EXPECT_NE(header.find("namespace goro::test::client::v1 {"), std::string::npos);
}

struct Output {
  int status = -1;
  std::string text;
};

Output run_command(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  o.status = pclose(p);
  return o;
}

TEST(Plugin, RefusesAMethodThatWouldClashWithTheGeneratedClasses) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() /
                                    ("goro-codegen-" + std::to_string(::getpid()));
  std::filesystem::create_directories(out);
  Output o = run_command(std::string(GORO_TEST_PROTOC) + " -I" + GORO_TEST_PROTO_DIR +
                         "/bad --plugin=protoc-gen-goro=" + GORO_TEST_PLUGIN +
                         " --goro_out=" + out.string() + " " + GORO_TEST_PROTO_DIR +
                         "/bad/clash.proto");
  std::filesystem::remove_all(out);
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.text.find("goro.test.bad.S.Stub"), std::string::npos) << o.text;
}

TEST(Plugin, RefusesOptions) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() /
                                    ("goro-codegen-opt-" + std::to_string(::getpid()));
  std::filesystem::create_directories(out);
  Output o = run_command(std::string(GORO_TEST_PROTOC) + " -I" + GORO_TEST_PROTO_DIR +
                         "/proto --plugin=protoc-gen-goro=" + GORO_TEST_PLUGIN +
                         " --goro_out=lite:" + out.string() + " " + GORO_TEST_PROTO_DIR +
                         "/proto/goro/test/client/common/types.proto");
  std::filesystem::remove_all(out);
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.text.find("takes no options"), std::string::npos) << o.text;
}

}  // namespace
}  // namespace goro::grpc
