// goro::grpc::Server — gRPC calls served as http::Handler requests (server.hpp).
//
// A gRPC call is an HTTP/2 request (PROTOCOL-HTTP2.md): POST to /service/method with
// content-type application/grpc, a body of length-prefixed messages, and a response of
// headers, messages and trailers that carry grpc-status. http::Server already runs each
// HTTP/2 stream's handler in a goroutine of its own, with flow control in the stream's
// body reads and response writes, so a call is simply that handler running:
//
//   handle()       checks the request (POST, content-type: else HTTP 405/415), finds the
//                  method (else UNIMPLEMENTED), makes the call's Context from the request's
//                  (cancelled by RST_STREAM and the connection's end) with grpc-timeout's
//                  deadline, runs the interceptors and the method on a ServerCallImpl,
//                  and ends the response with the status;
//   read()         fills a MessageDecoder from the request body (one copy, into the
//                  decoder's buffer) and parses each message from it in place;
//   write()        serializes the message straight after its 5-byte prefix in a reused
//                  buffer and hands that to the ResponseWriter; a unary response is not
//                  flushed, so head, message and trailers leave together when the handler
//                  returns; a streamed one is flushed per message.
//
// The reading side (request body, decoder) and the writing side (response writer,
// headers) of one call share nothing, so a bidirectional handler may read in one
// goroutine and write in another (h2/stream.cpp keeps their wake-ups apart).
//
// A call that sent no message ends Trailers-Only: one HEADERS frame with the status. A
// failed read or write records its status; it becomes the call's status unless the
// handler returns a failure of its own.
#include <goro/grpc/server.hpp>

#include <google/protobuf/message_lite.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <limits>
#include <map>
#include <mutex>

#include <goro/grpc/health.hpp>
#include <goro/grpc/service.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/scheduler/mutex.hpp>

#include "builtin_services.hpp"
#include "wire/wire.hpp"

namespace goro::grpc {

Status detail::missing_request_status() {
  return Status(StatusCode::internal, "grpc: the client sent no request message");
}

namespace {

constexpr std::size_t kMinRead = 512;
constexpr std::size_t kMaxRead = 64 * 1024;

Status deadline_exceeded_status() {
  return Status(StatusCode::deadline_exceeded, "grpc: deadline exceeded");
}

class ServerCallImpl final : public ServerCall, public ServerContext {
 public:
  ServerCallImpl(const ServerOptions& options, const Service::Method& method, http::Request& req,
                 http::ResponseWriter& w)
      : options_(options),
        method_(method),
        req_(req),
        w_(w),
        decoder_(options.max_receive_message_size) {}

  // Reads the request's protocol fields; a status to end the call with at once, or OK.
  Status begin() {
    // First: a call ended here at once is answered Trailers-Only, which needs it too (a
    // client takes a gRPC response without it for an HTTP error: grpc-go said UNKNOWN,
    // "missing content-type field", to a call whose deadline had passed on arrival).
    w_.header().set("content-type", "application/grpc");
    const std::string_view timeout = req_.header("grpc-timeout");
    if (!timeout.empty()) {
      std::optional<std::chrono::nanoseconds> d = wire::parse_timeout(timeout);
      if (!d)
        return Status(StatusCode::internal,
                      "grpc: malformed grpc-timeout: " + std::string(timeout));
      // Counted from the call's arrival when the server knows it: a call that waited
      // past its deadline before reaching here is not worth running.
      const auto arrived = req_.received_at();
      deadline_ = (arrived.time_since_epoch().count() != 0 ? arrived
                                                           : std::chrono::steady_clock::now()) +
                  *d;
      if (past_deadline()) return deadline_exceeded_status();
    }
    // A unary handler that never asks for its context costs no context; a streaming one
    // may ask from two goroutines at once, so it gets one now.
    if (method_.kind != CallKind::unary) make_context();
    request_encoding_ = req_.header("grpc-encoding");
    accept_encoding_ = req_.header("grpc-accept-encoding");
    // What this server inflates, told to a client that compresses (the protocol makes it
    // optional; the others are spared a header on every response).
    if (!request_encoding_.empty() && request_encoding_ != "identity")
      w_.header().set("grpc-accept-encoding", wire::kAcceptEncoding);
    return {};
  }

  ~ServerCallImpl() override { cancel_(); }

  // ServerCall
  ServerContext& context() override { return *this; }

  bool read(google::protobuf::MessageLite& msg) override {
    if (!read_status_.ok() || read_done_) return false;
    wire::MessageDecoder::Message m;
    for (;;) {
      const auto r = decoder_.next(m);
      if (r == wire::MessageDecoder::Result::message) break;
      if (r == wire::MessageDecoder::Result::error) return fail_read(decoder_.error());
      // As much as the message being read still needs, within bounds: a small request
      // costs a small buffer.
      const std::size_t chunk = std::clamp(decoder_.wanted(), kMinRead, kMaxRead);
      char* buf = decoder_.prepare(chunk);
      Result<std::size_t> n = req_.read(buf, chunk);
      if (!n) {
        return fail_read(failure_status("reading the request failed: " + n.error().message()));
      }
      if (*n == 0) {
        read_done_ = true;
        if (Status s = decoder_.finish(); !s.ok()) return fail_read(std::move(s));
        return false;
      }
      decoder_.commit(*n);
    }
    if (Status s = wire::parse_message(m, request_encoding_, options_.max_receive_message_size,
                                       scratch_, msg);
        !s.ok()) {
      return fail_read(std::move(s));
    }
    return true;
  }

  bool write(const google::protobuf::MessageLite& msg) override {
    if (!write_status_.ok()) return false;
    const std::size_t size = msg.ByteSizeLong();
    if (size > options_.max_send_message_size) {
      write_status_ = Status(StatusCode::resource_exhausted,
                             "grpc: response message larger than max (" + std::to_string(size) +
                                 " vs. " + std::to_string(options_.max_send_message_size) + ")");
      return false;
    }
    const bool compress = response_compression_ != Compression::identity;
    if (!headers_sent_) {
      add_initial_to_headers();
      if (compress) w_.header().set("grpc-encoding", wire::encoding_name(response_compression_));
      headers_sent_ = true;
    }
    if (!compress) {
      frame_.resize(wire::kMessageHeaderSize + size);
      wire::write_message_header(frame_.data(), false, static_cast<std::uint32_t>(size));
      msg.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(frame_.data()) +
                                          wire::kMessageHeaderSize);
    } else {
      scratch_out_.resize(size);
      msg.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(scratch_out_.data()));
      frame_.resize(wire::kMessageHeaderSize);
      wire::compress(response_compression_, scratch_out_, frame_);
      wire::write_message_header(
          frame_.data(), true,
          static_cast<std::uint32_t>(frame_.size() - wire::kMessageHeaderSize));
    }
    message_sent_ = true;
    std::error_code ec = w_.write(frame_);
    if (!ec && streamed()) ec = w_.flush();
    if (ec) {
      write_status_ = failure_status("writing the response failed: " + ec.message());
      return false;
    }
    return true;
  }

  // ServerContext
  const Context& context() const override {
    if (!ctx_ready_) make_context();
    return ctx_;
  }
  void set_context(Context ctx) override {
    ctx_ = std::move(ctx);
    ctx_ready_ = true;
  }
  const Metadata& client_metadata() const override {
    if (!metadata_ready_) {
      for (const http::HeaderField& f : req_.headers()) {
        if (wire::is_reserved_header(f.name)) continue;
        if (wire::is_binary_key(f.name)) {
          // A value that is not base64 is dropped: it cannot be what the client meant.
          if (std::optional<std::string> bytes = wire::base64_decode(f.value))
            metadata_.add(f.name, *bytes);
        } else {
          metadata_.add(f.name, f.value);
        }
      }
      metadata_ready_ = true;
    }
    return metadata_;
  }
  void add_initial_metadata(std::string_view key, std::string_view value) override {
    initial_.add(key, value);
  }
  void add_trailing_metadata(std::string_view key, std::string_view value) override {
    trailing_.add(key, value);
  }
  std::error_code send_initial_metadata() override {
    if (!headers_sent_) {
      add_initial_to_headers();
      if (response_compression_ != Compression::identity)
        w_.header().set("grpc-encoding", wire::encoding_name(response_compression_));
      headers_sent_ = true;
    }
    return w_.flush();
  }
  std::string_view method() const override { return method_.full_name; }
  std::string_view peer() const override { return req_.remote_addr(); }
  const net::TlsConnectionState* tls() const override { return req_.tls(); }
  std::optional<std::chrono::steady_clock::time_point> deadline() const override {
    return deadline_;
  }
  void set_compression(Compression algorithm) override {
    if (headers_sent_) return;
    if (algorithm == Compression::identity || wire::accepts_encoding(accept_encoding_, algorithm))
      response_compression_ = algorithm;
  }

  // The status the call ends with, given the handler's.
  Status final_status(Status handler_status) const {
    // A handler that gives up after a failed read or write (false) says CANCELLED or,
    // through the adapters, that the request was missing; the recorded cause is truer.
    const bool handler_failed = !handler_status.ok() &&
                                handler_status.code() != StatusCode::cancelled &&
                                handler_status != detail::missing_request_status();
    if (!handler_failed) {
      if (!read_status_.ok()) return read_status_;
      if (!write_status_.ok()) return write_status_;
    }
    if (handler_status.ok() && past_deadline()) return deadline_exceeded_status();
    return handler_status;
  }

  // Ends the response with status: Trailers-Only when no message went out, else trailers.
  void finish(const Status& status) {
    http::Headers* fields;
    if (!message_sent_ && !headers_sent_) {
      add_initial_to_headers();
      fields = &w_.header();
    } else {
      fields = http::ResponseController(w_).trailer();
      if (fields == nullptr) return;
    }
    char code[12];
    const auto n =
        std::to_chars(code, code + sizeof code, static_cast<int>(status.code())).ptr - code;
    fields->set("grpc-status", std::string_view(code, static_cast<std::size_t>(n)));
    if (!status.message().empty())
      fields->set("grpc-message", wire::percent_encode(status.message()));
    if (!status.details().empty())
      fields->set("grpc-status-details-bin", wire::base64_encode(status.details()));
    add_metadata(*fields, trailing_);
  }

 private:
  bool streamed() const {
    return method_.kind == CallKind::server_streaming || method_.kind == CallKind::bidi_streaming;
  }
  // The request's context (cancelled by the client's RST_STREAM, the connection's end),
  // with grpc-timeout's deadline.
  void make_context() const {
    Context ctx = req_.context();
    if (deadline_) {
      auto [derived, cancel] = with_deadline(ctx, *deadline_);
      ctx = std::move(derived);
      cancel_ = std::move(cancel);
    }
    ctx_ = std::move(ctx);
    ctx_ready_ = true;
  }
  bool past_deadline() const { return deadline_ && std::chrono::steady_clock::now() >= *deadline_; }
  // The status of a call whose stream failed under a read or write: its deadline passed,
  // or the client went away.
  Status failure_status(const std::string& what) const {
    if (past_deadline()) return deadline_exceeded_status();
    return Status(StatusCode::cancelled, "grpc: " + what);
  }
  bool fail_read(Status status) {
    if (read_status_.ok()) read_status_ = std::move(status);
    return false;
  }
  void add_initial_to_headers() { add_metadata(w_.header(), initial_); }
  static void add_metadata(http::Headers& out, const Metadata& md) {
    for (http::HeaderField f : md) {
      if (wire::is_binary_key(f.name))
        out.add(f.name, wire::base64_encode(f.value));
      else
        out.add(f.name, f.value);
    }
  }

  const ServerOptions& options_;
  const Service::Method& method_;
  http::Request& req_;
  http::ResponseWriter& w_;
  mutable Context ctx_;
  mutable CancelFunc cancel_;
  mutable bool ctx_ready_ = false;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::string_view accept_encoding_;

  // The reading side.
  wire::MessageDecoder decoder_;
  std::string scratch_;                // a decompressed request message
  std::string_view request_encoding_;  // the client's grpc-encoding
  bool read_done_ = false;
  Status read_status_;
  mutable Metadata metadata_;
  mutable bool metadata_ready_ = false;

  // The writing side.
  std::string frame_;        // the prefix and message being written, reused
  std::string scratch_out_;  // a response message before compression
  Compression response_compression_ = Compression::identity;
  bool headers_sent_ = false;  // their fields are final (the initial metadata added)
  bool message_sent_ = false;
  Status write_status_;
  Metadata initial_, trailing_;
};

// Answers a request that is no call of ours with a status alone (Trailers-Only).
void reply_status(http::ResponseWriter& w, StatusCode code, std::string_view message) {
  w.header().set("content-type", "application/grpc");
  char text[12];
  const auto n = std::to_chars(text, text + sizeof text, static_cast<int>(code)).ptr - text;
  w.header().set("grpc-status", std::string_view(text, static_cast<std::size_t>(n)));
  w.header().set("grpc-message", wire::percent_encode(message));
}

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  ServerOptions options;
  std::vector<std::string> service_names;  // for reflection's list_services
  // Methods by full name ("/pkg.S/M"), transparent so a request's path finds one without
  // a string.
  std::map<std::string, const Service::Method*, std::less<>> methods;
  HealthService health;
  std::vector<std::unique_ptr<Service>> builtin;
  bool builtin_added = false;

  goro::Mutex mu;
  std::shared_ptr<http::Server> http;  // guarded by mu; made by the first serve()
  bool shut_down = false;              // guarded by mu

  void add(Service& service) {
    service_names.push_back(service.full_name());
    for (const Service::Method& m : service.methods()) methods.emplace(m.full_name, &m);
  }

  void add_builtin() {
    if (builtin_added) return;
    builtin_added = true;
    if (options.health) builtin.push_back(detail::make_health_service(health));
    if (options.reflection) {
      builtin.push_back(detail::make_reflection_service(false, &service_names));
      builtin.push_back(detail::make_reflection_service(true, &service_names));
    }
    for (auto& s : builtin) add(*s);
  }

  Status run_interceptors(ServerCallImpl& call, const MethodInfo& info, const Service::Method& m,
                          std::size_t i) {
    if (i == options.interceptors.size()) return m.handler(call);
    return options.interceptors[i](call, info,
                                   [&]() { return run_interceptors(call, info, m, i + 1); });
  }

  void handle(http::Request& req, http::ResponseWriter& w) {
    if (req.method() != "POST") {
      w.header().set("Allow", "POST");
      w.text("gRPC requires POST\n", 405);
      return;
    }
    if (req.version_major() != 2) {
      w.text("gRPC requires HTTP/2\n", 505);
      return;
    }
    if (!wire::is_grpc_content_type(req.header("content-type"))) {
      w.text("gRPC requires content-type application/grpc\n", 415);
      return;
    }
    const std::string_view path = req.path();
    auto it = methods.find(path);
    if (it == methods.end()) {
      const std::size_t slash = path.size() > 1 ? path.find('/', 1) : std::string_view::npos;
      const std::string_view service = slash == std::string_view::npos
                                           ? path.substr(std::min<std::size_t>(1, path.size()))
                                           : path.substr(1, slash - 1);
      const bool known =
          std::find(service_names.begin(), service_names.end(), service) != service_names.end();
      reply_status(w, StatusCode::unimplemented,
                   known ? "unknown method " + std::string(path.substr(slash + 1)) +
                               " for service " + std::string(service)
                         : "unknown service " + std::string(service));
      return;
    }
    const Service::Method& method = *it->second;
    ServerCallImpl call(options, method, req, w);
    Status status = call.begin();
    if (status.ok()) {
      const MethodInfo info{method.full_name, method.kind};
      try {
        status = options.interceptors.empty() ? method.handler(call)
                                              : run_interceptors(call, info, method, 0);
      } catch (const std::exception& e) {
        status = Status(StatusCode::unknown, std::string("grpc: the handler threw: ") + e.what());
      } catch (...) {
        status = Status(StatusCode::unknown, "grpc: the handler threw");
      }
      status = call.final_status(std::move(status));
    }
    call.finish(status);
  }
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->health.set_serving("", ServingStatus::serving);
}

Server::~Server() = default;

void Server::register_service(Service& service) { impl_->add(service); }

http::Handler Server::handler() {
  impl_->add_builtin();
  Impl* impl = impl_.get();
  return [impl](http::Request& req, http::ResponseWriter& w) { impl->handle(req, w); };
}

HealthService& Server::health() { return impl_->health; }

const ServerOptions& Server::options() const { return impl_->options; }

namespace {

// The HTTP server under serve(): HTTP/2 both ways, and no limit on a request body, since
// a stream of messages is a call's body (ServerOptions limits each message instead).
http::ServerOptions http_options(const ServerOptions& options) {
  http::ServerOptions o = options.http;
  o.enable_http2 = true;
  o.enable_h2c = true;
  o.max_body_bytes = std::numeric_limits<std::uint64_t>::max();
  return o;
}

}  // namespace

template <class L>
static std::error_code serve_on(Server& server, Server::Impl& impl, L& listener) {
  std::shared_ptr<http::Server> http;
  {
    std::lock_guard lock(impl.mu);
    if (impl.shut_down) return make_error_code(http::errc::server_closed);
    if (!impl.http)
      impl.http = std::make_shared<http::Server>(http_options(impl.options), server.handler());
    http = impl.http;
  }
  return http->serve(listener);
}

std::error_code Server::serve(net::Listener& listener) { return serve_on(*this, *impl_, listener); }
std::error_code Server::serve(net::TlsListener& listener) {
  return serve_on(*this, *impl_, listener);
}

std::error_code Server::shutdown(std::chrono::steady_clock::time_point deadline) {
  std::shared_ptr<http::Server> http;
  {
    std::lock_guard lock(impl_->mu);
    impl_->shut_down = true;
    http = impl_->http;
  }
  impl_->health.shutdown();
  if (!http) return {};
  return http->shutdown(deadline);
}

}  // namespace goro::grpc
