// goro.test.Echo (proto/goro/test/echo.proto), written by hand on Service::add_method as
// a user without protoc-gen-goro would: the four call kinds, statuses with details,
// metadata both ways, compression, deadlines and cancellation.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>

#include <goro/grpc/server.hpp>
#include <goro/grpc/service.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "goro/test/echo.pb.h"

namespace goro::grpc::test {

using ::goro::test::EchoReply;
using ::goro::test::EchoRequest;

// What an interceptor puts on the call's context and the handlers echo back.
inline constexpr ContextKey<std::string> kInterceptedKey("intercepted");

class EchoService final : public Service {
 public:
  EchoService() : Service("goro.test.Echo") {
    add_method("Unary", CallKind::unary, [this](ServerCall& call) {
      return serve_unary<EchoRequest, EchoReply>(
          call, [this](ServerContext& ctx, const EchoRequest& req, EchoReply* reply) {
            return unary(ctx, req, reply);
          });
    });
    add_method("ServerStream", CallKind::server_streaming, [this](ServerCall& call) {
      return serve_server_streaming<EchoRequest, EchoReply>(
          call, [this](ServerContext& ctx, const EchoRequest& req, ServerWriter<EchoReply>& w) {
            if (req.compress()) ctx.set_compression(Compression::gzip);
            if (ctx.client_metadata().has("x-echo")) {
              ctx.add_initial_metadata("x-echo-initial", ctx.client_metadata().get("x-echo"));
              if (w.send_initial_metadata()) return Status(StatusCode::cancelled, "headers failed");
            }
            for (int i = 0; i < req.count(); ++i) {
              if (req.sleep_ms() > 0 && !pause(ctx, req.sleep_ms()))
                return Status(StatusCode::cancelled, "cancelled");
              EchoReply reply;
              reply.set_text(req.text());
              reply.set_index(i);
              if (!w.write(reply)) return Status(StatusCode::cancelled, "write failed");
            }
            return status_of(req);
          });
    });
    add_method("ClientStream", CallKind::client_streaming, [](ServerCall& call) {
      return serve_client_streaming<EchoRequest, EchoReply>(
          call, [](ServerContext&, ServerReader<EchoRequest>& r, EchoReply* reply) {
            EchoRequest req;
            int n = 0;
            std::string all;
            while (r.read(&req)) {
              all += req.text();
              ++n;
            }
            reply->set_text(all);
            reply->set_index(n);
            return Status();
          });
    });
    // Reads in a goroutine of its own and writes in the handler's: each request is
    // answered as it comes, while the next is read.
    add_method("Bidi", CallKind::bidi_streaming, [](ServerCall& call) {
      return serve_bidi_streaming<EchoRequest, EchoReply>(
          call, [](ServerContext&, ServerReaderWriter<EchoReply, EchoRequest>& stream) {
            goro::Chan<EchoRequest> requests(1);
            goro::WaitGroup reader;
            reader.add(1);
            goro::go([&] {
              EchoRequest req;
              while (stream.read(&req)) requests.send(std::move(req));
              requests.close();
              reader.done();
            });
            int i = 0;
            bool ok = true;
            for (;;) {
              std::optional<EchoRequest> req = requests.recv();
              if (!req) break;
              EchoReply reply;
              reply.set_text(req->text());
              reply.set_index(i++);
              // A reply larger than the stream's window and write buffer parks this
              // writer on flow control while the reader is parked on the next request.
              if (req->count() > 0)
                reply.set_payload(std::string(static_cast<std::size_t>(req->count()), 'b'));
              if (ok && !stream.write(reply)) ok = false;
            }
            reader.wait();
            return ok ? Status() : Status(StatusCode::cancelled, "write failed");
          });
    });
    add_method("Throw", CallKind::unary, [](ServerCall& call) {
      return serve_unary<EchoRequest, EchoReply>(
          call, [](ServerContext&, const EchoRequest& req, EchoReply*) -> Status {
            throw std::runtime_error("boom: " + req.text());
          });
    });
    add_method("Cancelled", CallKind::unary, [this](ServerCall& call) {
      return serve_unary<EchoRequest, EchoReply>(
          call, [this](ServerContext&, const EchoRequest&, EchoReply* reply) {
            reply->set_index(cancelled_.load());
            return Status();
          });
    });
  }

  int cancelled_seen() const { return cancelled_.load(); }

 private:
  Status unary(ServerContext& ctx, const EchoRequest& req, EchoReply* reply) {
    if (req.sleep_ms() > 0 && !pause(ctx, req.sleep_ms())) {
      return ctx.context().err() == make_error_code(context_errc::deadline_exceeded)
                 ? Status(StatusCode::deadline_exceeded, "slept past the deadline")
                 : Status(StatusCode::cancelled, "cancelled");
    }
    if (req.compress()) ctx.set_compression(Compression::gzip);
    const Metadata& md = ctx.client_metadata();
    if (md.has("x-echo")) ctx.add_initial_metadata("x-echo-initial", md.get("x-echo"));
    if (md.has("x-data-bin"))
      ctx.add_trailing_metadata("x-data-trailing-bin", md.get("x-data-bin"));
    if (const std::string* v = ctx.context().value(kInterceptedKey))
      ctx.add_initial_metadata("x-intercepted", *v);
    if (ctx.deadline()) ctx.add_initial_metadata("x-has-deadline", "1");
    reply->set_text(req.text());
    reply->set_index(static_cast<int>(req.payload().size()));
    if (req.count() > 0)
      reply->set_payload(std::string(static_cast<std::size_t>(req.count()), 'p'));
    return status_of(req);
  }

  static Status status_of(const EchoRequest& req) {
    if (req.status_code() == 0) return Status();
    return Status(static_cast<StatusCode>(req.status_code()), req.status_message(),
                  std::string("details\0\xff", 9) + req.status_message());
  }

  // Sleeps ms unless the call's context ends first (then counts it, false).
  bool pause(ServerContext& ctx, int ms) {
    if (goro::sleep(std::chrono::milliseconds(ms), ctx.context())) {
      cancelled_.fetch_add(1);
      return false;
    }
    return true;
  }

  std::atomic<int> cancelled_{0};
};

}  // namespace goro::grpc::test
