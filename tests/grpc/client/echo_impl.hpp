// goro.test.client.v1.Echo served by goro (the generated Service), for the client tests.
#pragma once

#include <chrono>
#include <string>

#include <goro/grpc/client.hpp>
#include <goro/grpc/server.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "goro/test/client/echo.goro.grpc.hpp"

namespace goro::grpc::test {

namespace echo = ::goro::test::client::v1;

class EchoImpl final : public echo::Echo::Service {
 public:
  Status Unary(ServerContext& ctx, const echo::EchoRequest& req, echo::EchoResponse* resp) override {
    if (req.delay_ms() > 0 && !pause(ctx, req.delay_ms())) return ended(ctx);
    describe(ctx, req, resp);
    return status_of(req);
  }

  Status ServerStream(ServerContext& ctx, const echo::EchoRequest& req,
                      ServerWriter<echo::EchoResponse>& writer) override {
    for (int i = 0; i < req.count(); ++i) {
      if (req.delay_ms() > 0 && !pause(ctx, req.delay_ms())) return ended(ctx);
      echo::EchoResponse resp;
      resp.set_message(req.message());
      resp.set_index(i);
      if (!writer.write(resp)) return Status(StatusCode::cancelled, "write failed");
    }
    return status_of(req);
  }

  Status ClientStream(ServerContext&, ServerReader<echo::EchoRequest>& reader,
                      echo::EchoResponse* resp) override {
    echo::EchoRequest req;
    std::string joined;
    int n = 0;
    while (reader.read(&req)) {
      joined += req.message();
      ++n;
    }
    resp->set_message(joined);
    resp->set_index(n);
    return {};
  }

  // Reads in a goroutine of its own while the handler writes.
  Status Bidi(ServerContext&,
              ServerReaderWriter<echo::EchoResponse, echo::EchoRequest>& stream) override {
    Chan<std::string> messages(4);
    WaitGroup reader;
    reader.add(1);
    go([&] {
      echo::EchoRequest req;
      while (stream.read(&req)) messages.send(req.message());
      messages.close();
      reader.done();
    });
    int i = 0;
    bool ok = true;
    while (std::optional<std::string> message = messages.recv()) {
      echo::EchoResponse resp;
      resp.set_message(*message);
      resp.set_index(i++);
      ok = ok && stream.write(resp);
    }
    reader.wait();
    return ok ? Status() : Status(StatusCode::cancelled, "write failed");
  }

  // Calls Unary on 127.0.0.1:relay_port under this call's context.
  Status Relay(ServerContext& ctx, const echo::EchoRequest& req, echo::EchoResponse* resp) override {
    auto channel = Channel::create("127.0.0.1:" + std::to_string(req.relay_port()));
    echo::Echo::Stub stub(channel);
    ClientContext out(ctx.context());
    echo::EchoRequest next = req;
    next.set_relay_port(0);
    return stub.Unary(out, next, resp);
  }

 private:
  // Sleeps ms unless the call ends first.
  static bool pause(ServerContext& ctx, int ms) {
    return !goro::sleep(std::chrono::milliseconds(ms), ctx.context());
  }
  static Status ended(ServerContext& ctx) {
    return ctx.context().err() == context_errc::deadline_exceeded
               ? Status(StatusCode::deadline_exceeded, "deadline passed while sleeping")
               : Status(StatusCode::cancelled, "cancelled while sleeping");
  }
  static Status status_of(const echo::EchoRequest& req) {
    return Status(static_cast<StatusCode>(req.status_code()), req.status_message(),
                  req.status_code() != 0 ? "details:" + req.status_message() : std::string());
  }
  static void describe(ServerContext& ctx, const echo::EchoRequest& req, echo::EchoResponse* resp) {
    resp->set_message(req.message());
    resp->set_payload(std::string(static_cast<std::size_t>(req.response_size()), 'r'));
    if (!req.payload().empty()) resp->set_index(static_cast<int>(req.payload().size()));
    for (http::HeaderField field : ctx.client_metadata()) {
      if (field.name.starts_with("x-")) {
        (*resp->mutable_metadata())[std::string(field.name)] = std::string(field.value);
      }
    }
    if (auto deadline = ctx.deadline()) {
      resp->set_deadline_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                *deadline - std::chrono::steady_clock::now())
                                .count());
    } else {
      resp->set_deadline_ms(-1);
    }
    ctx.add_initial_metadata("x-initial", "hello");
    ctx.add_trailing_metadata("x-trailing-bin", std::string("\x00\x01\xfe\xff", 4));
    if (req.response_size() > 0) ctx.set_compression(Compression::gzip);
  }
};

}  // namespace goro::grpc::test
