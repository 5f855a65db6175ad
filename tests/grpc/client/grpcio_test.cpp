// goro's gRPC client against a server it did not write: python3-grpcio
// (grpcio_server.py, stubs generated at test time with /usr/bin/python3 -m
// grpc_tools.protoc), at 1, 2, 4 and 8 Ps: unary with metadata both ways, statuses with
// non-ASCII messages, the three streaming kinds, a deadline, gzip, UNIMPLEMENTED.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>

#include <goro/grpc/client.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "goro/test/client/echo.goro.grpc.hpp"

namespace goro::grpc::test {
namespace {

namespace echo = ::goro::test::client::v1;
using std::chrono::milliseconds;

bool have_grpcio() {
  const std::string python = GORO_GRPC_PYTHON3;
  return !python.empty() && std::filesystem::exists(python) &&
         std::system((python + " -c 'import grpc, grpc_tools' 2>/dev/null").c_str()) == 0;
}

// The python server, from start to SIGTERM.
class GrpcioServer {
 public:
  GrpcioServer() {
    const std::string cmd = std::string(GORO_GRPC_PYTHON3) + " " + GORO_TEST_SERVER_SCRIPT + " " +
                            GORO_TEST_PROTO_DIR;
    pipe_ = popen(cmd.c_str(), "r");
    if (pipe_ == nullptr) return;
    int port = 0, pid = 0;
    if (std::fscanf(pipe_, "%d %d", &port, &pid) == 2) {
      port_ = static_cast<std::uint16_t>(port);
      pid_ = pid;
    }
  }
  ~GrpcioServer() {
    if (pid_ > 0) ::kill(pid_, SIGTERM);
    if (pipe_ != nullptr) pclose(pipe_);
  }
  std::uint16_t port() const { return port_; }

 private:
  FILE* pipe_ = nullptr;
  std::uint16_t port_ = 0;
  int pid_ = 0;
};

class GrpcioPeer : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!have_grpcio()) {
      GTEST_SKIP() << "/usr/bin/python3 with grpcio and grpc_tools (python3-grpcio, "
                      "python3-grpc-tools) is not installed";
    }
  }
  // Runs body(stub) in goro::run with the test's Ps against a fresh python server.
  void with_stub(const std::function<void(echo::Echo::Stub&, std::uint16_t)>& body,
                 ChannelOptions options = {}) {
    GrpcioServer server;
    ASSERT_NE(server.port(), 0) << "grpcio_server.py did not start";
    goro::run(
        [&] {
          echo::Echo::Stub stub(
              Channel::create("127.0.0.1:" + std::to_string(server.port()), options));
          body(stub, server.port());
        },
        goro::Config{.maxprocs = GetParam()});
  }
};

TEST_P(GrpcioPeer, UnaryWithMetadataBothWays) {
  with_stub([](echo::Echo::Stub& stub, std::uint16_t) {
    ClientContext ctx;
    ctx.set_timeout(std::chrono::seconds(10));
    ctx.add_metadata("x-user", "ada");
    ctx.add_metadata("x-blob-bin", std::string("\x00\xff\x10", 3));
    echo::EchoRequest req;
    req.set_message("hello python");
    echo::EchoResponse resp;
    Status status = stub.Unary(ctx, req, &resp);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(resp.message(), "hello python");
    EXPECT_EQ(resp.metadata().at("x-user"), "ada");
    EXPECT_EQ(resp.metadata().at("x-blob-bin"), std::string("\x00\xff\x10", 3));
    EXPECT_GT(resp.deadline_ms(), 8000);  // grpc-timeout reached grpcio
    EXPECT_EQ(ctx.initial_metadata().get("x-initial"), "from-python");
    EXPECT_EQ(ctx.trailing_metadata().get("x-trailing-bin"), std::string("\x00\x01\xfe\xff", 4));
  });
}

TEST_P(GrpcioPeer, StatusWithANonAsciiMessage) {
  with_stub([](echo::Echo::Stub& stub, std::uint16_t) {
    ClientContext ctx;
    echo::EchoRequest req;
    req.set_status_code(static_cast<int>(StatusCode::failed_precondition));
    const std::string message = "d\xc3\xa9j\xc3\xa0 vu: 100%";
    req.set_status_message(message);
    echo::EchoResponse resp;
    Status status = stub.Unary(ctx, req, &resp);
    EXPECT_EQ(status.code(), StatusCode::failed_precondition);
    EXPECT_EQ(status.message(), message);
  });
}

TEST_P(GrpcioPeer, ServerClientAndBidiStreams) {
  with_stub([](echo::Echo::Stub& stub, std::uint16_t) {
    {
      ClientContext ctx;
      echo::EchoRequest req;
      req.set_message("s");
      req.set_count(20);
      auto reader = stub.ServerStream(ctx, req);
      echo::EchoResponse resp;
      int n = 0;
      while (reader->read(&resp)) EXPECT_EQ(resp.index(), n++);
      EXPECT_TRUE(reader->finish().ok());
      EXPECT_EQ(n, 20);
    }
    {
      ClientContext ctx;
      echo::EchoResponse resp;
      auto writer = stub.ClientStream(ctx, &resp);
      for (const char* part : {"x", "y", "z"}) {
        echo::EchoRequest req;
        req.set_message(part);
        ASSERT_TRUE(writer->write(req));
      }
      Status status = writer->finish();
      ASSERT_TRUE(status.ok()) << status.to_string();
      EXPECT_EQ(resp.message(), "xyz");
    }
    {
      ClientContext ctx;
      auto stream = stub.Bidi(ctx);
      WaitGroup writer;
      writer.add(1);
      go([&] {
        for (int i = 0; i < 50; ++i) {
          echo::EchoRequest req;
          req.set_message(std::to_string(i));
          if (!stream->write(req)) break;
        }
        stream->writes_done();
        writer.done();
      });
      echo::EchoResponse resp;
      int n = 0;
      while (stream->read(&resp)) EXPECT_EQ(resp.message(), std::to_string(n++));
      writer.wait();
      EXPECT_TRUE(stream->finish().ok());
      EXPECT_EQ(n, 50);
    }
  });
}

TEST_P(GrpcioPeer, DeadlineExceeded) {
  with_stub([](echo::Echo::Stub& stub, std::uint16_t) {
    ClientContext ctx;
    ctx.set_timeout(milliseconds(200));
    echo::EchoRequest req;
    req.set_delay_ms(3000);
    echo::EchoResponse resp;
    const auto start = std::chrono::steady_clock::now();
    Status status = stub.Unary(ctx, req, &resp);
    EXPECT_EQ(status.code(), StatusCode::deadline_exceeded) << status.to_string();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  });
}

TEST_P(GrpcioPeer, GzipRequests) {
  ChannelOptions options;
  options.compression = Compression::gzip;
  with_stub(
      [](echo::Echo::Stub& stub, std::uint16_t) {
        ClientContext ctx;
        echo::EchoRequest req;
        req.set_payload(std::string(50000, 'g'));
        echo::EchoResponse resp;
        Status status = stub.Unary(ctx, req, &resp);
        ASSERT_TRUE(status.ok()) << status.to_string();
        EXPECT_EQ(resp.index(), 50000);
      },
      options);
}

TEST_P(GrpcioPeer, UnknownServiceIsUnimplemented) {
  with_stub([](echo::Echo::Stub&, std::uint16_t port) {
    echo::Unserved::Stub stub(Channel::create("127.0.0.1:" + std::to_string(port)));
    ClientContext ctx;
    google::protobuf::Empty req, resp;
    EXPECT_EQ(stub.Missing(ctx, req, &resp).code(), StatusCode::unimplemented);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, GrpcioPeer, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace goro::grpc::test
