// goro's gRPC client against goro's gRPC server (echo_impl.hpp, the generated Service),
// at 1, 2, 4 and 8 Ps: the four call kinds through generated stubs, metadata both ways
// (ASCII and -bin), statuses with percent-encoded messages and details, deadlines (sent
// as grpc-timeout, expiring locally, propagated from an incoming call to the call it
// makes), cancellation, gzip both ways, message size limits, UNIMPLEMENTED, client
// interceptors, an unreachable server, many goroutines sharing one channel, and the
// statuses of answers that are not gRPC (HTTP 404/503/..., HTML, trailers-only) from a
// plain goro HTTP/2 server; and mutual TLS, the client's identity read by a server
// interceptor.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <goro/grpc/client.hpp>
#include <goro/grpc/server.hpp>
#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "echo_impl.hpp"
#include "test_certs.hpp"

namespace goro::grpc::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// On a goroutine: serves listener with server (a grpc::Server or an http::Server) while
// body(port) runs, then shuts the server down with grace for the calls in flight.
template <class S, class L>
void serve_while(S& server, L& listener, std::chrono::seconds grace,
                 const std::function<void(std::uint16_t port)>& body) {
  WaitGroup serving;
  serving.add(1);
  go([&] {
    server.serve(listener);
    serving.done();
  });
  body(listener.addr().port());
  server.shutdown(Clock::now() + grace);
  serving.wait();
}

// Runs body(port) in goro::run with procs Ps, next to a goro gRPC server serving Echo on
// 127.0.0.1:<ephemeral>; the server is shut down when body returns.
void with_server(int procs, const std::function<void(std::uint16_t port)>& body) {
  goro::run(
      [&] {
        Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
        ASSERT_TRUE(listener) << listener.error().message();
        EchoImpl echo;
        Server server;
        server.register_service(echo);
        serve_while(server, *listener, std::chrono::seconds(2), body);
      },
      goro::Config{.maxprocs = procs});
}

// On a goroutine: runs body(port) next to an http::Server serving handler with h2c on
// 127.0.0.1:<ephemeral> (a gRPC handler behind middleware, or a non-gRPC answer), and
// shuts it down when body returns.
void serve_h2c(const http::Handler& handler, const std::function<void(std::uint16_t port)>& body) {
  Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
  ASSERT_TRUE(listener) << listener.error().message();
  http::ServerOptions options;
  options.enable_h2c = true;
  http::Server server(options, handler);
  serve_while(server, *listener, std::chrono::seconds(1), body);
}

std::shared_ptr<Channel> channel_to(std::uint16_t port, ChannelOptions options = {}) {
  return Channel::create("127.0.0.1:" + std::to_string(port), std::move(options));
}

class GrpcClient : public ::testing::TestWithParam<int> {};

TEST_P(GrpcClient, UnaryCarriesMessageAndMetadataBothWays) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    ctx.add_metadata("x-user", "ada");
    ctx.add_metadata("x-blob-bin", std::string("\x00\xff\x10", 3));
    echo::EchoRequest req;
    req.set_message("hello");
    echo::EchoResponse resp;
    Status status = stub.Unary(ctx, req, &resp);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(resp.message(), "hello");
    EXPECT_EQ(resp.metadata().at("x-user"), "ada");
    EXPECT_EQ(resp.metadata().at("x-blob-bin"), std::string("\x00\xff\x10", 3));
    EXPECT_EQ(resp.deadline_ms(), -1);  // no deadline set: no grpc-timeout sent
    EXPECT_EQ(ctx.initial_metadata().get("x-initial"), "hello");
    EXPECT_EQ(ctx.trailing_metadata().get("x-trailing-bin"), std::string("\x00\x01\xfe\xff", 4));
  });
}

TEST_P(GrpcClient, StatusMessageAndDetailsArriveIntact) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    echo::EchoRequest req;
    req.set_status_code(static_cast<int>(StatusCode::not_found));
    const std::string message = "no such user: \xc3\xa9t\xc3\xa9 100% \n\t sure";
    req.set_status_message(message);
    echo::EchoResponse resp;
    Status status = stub.Unary(ctx, req, &resp);
    EXPECT_EQ(status.code(), StatusCode::not_found);
    EXPECT_EQ(status.message(), message);
    EXPECT_EQ(status.details(), "details:" + message);
  });
}

TEST_P(GrpcClient, ServerStreamDeliversEveryMessageInOrder) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    echo::EchoRequest req;
    req.set_message("tick");
    req.set_count(50);
    auto reader = stub.ServerStream(ctx, req);
    echo::EchoResponse resp;
    int n = 0;
    while (reader->read(&resp)) {
      EXPECT_EQ(resp.index(), n);
      EXPECT_EQ(resp.message(), "tick");
      ++n;
    }
    Status status = reader->finish();
    EXPECT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(n, 50);
  });
}

TEST_P(GrpcClient, ClientStreamJoinsWhatWasWritten) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    echo::EchoResponse resp;
    auto writer = stub.ClientStream(ctx, &resp);
    for (const char* part : {"a", "b", "c", "d"}) {
      echo::EchoRequest req;
      req.set_message(part);
      ASSERT_TRUE(writer->write(req));
    }
    Status status = writer->finish();
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(resp.message(), "abcd");
    EXPECT_EQ(resp.index(), 4);
  });
}

TEST_P(GrpcClient, BidiReadsAndWritesFromTwoGoroutines) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    auto stream = stub.Bidi(ctx);
    constexpr int kMessages = 200;
    WaitGroup writer;
    writer.add(1);
    go([&] {
      for (int i = 0; i < kMessages; ++i) {
        echo::EchoRequest req;
        req.set_message("m" + std::to_string(i));
        if (!stream->write(req)) break;
      }
      stream->writes_done();
      writer.done();
    });
    echo::EchoResponse resp;
    int n = 0;
    while (stream->read(&resp)) {
      EXPECT_EQ(resp.message(), "m" + std::to_string(n));
      ++n;
    }
    writer.wait();
    Status status = stream->finish();
    EXPECT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(n, kMessages);
  });
}

TEST_P(GrpcClient, DeadlineIsSentAndEndsASlowCall) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    {
      ClientContext ctx;
      ctx.set_timeout(std::chrono::seconds(5));
      echo::EchoRequest req;
      echo::EchoResponse resp;
      ASSERT_TRUE(stub.Unary(ctx, req, &resp).ok());
      // The server saw grpc-timeout: a deadline a little under 5 s away.
      EXPECT_GT(resp.deadline_ms(), 4000);
      EXPECT_LE(resp.deadline_ms(), 5000);
    }
    ClientContext ctx;
    ctx.set_timeout(milliseconds(150));
    echo::EchoRequest req;
    req.set_delay_ms(5000);
    echo::EchoResponse resp;
    const auto start = Clock::now();
    Status status = stub.Unary(ctx, req, &resp);
    EXPECT_EQ(status.code(), StatusCode::deadline_exceeded) << status.to_string();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  });
}

TEST_P(GrpcClient, DeadlinePropagatesFromAnIncomingCallToTheCallItMakes) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    {
      // Relay calls Unary with a ClientContext whose parent is its ServerContext's
      // context: the inner call carries what is left of the outer deadline.
      ClientContext ctx;
      ctx.set_timeout(milliseconds(800));
      echo::EchoRequest req;
      req.set_relay_port(port);
      echo::EchoResponse resp;
      Status status = stub.Relay(ctx, req, &resp);
      ASSERT_TRUE(status.ok()) << status.to_string();
      EXPECT_GT(resp.deadline_ms(), 0);
      EXPECT_LE(resp.deadline_ms(), 800);
    }
    // A parent context's deadline bounds a call that sets none of its own.
    auto [parent, cancel] = with_timeout(Context(), milliseconds(200));
    ClientContext ctx(parent);
    ctx.set_timeout(std::chrono::seconds(30));  // the parent's is earlier: it wins
    ASSERT_TRUE(ctx.deadline().has_value());
    EXPECT_EQ(*ctx.deadline(), *parent.deadline());
    echo::EchoRequest req;
    req.set_relay_port(port);
    req.set_delay_ms(5000);
    echo::EchoResponse resp;
    const auto start = Clock::now();
    Status status = stub.Relay(ctx, req, &resp);
    EXPECT_EQ(status.code(), StatusCode::deadline_exceeded) << status.to_string();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
    cancel();
  });
}

TEST_P(GrpcClient, CancelEndsAStreamCancelled) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    echo::EchoRequest req;
    req.set_count(1000);
    req.set_delay_ms(20);
    auto reader = stub.ServerStream(ctx, req);
    echo::EchoResponse resp;
    ASSERT_TRUE(reader->read(&resp));
    go([&ctx] {
      goro::sleep(milliseconds(30));
      ctx.cancel();
    });
    const auto start = Clock::now();
    while (reader->read(&resp)) {
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
    EXPECT_EQ(reader->finish().code(), StatusCode::cancelled);
    // The channel goes on serving calls.
    ClientContext next;
    echo::EchoRequest ping;
    ping.set_message("after");
    ASSERT_TRUE(stub.Unary(next, ping, &resp).ok());
    EXPECT_EQ(resp.message(), "after");
  });
}

TEST_P(GrpcClient, CancelledParentEndsTheCallBeforeItStarts) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    auto [parent, cancel] = with_cancel(Context());
    cancel();
    ClientContext ctx(parent);
    echo::EchoRequest req;
    echo::EchoResponse resp;
    EXPECT_EQ(stub.Unary(ctx, req, &resp).code(), StatusCode::cancelled);
  });
}

TEST_P(GrpcClient, GzipBothWays) {
  with_server(GetParam(), [](std::uint16_t port) {
    ChannelOptions options;
    options.compression = Compression::gzip;
    echo::Echo::Stub stub(channel_to(port, options));
    ClientContext ctx;
    echo::EchoRequest req;
    req.set_payload(std::string(100000, 'z'));
    req.set_response_size(200000);  // the server answers gzip-compressed
    echo::EchoResponse resp;
    Status status = stub.Unary(ctx, req, &resp);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(resp.index(), 100000);
    EXPECT_EQ(resp.payload(), std::string(200000, 'r'));
  });
}

TEST_P(GrpcClient, MessageSizeLimitsGiveResourceExhausted) {
  with_server(GetParam(), [](std::uint16_t port) {
    ChannelOptions options;
    options.max_receive_message_size = 1000;
    options.max_send_message_size = 1000;
    echo::Echo::Stub stub(channel_to(port, options));
    {
      ClientContext ctx;
      echo::EchoRequest req;
      req.set_payload(std::string(5000, 'p'));
      echo::EchoResponse resp;
      EXPECT_EQ(stub.Unary(ctx, req, &resp).code(), StatusCode::resource_exhausted);
    }
    {
      // A fresh channel: ChannelGoesOnAfterACallItResetAtOnce is about the one above.
      echo::Echo::Stub fresh(channel_to(port, options));
      ClientContext ctx;
      ctx.set_compression(Compression::identity);
      echo::EchoRequest req;
      req.set_response_size(5000);
      echo::EchoResponse resp;
      Status s = fresh.Unary(ctx, req, &resp);
      EXPECT_EQ(s.code(), StatusCode::resource_exhausted) << s.to_string();
    }
    ClientContext ctx;
    echo::EchoRequest req;
    req.set_message("small");
    echo::EchoResponse resp;
    EXPECT_TRUE(stub.Unary(ctx, req, &resp).ok());
  });
}

// A call that fails before sending its message (here: too large to send) resets its
// stream right after the request headers; the next call on the channel must not suffer.
TEST_P(GrpcClient, ChannelGoesOnAfterACallItResetAtOnce) {
  with_server(GetParam(), [](std::uint16_t port) {
    ChannelOptions options;
    options.max_send_message_size = 1000;
    echo::Echo::Stub stub(channel_to(port, options));
    for (int i = 0; i < 3; ++i) {
      ClientContext big_ctx;
      echo::EchoRequest big;
      big.set_payload(std::string(5000, 'p'));
      echo::EchoResponse resp;
      EXPECT_EQ(stub.Unary(big_ctx, big, &resp).code(), StatusCode::resource_exhausted);
      ClientContext ctx;
      echo::EchoRequest req;
      req.set_message("next");
      Status status = stub.Unary(ctx, req, &resp);
      EXPECT_TRUE(status.ok()) << "call after a reset one: " << status.to_string();
    }
  });
}

TEST_P(GrpcClient, UnknownServiceIsUnimplemented) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Unserved::Stub stub(channel_to(port));
    ClientContext ctx;
    google::protobuf::Empty req, resp;
    EXPECT_EQ(stub.Missing(ctx, req, &resp).code(), StatusCode::unimplemented);
  });
}

TEST_P(GrpcClient, InterceptorsAddMetadataRefuseCallsAndSeeStatuses) {
  with_server(GetParam(), [](std::uint16_t port) {
    std::atomic<int> not_found_seen{0};
    ChannelOptions options;
    options.interceptors.push_back(
        [&](ClientContext& ctx, const MethodInfo& method, const std::function<Status()>& next) {
          ctx.add_metadata("x-method", std::string(method.full_name));
          Status status = next();
          if (status.code() == StatusCode::not_found) not_found_seen.fetch_add(1);
          return status;
        });
    options.interceptors.push_back(
        [](ClientContext& ctx, const MethodInfo&, const std::function<Status()>& next) {
          if (ctx.metadata().get("x-refuse") == "yes") {
            return Status(StatusCode::permission_denied, "refused by the interceptor");
          }
          return next();
        });
    echo::Echo::Stub stub(channel_to(port, options));
    {
      ClientContext ctx;
      echo::EchoRequest req;
      req.set_status_code(static_cast<int>(StatusCode::not_found));
      echo::EchoResponse resp;
      EXPECT_EQ(stub.Unary(ctx, req, &resp).code(), StatusCode::not_found);
      EXPECT_EQ(not_found_seen.load(), 1);
    }
    {
      ClientContext ctx;
      echo::EchoRequest req;
      echo::EchoResponse resp;
      ASSERT_TRUE(stub.Unary(ctx, req, &resp).ok());
      EXPECT_EQ(resp.metadata().at("x-method"), "/goro.test.client.v1.Echo/Unary");
    }
    {
      ClientContext ctx;
      ctx.add_metadata("x-refuse", "yes");
      echo::EchoRequest req;
      req.set_count(3);
      auto reader = stub.ServerStream(ctx, req);
      echo::EchoResponse resp;
      EXPECT_FALSE(reader->read(&resp));
      EXPECT_EQ(reader->finish().code(), StatusCode::permission_denied);
    }
  });
}

TEST_P(GrpcClient, BadMetadataIsRefusedBeforeSending) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    ClientContext ctx;
    ctx.add_metadata("x-bad", "line\nbreak");
    echo::EchoRequest req;
    echo::EchoResponse resp;
    Status status = stub.Unary(ctx, req, &resp);
    EXPECT_EQ(status.code(), StatusCode::internal);
    EXPECT_NE(status.message().find("x-bad"), std::string::npos) << status.message();
  });
}

TEST_P(GrpcClient, NoServerIsUnavailable) {
  goro::run(
      [] {
        // A port that was just free: nothing listens there.
        std::uint16_t port;
        {
          Result<net::Listener> l = net::listen("tcp", "127.0.0.1:0");
          ASSERT_TRUE(l);
          port = l->addr().port();
        }
        echo::Echo::Stub stub(channel_to(port));
        ClientContext ctx;
        echo::EchoRequest req;
        echo::EchoResponse resp;
        EXPECT_EQ(stub.Unary(ctx, req, &resp).code(), StatusCode::unavailable);
      },
      goro::Config{.maxprocs = GetParam()});
}

TEST_P(GrpcClient, ManyGoroutinesShareOneChannel) {
  with_server(GetParam(), [](std::uint16_t port) {
    echo::Echo::Stub stub(channel_to(port));
    constexpr int kCallers = 100, kCalls = 20;
    std::atomic<int> ok{0};
    WaitGroup wg;
    wg.add(kCallers);
    for (int c = 0; c < kCallers; ++c) {
      go([&, c] {
        for (int i = 0; i < kCalls; ++i) {
          ClientContext ctx;
          ctx.set_timeout(std::chrono::seconds(10));
          echo::EchoRequest req;
          req.set_message(std::to_string(c) + "/" + std::to_string(i));
          echo::EchoResponse resp;
          if (stub.Unary(ctx, req, &resp).ok() && resp.message() == req.message()) ok.fetch_add(1);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), kCallers * kCalls);
  });
}

// A server that is not gRPC, or answers with trailers only: x-answer says how.
void answer(http::Request& req, http::ResponseWriter& w) {
  const std::string_view how = req.header("x-answer");
  if (how == "trailers-only") {
    w.header().set("content-type", "application/grpc");
    w.header().set("grpc-status", "7");
    w.header().set("grpc-message", "go away %F0%9F%99%82");
    w.header().set("x-why", "testing");
    w.set_status(200);
    w.flush();
    return;
  }
  if (how == "html") {
    w.header().set("content-type", "text/html");
    w.write("<html>not grpc</html>");
    return;
  }
  w.text("no", how == "404" ? 404 : how == "429" ? 429 : how == "401" ? 401 : 503);
}

TEST_P(GrpcClient, NonGrpcAnswersMapAsTheSpecSays) {
  goro::run(
      [] {
        serve_h2c(answer, [&](std::uint16_t port) {
          echo::Echo::Stub stub(channel_to(port));
          struct Case {
            const char* how;
            StatusCode want;
          };
          for (Case c :
               {Case{"404", StatusCode::unimplemented}, Case{"503", StatusCode::unavailable},
                Case{"429", StatusCode::unavailable}, Case{"401", StatusCode::unauthenticated},
                Case{"html", StatusCode::unknown},
                Case{"trailers-only", StatusCode::permission_denied}}) {
            ClientContext ctx;
            ctx.add_metadata("x-answer", c.how);
            echo::EchoRequest req;
            echo::EchoResponse resp;
            Status status = stub.Unary(ctx, req, &resp);
            EXPECT_EQ(status.code(), c.want) << c.how << ": " << status.to_string();
            if (std::string_view(c.how) == "trailers-only") {
              EXPECT_EQ(status.message(), "go away \xf0\x9f\x99\x82");
              EXPECT_EQ(ctx.trailing_metadata().get("x-why"), "testing");
            }
          }
        });
      },
      goro::Config{.maxprocs = GetParam()});
}

// grpc-timeout counts from the call's arrival (Request::received_at) when the server
// knows it: a call whose deadline passed while it waited to be served is answered
// DEADLINE_EXCEEDED without running its method, even one that would answer at once.
TEST_P(GrpcClient, ACallWhoseDeadlinePassedWhileItWaitedIsNotRun) {
  goro::run(
      [] {
        std::atomic<int> runs{0};
        EchoImpl echo;
        Server grpc_server(ServerOptions{.interceptors = {[&](ServerContext&, const MethodInfo&,
                                                              const std::function<Status()>& next) {
                                           runs.fetch_add(1);
                                           return next();
                                         }}});
        grpc_server.register_service(echo);
        http::Handler grpc_handler = grpc_server.handler();
        // As if the server had been too busy to get to the call: it arrived 500 ms ago.
        http::Handler waited = [&](http::Request& req, http::ResponseWriter& w) {
          if (req.header("x-waited") == "500ms") {
            req.set_received_at(Clock::now() - milliseconds(500));
          }
          grpc_handler(req, w);
        };
        serve_h2c(waited, [&](std::uint16_t port) {
          echo::Echo::Stub stub(channel_to(port));
          {
            ClientContext ctx;
            ctx.set_timeout(milliseconds(200));
            ctx.add_metadata("x-waited", "500ms");
            echo::EchoRequest req;
            echo::EchoResponse resp;
            Status status = stub.Unary(ctx, req, &resp);
            EXPECT_EQ(status.code(), StatusCode::deadline_exceeded) << status.to_string();
            EXPECT_EQ(runs.load(), 0) << "the method ran for a call already past its deadline";
          }
          {
            // Within its deadline after the same wait: served.
            ClientContext ctx;
            ctx.set_timeout(std::chrono::seconds(5));
            ctx.add_metadata("x-waited", "500ms");
            echo::EchoRequest req;
            echo::EchoResponse resp;
            Status status = stub.Unary(ctx, req, &resp);
            EXPECT_TRUE(status.ok()) << status.to_string();
            EXPECT_EQ(runs.load(), 1);
            EXPECT_LT(resp.deadline_ms(), 4600) << "the deadline counts from the arrival";
          }
        });
      },
      goro::Config{.maxprocs = GetParam()});
}

// A server that requires client certificates (TlsClientAuth::require): the identity of
// a client's certificate reaches the server's interceptors through ServerContext::tls();
// a client without one, or with one from another CA, is refused in the handshake.
TEST_P(GrpcClient, MutualTlsIdentityReachesServerInterceptors) {
  net::testing::TestPki pki;
  net::testing::TestPki other_pki;
  std::mutex mu;
  std::string seen;  // "<spiffe id> <common name> <verified>" of the last call
  goro::run(
      [&] {
        Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
        ASSERT_TRUE(listener) << listener.error().message();
        net::TlsConfig config;
        config.certificates.push_back(pki.leaf("server", {"localhost"}));
        config.alpn = {"h2"};
        config.client_auth = net::TlsClientAuth::require;
        config.client_ca_file = pki.ca_file();
        auto tls = net::TlsContext::server(config);
        ASSERT_TRUE(tls) << tls.error().message();
        net::TlsListener secure(std::move(*listener), *tls);
        ServerOptions options;
        options.interceptors.push_back(
            [&](ServerContext& ctx, const MethodInfo&, const std::function<Status()>& next) {
              const net::TlsConnectionState* state = ctx.tls();
              if (state == nullptr || !state->peer) {
                return Status(StatusCode::unauthenticated, "no client certificate");
              }
              std::lock_guard lock(mu);
              seen = (state->peer->uris.empty() ? "-" : state->peer->uris.front()) + " " +
                     state->peer->common_name + " " + (state->peer_verified ? "verified" : "no");
              return next();
            });
        EchoImpl echo;
        Server server(std::move(options));
        server.register_service(echo);
        serve_while(server, secure, std::chrono::seconds(2), [&](std::uint16_t port) {
          auto call = [&](std::optional<net::TlsCertificate> cert) {
            ChannelOptions o;
            o.tls = true;
            o.ca_file = pki.ca_file();
            o.server_name_override = "localhost";
            o.client_certificate = std::move(cert);
            o.connect_timeout = std::chrono::seconds(5);
            echo::Echo::Stub stub(channel_to(port, o));
            ClientContext ctx;
            ctx.set_timeout(std::chrono::seconds(5));
            echo::EchoRequest req;
            req.set_message("who am i");
            echo::EchoResponse resp;
            return stub.Unary(ctx, req, &resp);
          };
          Status ok = call(pki.client_leaf("alice", "alice", "URI:spiffe://example.org/ns/web/sa/api"));
          EXPECT_TRUE(ok.ok()) << ok.message();
          {
            std::lock_guard lock(mu);
            EXPECT_EQ(seen, "spiffe://example.org/ns/web/sa/api alice verified");
            seen.clear();
          }
          EXPECT_EQ(call(std::nullopt).code(), StatusCode::unavailable);
          EXPECT_EQ(call(other_pki.client_leaf("mallory", "mallory", "URI:spiffe://evil.example/x"))
                        .code(),
                    StatusCode::unavailable);
          {
            std::lock_guard lock(mu);
            EXPECT_EQ(seen, "") << "a refused client reached an interceptor";
          }
        });
      },
      goro::Config{.maxprocs = GetParam()});
}

INSTANTIATE_TEST_SUITE_P(Procs, GrpcClient, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace goro::grpc::test
