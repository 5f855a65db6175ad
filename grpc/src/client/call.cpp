// One outgoing gRPC call on an HTTP/2 stream (http::ClientStream), as PROTOCOL-HTTP2.md
// (grpc/grpc doc/) describes it, and the unary fast path.
//
// A call is: request headers (":method POST", ":path /pkg.Service/Method", te: trailers,
// content-type application/grpc, grpc-timeout from the deadline, grpc-encoding and
// grpc-accept-encoding, then the custom metadata, -bin values in base64); then
// length-prefixed messages each way (wire::MessageDecoder splits the responses); then
// the server's trailers with grpc-status, grpc-message (percent-encoded) and
// grpc-status-details-bin. A server that fails at once answers "trailers-only": one
// HEADERS frame with the status and END_STREAM.
//
// Where the status comes from, first match wins:
//   1. a failure decided here: the interceptors refused the call, a message over the
//      send or receive limit (RESOURCE_EXHAUSTED), a response that is not gRPC (HTTP
//      status other than 200 without grpc-status: the spec's HTTP-to-gRPC table;
//      wrong content-type: UNKNOWN), malformed framing or protobuf (INTERNAL);
//   2. the stream failed: the call's context ended (its deadline: DEADLINE_EXCEEDED;
//      ClientContext::cancel or the parent's cancellation: CANCELLED — the stream is
//      then reset with RST_STREAM(CANCEL) by http::ClientStream), the server reset it
//      (RST_STREAM codes as the spec maps them), the connection was lost (UNAVAILABLE);
//   3. the trailers (or the trailers-only headers); none at all: INTERNAL.
//
// A reader goroutine (read, wait_initial_metadata, finish) and a writer goroutine
// (write, writes_done) may run at once: they share only the stream, which allows one
// of each, and local_status_, which mu_ guards.
//
// The unary fast path (call_unary) keeps the whole call on the caller's stack: one
// HTTP/2 stream, the request's HEADERS then its one message in one DATA frame with
// END_STREAM; the only allocations are the request's URL and headers, the framed
// message and the response buffer.
#include <goro/grpc/client.hpp>

#include <google/protobuf/message_lite.h>

#include <limits>
#include <optional>
#include <string>

#include <goro/http/errors.hpp>
#include <goro/http/trace.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/mutex.hpp>

#include "client/client_impl.hpp"
#include "wire/wire.hpp"

namespace goro::grpc {

namespace {

constexpr std::size_t kReadChunk = 16 * 1024;

// RST_STREAM error codes (RFC 9113 7) as PROTOCOL-HTTP2.md maps them.
Status status_from_reset(std::uint32_t code) {
  switch (code) {
    case 0x7:  // REFUSED_STREAM: never processed, safe to retry
      return Status(StatusCode::unavailable, "stream refused by the server (REFUSED_STREAM)");
    case 0x8:
      return Status(StatusCode::cancelled, "stream cancelled by the server (RST_STREAM CANCEL)");
    case 0xb:
      return Status(StatusCode::resource_exhausted,
                    "server reset the stream (ENHANCE_YOUR_CALM)");
    case 0xc:
      return Status(StatusCode::permission_denied,
                    "server reset the stream (INADEQUATE_SECURITY)");
    default:
      return Status(StatusCode::internal,
                    "server reset the stream (HTTP/2 error code " + std::to_string(code) + ")");
  }
}

// Metadata keys are lower-case [0-9a-z_.-] and not the protocol's; ASCII values are
// printable. Checked before anything is sent.
Status check_metadata(const Metadata& metadata) {
  for (http::HeaderField field : metadata) {
    bool key_ok = !field.name.empty() && !wire::is_reserved_header(field.name);
    for (char c : field.name) {
      key_ok = key_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                          c == '_' || c == '.');
    }
    if (!key_ok) {
      return Status(StatusCode::internal,
                    "invalid metadata key \"" + std::string(field.name) + "\"");
    }
    if (wire::is_binary_key(field.name)) continue;
    for (char c : field.value) {
      if (c < 0x20 || c > 0x7e) {
        return Status(StatusCode::internal, "metadata value of \"" + std::string(field.name) +
                                                "\" is not printable ASCII (use a -bin key)");
      }
    }
  }
  return {};
}

// Copies the custom metadata among fields into out, -bin values decoded.
void copy_metadata(const http::Headers& fields, Metadata& out) {
  for (http::HeaderField field : fields) {
    if (wire::is_reserved_header(field.name)) continue;
    if (wire::is_binary_key(field.name)) {
      if (std::optional<std::string> bytes = wire::base64_decode(field.value)) {
        out.add(field.name, *bytes);
      }
      continue;
    }
    out.add(field.name, field.value);
  }
}

}  // namespace

struct ClientCall::Impl {
  Impl(Channel::Impl& channel_impl, ClientContext& context, const MethodInfo& info)
      : channel(channel_impl),
        ctx(context.impl()),
        method(info),
        decoder(channel_impl.options.max_receive_message_size) {}

  // Sends the request headers. Fails with the status the call then ends with.
  Status start();
  // A failure decided here: kept (the first wins) and the stream reset.
  void fail(Status status);
  bool write(const google::protobuf::MessageLite& msg, bool end);
  bool writes_done();
  bool wait_head();
  bool read(google::protobuf::MessageLite& msg);
  Status finish();

  // The next response message's bytes, decompressed; false at the end or on failure.
  bool next_payload(std::string_view& payload);
  Status status_from_error(std::error_code ec) const;
  Status final_status_now();

  Channel::Impl& channel;
  ClientContext::Impl& ctx;
  MethodInfo method;
  std::unique_ptr<http::ClientStream> stream;
  Compression send_compression = Compression::identity;
  std::optional<Compression> receive_compression = Compression::identity;
  wire::MessageDecoder decoder;
  std::string frame;        // the framed request message being written
  std::string serialized;   // a message before compression
  std::string decompressed;

  Mutex mu;
  std::optional<Status> local_status;  // guarded by mu

  // Reader side.
  bool head_waited = false;
  bool head_ok = false;
  bool trailers_only = false;
  bool body_done = false;
  std::error_code stream_error;
  std::optional<Status> final_status;

  // Writer side.
  bool send_done = false;
};

Status ClientCall::Impl::start() {
  if (ctx.used) return Status(StatusCode::internal, "a ClientContext serves one call only");
  ctx.used = true;
  ctx.peer = channel.authority;
  if (std::error_code e = ctx.cancellable.err()) return status_from_error(e);
  if (ctx.deadline) {
    auto [deadline_ctx, cancel] = with_deadline(ctx.cancellable, *ctx.deadline);
    ctx.call_context = std::move(deadline_ctx);
    ctx.call_cancel = std::move(cancel);
  }
  if (Status s = check_metadata(ctx.metadata); !s.ok()) return s;
  send_compression = ctx.compression.value_or(channel.options.compression);

  http::ClientRequest request;
  request.method = "POST";
  request.url.reserve(channel.origin.size() + method.full_name.size());
  request.url.append(channel.origin).append(method.full_name);
  request.context = ctx.call_context;
  http::Headers& h = request.headers;
  // The protocol's fields before the custom metadata, as the spec orders them.
  if (!channel.options.server_name_override.empty()) {
    h.add("host", channel.options.server_name_override);
  }
  if (std::optional<std::chrono::steady_clock::time_point> deadline = ctx.effective_deadline()) {
    const auto left = *deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) {
      return Status(StatusCode::deadline_exceeded, "deadline exceeded before the call started");
    }
    h.add("grpc-timeout", wire::format_timeout(left));
  }
  h.add("content-type", "application/grpc");
  h.add("te", "trailers");
  if (send_compression != Compression::identity) {
    h.add("grpc-encoding", wire::encoding_name(send_compression));
  }
  h.add("grpc-accept-encoding", wire::kAcceptEncoding);
  h.add("user-agent", channel.options.user_agent);
  for (http::HeaderField field : ctx.metadata) {
    if (wire::is_binary_key(field.name)) {
      h.add(field.name, wire::base64_encode(field.value));
    } else {
      h.add(field.name, field.value);
    }
  }
  // A call under a traced context is a client span of that trace, unless the caller
  // sends a traceparent of its own.
  if (const http::Trace* trace = http::trace_of(ctx.call_context);
      trace != nullptr && !ctx.metadata.has("traceparent")) {
    ctx.span = http::child_of(*trace);
    ctx.span_name = method.full_name.substr(method.full_name.empty() ? 0 : 1);
    ctx.span_start = std::chrono::system_clock::now();
    http::inject(*ctx.span, h);
  }

  Result<std::unique_ptr<http::ClientStream>> opened = channel.http.open_stream(request);
  if (!opened) return status_from_error(opened.error());
  stream = std::move(*opened);
  return {};
}

void ClientCall::Impl::fail(Status status) {
  mu.lock();
  if (!local_status) local_status = std::move(status);
  mu.unlock();
  if (stream) stream->cancel();
}

Status ClientCall::Impl::status_from_error(std::error_code ec) const {
  std::error_code why = ctx.call_context.err();
  if (!why && (ec == context_errc::canceled || ec == context_errc::deadline_exceeded)) why = ec;
  if (why == context_errc::deadline_exceeded) {
    return Status(StatusCode::deadline_exceeded, "deadline exceeded");
  }
  if (why) return Status(StatusCode::cancelled, "call cancelled");
  // The dial and the TLS handshake are bounded by the call's deadline too, and their
  // timeout can come a moment before the context's own timer has fired.
  if (net::is_timeout(ec)) {
    if (std::optional<std::chrono::steady_clock::time_point> deadline = ctx.effective_deadline();
        deadline && std::chrono::steady_clock::now() >= *deadline) {
      return Status(StatusCode::deadline_exceeded, "deadline exceeded");
    }
  }
  if (ec == http::errc::stream_reset && stream) return status_from_reset(stream->reset_code());
  if (net::is_timeout(ec)) return Status(StatusCode::unavailable, "timed out: " + ec.message());
  return Status(StatusCode::unavailable, ec.message());
}

bool ClientCall::Impl::write(const google::protobuf::MessageLite& msg, bool end) {
  if (!stream || send_done) return false;
  const std::size_t size = msg.ByteSizeLong();
  if (size > channel.options.max_send_message_size || size > std::numeric_limits<std::uint32_t>::max()) {
    fail(Status(StatusCode::resource_exhausted,
                "trying to send message larger than max (" + std::to_string(size) + " vs. " +
                    std::to_string(channel.options.max_send_message_size) + ")"));
    return false;
  }
  if (send_compression == Compression::identity) {
    frame.resize(wire::kMessageHeaderSize + size);
    msg.SerializeWithCachedSizesToArray(
        reinterpret_cast<std::uint8_t*>(frame.data() + wire::kMessageHeaderSize));
    wire::write_message_header(frame.data(), false, static_cast<std::uint32_t>(size));
  } else {
    serialized.resize(size);
    msg.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(serialized.data()));
    frame.resize(wire::kMessageHeaderSize);
    wire::compress(send_compression, serialized, frame);
    wire::write_message_header(frame.data(), true,
                               static_cast<std::uint32_t>(frame.size() - wire::kMessageHeaderSize));
  }
  if (end) send_done = true;
  return !stream->write(frame, end);
}

bool ClientCall::Impl::writes_done() {
  if (!stream) return false;
  if (send_done) return true;
  send_done = true;
  return !stream->close_send();
}

bool ClientCall::Impl::wait_head() {
  if (head_waited) return head_ok;
  head_waited = true;
  if (!stream) return false;
  if (std::error_code ec = stream->wait_response()) {
    stream_error = ec;
    return false;
  }
  const http::ClientResponse& response = stream->response();
  if (response.headers.has("grpc-status")) {
    // Trailers-only: the status is in these headers, whatever the HTTP status.
    trailers_only = true;
    return head_ok = true;
  }
  if (response.status != 200) {
    fail(Status(wire::status_from_http(response.status),
                "HTTP status " + std::to_string(response.status) + " (not a gRPC response)"));
    return false;
  }
  const std::string_view content_type = response.header("content-type");
  if (!wire::is_grpc_content_type(content_type)) {
    fail(Status(StatusCode::unknown,
                "unexpected content-type \"" + std::string(content_type) + "\""));
    return false;
  }
  receive_compression = wire::parse_encoding(response.header("grpc-encoding"));
  copy_metadata(response.headers, ctx.initial_metadata);
  return head_ok = true;
}

bool ClientCall::Impl::next_payload(std::string_view& payload) {
  if (!wait_head() || trailers_only || body_done || stream_error) return false;
  for (;;) {
    wire::MessageDecoder::Message message;
    switch (decoder.next(message)) {
      case wire::MessageDecoder::Result::message:
        if (!message.compressed) {
          payload = message.payload;
          return true;
        }
        if (!receive_compression) {
          fail(Status(StatusCode::unimplemented, "response compressed with an unsupported grpc-encoding"));
          return false;
        }
        if (*receive_compression == Compression::identity) {
          fail(Status(StatusCode::internal, "compressed response message without grpc-encoding"));
          return false;
        }
        if (Status s = wire::decompress(*receive_compression, message.payload, decompressed,
                                        decoder.max_message_size());
            !s.ok()) {
          fail(std::move(s));
          return false;
        }
        payload = decompressed;
        return true;
      case wire::MessageDecoder::Result::error:
        fail(decoder.error());
        return false;
      case wire::MessageDecoder::Result::need_more:
        break;
    }
    Result<std::size_t> n = stream->read(decoder.prepare(kReadChunk), kReadChunk);
    if (!n) {
      stream_error = n.error();
      return false;
    }
    if (*n == 0) {
      body_done = true;
      if (Status s = decoder.finish(); !s.ok()) fail(s);
      return false;
    }
    decoder.commit(*n);
  }
}

bool ClientCall::Impl::read(google::protobuf::MessageLite& msg) {
  std::string_view payload;
  if (!next_payload(payload)) return false;
  if (!msg.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    fail(Status(StatusCode::internal, "cannot parse the response message as " + msg.GetTypeName()));
    return false;
  }
  return true;
}

Status ClientCall::Impl::final_status_now() {
  // Responses nobody read are dropped: the trailers come after them.
  std::string_view ignored;
  while (next_payload(ignored)) {
  }
  mu.lock();
  std::optional<Status> local = local_status;
  mu.unlock();
  if (local) return *local;
  if (stream_error) return status_from_error(stream_error);
  if (!head_ok) return Status(StatusCode::internal, "the call ended without a response");
  const http::ClientResponse& response = stream->response();
  const http::Headers& trailers = trailers_only ? response.headers : response.trailers;
  copy_metadata(trailers, ctx.trailing_metadata);
  const std::string_view code_text = trailers.get("grpc-status");
  if (code_text.empty()) {
    return Status(StatusCode::internal, "server closed the stream without grpc-status");
  }
  std::optional<StatusCode> code = wire::parse_status_code(code_text);
  if (!code) {
    return Status(StatusCode::internal, "malformed grpc-status \"" + std::string(code_text) + "\"");
  }
  std::string details;
  if (std::string_view bin = trailers.get("grpc-status-details-bin"); !bin.empty()) {
    details = wire::base64_decode(bin).value_or(std::string());
  }
  return Status(*code, wire::percent_decode(trailers.get("grpc-message")), std::move(details));
}

Status ClientCall::Impl::finish() {
  if (!final_status) {
    final_status = final_status_now();
    ctx.finished(*final_status);
  }
  return *final_status;
}

ClientCall::ClientCall(Channel& channel, ClientContext& ctx, const MethodInfo& method)
    : impl_(std::make_unique<Impl>(channel.impl(), ctx, method)) {
  Status started = intercept(channel.impl(), ctx, method, [this] { return impl_->start(); });
  if (!started.ok()) impl_->fail(std::move(started));
}

ClientCall::~ClientCall() {
  if (!impl_->final_status) {
    if (impl_->stream) impl_->stream->cancel();
    impl_->ctx.finished(Status(StatusCode::cancelled, "call abandoned before finish()"));
  }
}

bool ClientCall::write(const google::protobuf::MessageLite& msg, bool end) {
  return impl_->write(msg, end);
}
bool ClientCall::writes_done() { return impl_->writes_done(); }
bool ClientCall::read(google::protobuf::MessageLite& msg) { return impl_->read(msg); }
bool ClientCall::wait_initial_metadata() { return impl_->wait_head(); }

Status ClientCall::finish() {
  if (!impl_->stream) {
    // Never started: the status is the one start (or an interceptor) gave.
    impl_->mu.lock();
    Status s = impl_->local_status.value_or(Status(StatusCode::internal, "call not started"));
    impl_->mu.unlock();
    if (!impl_->final_status) {
      impl_->final_status = s;
      impl_->ctx.finished(s);
    }
    return s;
  }
  return impl_->finish();
}

namespace detail {

Status finish_with_response(ClientCall& call, google::protobuf::MessageLite& response) {
  call.writes_done();
  const bool got = call.read(response);
  Status status = call.finish();
  if (status.ok() && !got) {
    return Status(StatusCode::internal, "the server sent no response message");
  }
  return status;
}

}  // namespace detail

namespace {

Status unary_call(Channel::Impl& channel, ClientContext& ctx, const MethodInfo& method,
                  const google::protobuf::MessageLite& request,
                  google::protobuf::MessageLite& response) {
  ClientCall::Impl call(channel, ctx, method);
  if (Status s = call.start(); !s.ok()) return s;
  call.write(request, true);
  const bool got = call.read(response);
  // A second message is a protocol violation (grpc-go: cardinality violation).
  std::string_view extra;
  if (got && call.next_payload(extra)) {
    call.fail(Status(StatusCode::internal, "the server sent more than one response message"));
  }
  Status status = call.final_status_now();
  if (status.ok() && !got) {
    return Status(StatusCode::internal, "the server sent no response message");
  }
  return status;
}

}  // namespace

Status call_unary(Channel& channel, ClientContext& ctx, std::string_view method,
                  const google::protobuf::MessageLite& request,
                  google::protobuf::MessageLite& response) {
  const MethodInfo info{method, CallKind::unary};
  Channel::Impl& impl = channel.impl();
  Status status = impl.options.interceptors.empty()
                      ? unary_call(impl, ctx, info, request, response)
                      : intercept(impl, ctx, info, [&] {
                          return unary_call(impl, ctx, info, request, response);
                        });
  ctx.impl().finished(status);
  return status;
}

}  // namespace goro::grpc
