// goro::grpc::Server end to end: the Echo service (echo_service.hpp) and the built-in
// health and reflection services, called by python3-grpcio (grpcio_client.py: all four
// call kinds, deadline, cancellation, metadata, status details, gzip, message size
// limits, UNIMPLEMENTED, a throwing handler, health, reflection, concurrent calls), by
// curl (what is not a gRPC request) and h2load (many calls on a few connections), at 1,
// 2, 4 and 8 Ps. Graceful shutdown: a call in flight finishes, health turns NOT_SERVING.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>

#include <goro/grpc/health.hpp>
#include <goro/grpc/server.hpp>
#include <goro/http/metrics.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "echo_service.hpp"
#include "test_certs.hpp"

namespace goro::grpc::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Output {
  int status = -1;
  std::string out;
};

Output run_command(const std::string& cmd) {
  Output o;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return o;
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  o.status = pclose(p);
  return o;
}

bool installed(const std::string& tool) {
  return run_command("command -v " + tool + " >/dev/null").status == 0;
}

std::atomic<int> logged_lines{0};

ServerOptions test_options() {
  ServerOptions o;
  o.max_receive_message_size = 1 << 20;
  o.max_send_message_size = 1 << 20;
  o.interceptors.push_back(metrics_interceptor());
  o.interceptors.push_back(
      logging_interceptor([](std::string_view) { logged_lines.fetch_add(1); }));
  o.interceptors.push_back(
      [](ServerContext& ctx, const MethodInfo&, const std::function<Status()>& next) {
        ctx.set_context(with_value(ctx.context(), kInterceptedKey, std::string("yes")));
        return next();
      });
  return o;
}

// A grpc::Server with the Echo service on 127.0.0.1:<ephemeral>, in goro::run with procs
// Ps on a thread of its own; stop() shuts it down with grace for the calls in flight.
class TestServer {
 public:
  explicit TestServer(int procs, ServerOptions options = test_options(),
                      std::optional<net::TlsCertificate> tls = std::nullopt) {
    std::promise<std::uint16_t> port;
    auto port_future = port.get_future();
    thread_ = std::thread(
        [this, procs, options = std::move(options), tls = std::move(tls), &port]() mutable {
          goro::run(
              [&] {
                Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
                if (!listener) return port.set_value(0);
                std::optional<net::TlsListener> secure;
                if (tls) {
                  net::TlsConfig config;
                  config.certificates.push_back(*tls);
                  config.alpn = {"h2"};
                  auto ctx = net::TlsContext::server(config);
                  if (!ctx) return port.set_value(0);
                  secure.emplace(std::move(*listener), *ctx);
                }
                EchoService echo;
                Server server(std::move(options));
                server.register_service(echo);
                server.health().set_serving("goro.test.Echo", ServingStatus::serving);
                server_ = &server;
                goro::WaitGroup serving;
                serving.add(1);
                goro::go([&] {
                  if (secure)
                    server.serve(*secure);
                  else
                    server.serve(*listener);
                  serving.done();
                });
                port.set_value(secure ? secure->addr().port() : listener->addr().port());
                while (!stop_.load(std::memory_order_acquire))
                  goro::sleep(std::chrono::milliseconds(2));
                shutdown_result_ = server.shutdown(Clock::now() + grace_);
                health_after_shutdown_ = server.health().serving("");
                serving.wait();
                server_ = nullptr;
              },
              goro::Config{.maxprocs = procs});
        });
    port_ = port_future.get();
    if (port_ == 0) ADD_FAILURE() << "listen failed";
  }
  ~TestServer() { stop(); }

  std::error_code stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000)) {
    if (thread_.joinable()) {
      grace_ = grace;
      stop_.store(true, std::memory_order_release);
      thread_.join();
    }
    return shutdown_result_;
  }
  std::uint16_t port() const { return port_; }
  ServingStatus health_after_shutdown() const { return health_after_shutdown_; }

 private:
  std::thread thread_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::chrono::milliseconds grace_{3000};
  std::error_code shutdown_result_;
  ServingStatus health_after_shutdown_ = ServingStatus::unknown;
  Server* server_ = nullptr;
};

bool have_grpcio() {
  const std::string python = GORO_GRPC_PYTHON3;
  return !python.empty() && std::filesystem::exists(python) &&
         run_command(python + " -c 'import grpc'").status == 0;
}

#define REQUIRE_GRPCIO() \
  if (!have_grpcio())    \
  GTEST_SKIP() << "/usr/bin/python3 with grpcio (python3-grpcio) is not installed"

std::string client_command(std::uint16_t port, const std::string& cases = "") {
  return std::string(GORO_GRPC_PYTHON3) + " " + GORO_GRPC_CLIENT_SCRIPT + " " +
         std::to_string(port) + (cases.empty() ? "" : " " + cases);
}

class GrpcServer : public ::testing::TestWithParam<int> {};

TEST_P(GrpcServer, GrpcioClientCasesPass) {
  REQUIRE_GRPCIO();
  TestServer server(GetParam());
  const Output o = run_command(client_command(server.port()));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out.find("FAIL"), std::string::npos) << o.out;
  for (const char* name : {"unary", "server_stream", "client_stream", "bidi_ping_pong", "deadline",
                           "cancel", "metadata", "status", "gzip", "max_size", "unimplemented",
                           "throw", "malformed_request", "health", "reflection", "concurrent"}) {
    EXPECT_NE(o.out.find(std::string("PASS ") + name + "\n"), std::string::npos) << name << "\n"
                                                                                 << o.out;
  }
  EXPECT_FALSE(server.stop());
  EXPECT_EQ(server.health_after_shutdown(), ServingStatus::not_serving);
}

INSTANTIATE_TEST_SUITE_P(Procs, GrpcServer, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

TEST(GrpcServerTls, GrpcioOverTlsWithAlpnH2) {
  REQUIRE_GRPCIO();
  net::testing::TestPki pki;
  TestServer server(2, test_options(), pki.leaf("server", {"localhost"}));
  const Output o = run_command(
      "GORO_GRPC_TLS_CA=" + pki.ca_file() + " " +
      client_command(server.port(), "unary server_stream bidi_ping_pong status health"));
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(o.out.find("FAIL"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("PASS bidi_ping_pong"), std::string::npos) << o.out;
}

TEST(GrpcServerInterceptors, MetricsAndLogLinesCountCalls) {
  REQUIRE_GRPCIO();
  const int lines_before = logged_lines.load();
  TestServer server(2);
  const Output o = run_command(client_command(server.port(), "unary status unimplemented"));
  EXPECT_EQ(o.status, 0) << o.out;
  server.stop();
  const std::string text = http::metrics::default_registry().render();
  EXPECT_NE(
      text.find("grpc_server_handled_total{grpc_method=\"Unary\",grpc_service=\"goro.test.Echo\","
                "grpc_type=\"unary\",grpc_code=\"OK\"}"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("grpc_code=\"NOT_FOUND\""), std::string::npos) << text;
  EXPECT_NE(text.find("grpc_server_handling_seconds_count{grpc_method=\"Unary\""),
            std::string::npos)
      << text;
  // Three Unary calls in "unary" and "status"'s two; unknown methods reach no interceptor.
  EXPECT_GE(logged_lines.load() - lines_before, 4);
}

TEST(GrpcServerHttp, WhatIsNotAGrpcCallGetsHttpErrors) {
  if (!installed("curl")) GTEST_SKIP() << "curl is not installed";
  TestServer server(2);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(server.port()) + "/goro.test.Echo/Unary";
  const std::string curl = "curl -sS -o /dev/null -w '%{http_code}' --http2-prior-knowledge ";
  // No body: the server answers without reading one and resets the rest of a stream
  // still sending (RFC 9113 8.1), which curl may report as an error instead of the 415.
  EXPECT_EQ(run_command(curl + "-X POST -H 'content-type: application/json' " + url).out, "415");
  EXPECT_EQ(run_command(curl + url).out, "405");
  // A gRPC request over curl: its grpc-status is UNIMPLEMENTED for an unknown method.
  const Output o = run_command(
      "curl -s -D - -o /dev/null --http2-prior-knowledge -X POST -H 'content-type: "
      "application/grpc' -H 'te: trailers' --data-binary '' http://127.0.0.1:" +
      std::to_string(server.port()) + "/goro.test.Echo/Missing");
  EXPECT_NE(o.out.find("grpc-status: 12"), std::string::npos) << o.out;
}

// A call ended before its method runs is still a gRPC response (Trailers-Only, with
// content-type application/grpc): a deadline already past on arrival, a malformed
// grpc-timeout. grpc-go reads a response without the content-type as an HTTP error.
TEST(GrpcServerHttp, CallsEndedOnArrivalAreGrpcResponses) {
  if (!installed("curl")) GTEST_SKIP() << "curl is not installed";
  TestServer server(2);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(server.port()) + "/goro.test.Echo/Unary";
  for (const auto& [timeout, status] :
       {std::pair<std::string, std::string>{"1n", "4"}, {"soon", "13"}}) {
    const Output o = run_command(
        "curl -s -D - -o /dev/null --http2-prior-knowledge -X POST -H 'content-type: "
        "application/grpc' -H 'te: trailers' -H 'grpc-timeout: " + timeout +
        "' --data-binary '' " + url);
    EXPECT_NE(o.out.find("content-type: application/grpc"), std::string::npos)
        << "grpc-timeout " << timeout << ":\n" << o.out;
    EXPECT_NE(o.out.find("grpc-status: " + status), std::string::npos)
        << "grpc-timeout " << timeout << ":\n" << o.out;
  }
}

// Writes one framed EchoRequest to a temporary file for curl or h2load; returns its path.
std::filesystem::path request_file(const EchoRequest& req, const std::string& name) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  const std::string payload = req.SerializeAsString();
  std::ofstream f(path, std::ios::binary);
  const char prefix[5] = {
      0, static_cast<char>(payload.size() >> 24), static_cast<char>(payload.size() >> 16),
      static_cast<char>(payload.size() >> 8), static_cast<char>(payload.size())};
  f.write(prefix, 5);
  f << payload;
  return path;
}

TEST(GrpcServerHttp, ResponseIsGzipCompressedWhenTheClientAcceptsIt) {
  if (!installed("curl")) GTEST_SKIP() << "curl is not installed";
  TestServer server(2);
  EchoRequest req;
  req.set_compress(true);
  req.set_count(20000);  // 20000 'p's: compresses well
  const std::string port = std::to_string(server.port());
  const std::filesystem::path body = request_file(req, "goro_grpc_gzip_" + port + ".bin");
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("goro_grpc_gzip_" + port + ".out");
  const std::string curl = "curl -s -D - -o " + out.string() +
                           " --http2-prior-knowledge -X POST -H 'content-type: application/grpc' "
                           "-H 'te: trailers' --data-binary @" +
                           body.string() + " ";
  const Output gz = run_command(curl + "-H 'grpc-accept-encoding: gzip' http://127.0.0.1:" + port +
                                "/goro.test.Echo/Unary");
  EXPECT_NE(gz.out.find("grpc-encoding: gzip"), std::string::npos) << gz.out;
  EXPECT_NE(gz.out.find("grpc-status: 0"), std::string::npos) << gz.out;
  std::string reply;
  {
    std::ifstream f(out, std::ios::binary);
    reply.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  ASSERT_GE(reply.size(), 5u);
  EXPECT_EQ(reply[0], 1) << "compressed flag";
  EXPECT_LT(reply.size(), 1000u) << "20000 bytes should shrink";
  // A compressed request in an encoding goro lacks: UNIMPLEMENTED, and what it accepts.
  {
    std::ofstream f(body, std::ios::binary);
    f.write("\x01\x00\x00\x00\x02xx", 7);
  }
  const Output snappy = run_command(curl + "-H 'grpc-encoding: snappy' http://127.0.0.1:" + port +
                                    "/goro.test.Echo/Unary");
  EXPECT_NE(snappy.out.find("grpc-status: 12"), std::string::npos) << snappy.out;
  EXPECT_NE(snappy.out.find("grpc-accept-encoding: identity,gzip"), std::string::npos)
      << snappy.out;
  std::filesystem::remove(body);
  request_file(req, body.filename().string());
  // A client that accepts only identity gets the message as is.
  const Output plain =
      run_command(curl + "-H 'grpc-accept-encoding: identity' http://127.0.0.1:" + port +
                  "/goro.test.Echo/Unary");
  EXPECT_EQ(plain.out.find("grpc-encoding: gzip"), std::string::npos) << plain.out;
  EXPECT_GT(std::filesystem::file_size(out), 20000u);
  std::filesystem::remove(body);
  std::filesystem::remove(out);
}

TEST(GrpcServerHttp, H2loadUnaryCallsAllSucceed) {
  if (!installed("h2load")) GTEST_SKIP() << "h2load is not installed";
  TestServer server(4);
  EchoRequest req;
  req.set_text("load");
  const std::filesystem::path body =
      request_file(req, "goro_grpc_h2load_" + std::to_string(server.port()) + ".bin");
  const Output o = run_command(
      "h2load -n 4000 -c 4 -m 16 -H 'content-type: application/grpc' -H 'te: trailers' "
      "-d " +
      body.string() + " http://127.0.0.1:" + std::to_string(server.port()) +
      "/goro.test.Echo/Unary");
  std::filesystem::remove(body);
  EXPECT_NE(o.out.find("4000 succeeded, 0 failed, 0 errored"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("status codes: 4000 2xx"), std::string::npos) << o.out;
}

TEST(GrpcServerShutdown, CallInFlightFinishesAndHealthTurnsNotServing) {
  REQUIRE_GRPCIO();
  TestServer server(2);
  // A call that takes 2.5 s, started before the shutdown, still gets its answer.
  const std::string script = "import sys, threading, time; sys.path.insert(0, '" +
                             std::filesystem::path(GORO_GRPC_CLIENT_SCRIPT).parent_path().string() +
                             "'); import grpcio_client as g; c = g.Client(" +
                             std::to_string(server.port()) +
                             "); print('ANSWER', g.reply(c.unary('/goro.test.Echo/Unary', "
                             "g.echo_request('late', sleep_ms=2500)))[0], flush=True)";
  std::thread client([&] {
    const Output o = run_command(std::string(GORO_GRPC_PYTHON3) + " -c \"" + script + "\"");
    EXPECT_NE(o.out.find("ANSWER late"), std::string::npos) << o.out;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // python's start, then the call
  EXPECT_FALSE(server.stop(std::chrono::milliseconds(5000)));
  client.join();
  EXPECT_EQ(server.health_after_shutdown(), ServingStatus::not_serving);
}

}  // namespace
}  // namespace goro::grpc::test
