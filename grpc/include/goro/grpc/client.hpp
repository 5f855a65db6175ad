// goro::grpc client: a Channel to a server, and the stubs protoc-gen-goro generates on it.
//
//   auto channel = goro::grpc::Channel::create("127.0.0.1:50051");   // h2c
//   helloworld::Greeter::Stub stub(channel);
//   goro::grpc::ClientContext ctx(req.context());   // deadline and cancellation flow in
//   ctx.set_timeout(std::chrono::milliseconds(200));
//   helloworld::HelloReply reply;
//   goro::grpc::Status s = stub.SayHello(ctx, request, &reply);   // parks, never blocks a thread
//
// A Channel is one HTTP/2 connection per server (http::Client underneath: a second one
// when the server's MAX_CONCURRENT_STREAMS is reached, a new one after GOAWAY), shared by
// every goroutine that calls through it. Streaming calls return a reader, a writer or
// both; one goroutine may read while another writes.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/grpc/call.hpp>
#include <goro/grpc/metadata.hpp>
#include <goro/grpc/status.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/context.hpp>

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace goro::grpc {

class ClientContext;

// Wraps every call made through a channel (the first outermost): it may add metadata,
// refuse the call, and see the status. For a unary call next() makes the call and
// returns its status; for a streaming call next() opens the stream and returns OK (or
// the failure to open it), and on_finish, if set, is called with the final status.
using ClientInterceptor = std::function<Status(ClientContext& ctx, const MethodInfo& method,
                                               const std::function<Status()>& next)>;

struct ChannelOptions {
  // TLS with ALPN h2 (else h2c, HTTP/2 with prior knowledge).
  bool tls = false;
  // TLS: PEM file of trusted CAs (empty: the system's); the name to verify and to send
  // as SNI and :authority instead of the target's host (grpc's server_host_override).
  std::string ca_file{};
  std::string server_name_override{};
  // TLS: the certificate and key presented when the server asks for one (mutual TLS).
  std::optional<net::TlsCertificate> client_certificate{};
  // Largest response message accepted (after decompression); past it the call ends
  // with RESOURCE_EXHAUSTED. Largest request message sent, likewise.
  std::size_t max_receive_message_size = kDefaultMaxReceiveMessageSize;
  std::size_t max_send_message_size = kDefaultMaxSendMessageSize;
  // Compression of request messages unless a ClientContext says otherwise.
  Compression compression = Compression::identity;
  // Keepalive: PING after this long without frames; close the connection (its calls
  // fail UNAVAILABLE) when no answer comes within keepalive_timeout. Zero: off.
  std::chrono::nanoseconds keepalive_time{0};
  std::chrono::nanoseconds keepalive_timeout = std::chrono::seconds(20);
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(20);
  std::string user_agent = "goro-grpc";
  std::vector<ClientInterceptor> interceptors{};
};

class Channel {
 public:
  // target: "host:port", "dns:///host:port", or an http:// / https:// URL (https
  // implies options.tls).
  static std::shared_ptr<Channel> create(std::string_view target, ChannelOptions options = {});
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  const ChannelOptions& options() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Channel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Per-call settings and what the server sent back besides messages. One per call; not
// reusable (a second call with it fails INTERNAL). It must outlive the call's stub
// reader/writer.
class ClientContext {
 public:
  // parent: the call is cancelled with it and its deadline bounds the call's (an
  // incoming call's ServerContext::context() propagates this way). When it carries a
  // trace (goro/http/trace.hpp), the call is a client span of it: traceparent and
  // tracestate go out as metadata (unless add_metadata set traceparent), and the span,
  // with the call's status code, goes to the trace's exporter when the call finishes.
  explicit ClientContext(Context parent = {});
  ~ClientContext();
  ClientContext(const ClientContext&) = delete;
  ClientContext& operator=(const ClientContext&) = delete;

  // The call's deadline (sent as grpc-timeout; the earlier of this and the parent's).
  void set_deadline(std::chrono::steady_clock::time_point deadline);
  void set_timeout(std::chrono::nanoseconds timeout);
  std::optional<std::chrono::steady_clock::time_point> deadline() const;
  // Request metadata (-bin values raw; they are base64-encoded on the wire).
  void add_metadata(std::string_view key, std::string_view value);
  const Metadata& metadata() const;
  void set_compression(Compression algorithm);
  // Cancels the call from any goroutine: RST_STREAM(CANCEL); the call ends CANCELLED.
  void cancel();
  // The server's response headers and trailers (-bin values decoded), once received.
  const Metadata& initial_metadata() const;
  const Metadata& trailing_metadata() const;
  // The context the call runs under (the parent, with the deadline applied).
  const Context& context() const;
  // For a streaming call: called once with the final status (interceptors).
  void on_finish(std::function<void(const Status&)> fn);
  // Peer address the call went to, once connected.
  std::string_view peer() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The runtime's side of one outgoing call, for generated stubs.
class ClientCall {
 public:
  // Starts a call of method ("/pkg.Service/Method") on channel: runs the interceptors,
  // then opens the stream and sends the request headers. A failure to start is kept
  // and returned by finish() (read and write then return false).
  ClientCall(Channel& channel, ClientContext& ctx, const MethodInfo& method);
  ~ClientCall();
  ClientCall(const ClientCall&) = delete;
  ClientCall& operator=(const ClientCall&) = delete;

  // Sends a request message; parks on flow control. end: the last one (half-close).
  // False when the call is over (its status is then from finish()).
  bool write(const google::protobuf::MessageLite& msg, bool end = false);
  // Half-closes the request stream.
  bool writes_done();
  // Waits for the next response message: true; false at the end of the stream or on
  // failure.
  bool read(google::protobuf::MessageLite& msg);
  // Waits for the server's headers (initial metadata).
  bool wait_initial_metadata();
  // Waits for the end of the call and returns its status (reading and dropping
  // response messages not read yet). It does not half-close: a bidirectional call whose
  // server waits for the end of the requests needs writes_done() first.
  Status finish();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Typed streams for generated stubs.
template <class Response>
class ClientReader {
 public:
  explicit ClientReader(std::unique_ptr<ClientCall> call) : call_(std::move(call)) {}
  bool read(Response* msg) { return call_->read(*msg); }
  bool wait_initial_metadata() { return call_->wait_initial_metadata(); }
  Status finish() { return call_->finish(); }

 private:
  std::unique_ptr<ClientCall> call_;
};

template <class Request>
class ClientWriter {
 public:
  ClientWriter(std::unique_ptr<ClientCall> call, google::protobuf::MessageLite* response)
      : call_(std::move(call)), response_(response) {}
  bool write(const Request& msg) { return call_->write(msg); }
  bool writes_done() { return call_->writes_done(); }
  bool wait_initial_metadata() { return call_->wait_initial_metadata(); }
  // Half-closes if not done, reads the one response into the stub's response, and
  // returns the status.
  Status finish();

 private:
  std::unique_ptr<ClientCall> call_;
  google::protobuf::MessageLite* response_;
};

template <class Request, class Response>
class ClientReaderWriter {
 public:
  explicit ClientReaderWriter(std::unique_ptr<ClientCall> call) : call_(std::move(call)) {}
  bool write(const Request& msg) { return call_->write(msg); }
  bool writes_done() { return call_->writes_done(); }
  bool read(Response* msg) { return call_->read(*msg); }
  bool wait_initial_metadata() { return call_->wait_initial_metadata(); }
  Status finish() { return call_->finish(); }

 private:
  std::unique_ptr<ClientCall> call_;
};

namespace detail {
// finish() of a client-streaming call: half-close, read exactly one response.
Status finish_with_response(ClientCall& call, google::protobuf::MessageLite& response);
}  // namespace detail

template <class Request>
Status ClientWriter<Request>::finish() {
  return detail::finish_with_response(*call_, *response_);
}

// A unary call, for generated stubs.
Status call_unary(Channel& channel, ClientContext& ctx, std::string_view method,
                  const google::protobuf::MessageLite& request,
                  google::protobuf::MessageLite& response);

}  // namespace goro::grpc
