// goro::grpc::Service — what a generated service (protoc-gen-goro) derives from: a name
// and a table of methods, each a function of a ServerCall. The typed readers and
// writers a handler is given, and the adapters from a ServerCall to the four handler
// shapes, are here too; generated code is their main user, but a service can be
// written by hand with them.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <goro/grpc/call.hpp>
#include <goro/grpc/server.hpp>
#include <goro/grpc/status.hpp>

namespace goro::grpc {

class Service {
 public:
  using MethodHandler = std::function<Status(ServerCall& call)>;
  struct Method {
    std::string name;       // "SayHello"
    std::string full_name;  // "/helloworld.Greeter/SayHello"
    CallKind kind;
    MethodHandler handler;
  };

  // full_name: the service's name with its package, "helloworld.Greeter".
  explicit Service(std::string full_name) : full_name_(std::move(full_name)) {}
  virtual ~Service() = default;
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  const std::string& full_name() const noexcept { return full_name_; }
  const std::vector<Method>& methods() const noexcept { return methods_; }

 protected:
  void add_method(std::string_view name, CallKind kind, MethodHandler handler) {
    methods_.push_back({std::string(name), "/" + full_name_ + "/" + std::string(name), kind,
                        std::move(handler)});
  }

 private:
  std::string full_name_;
  std::vector<Method> methods_;
};

// The request stream of a client-streaming or bidirectional call.
template <class Request>
class ServerReader {
 public:
  explicit ServerReader(ServerCall& call) : call_(call) {}
  // The next message: true; false at the end of the stream (or when the call failed).
  bool read(Request* msg) { return call_.read(*msg); }
  ServerContext& context() { return call_.context(); }

 private:
  ServerCall& call_;
};

// The response stream of a server-streaming or bidirectional call.
template <class Response>
class ServerWriter {
 public:
  explicit ServerWriter(ServerCall& call) : call_(call) {}
  // Sends msg; parks while the client is slow. False when the call is over.
  bool write(const Response& msg) { return call_.write(msg); }
  std::error_code send_initial_metadata() { return call_.context().send_initial_metadata(); }
  ServerContext& context() { return call_.context(); }

 private:
  ServerCall& call_;
};

// Both streams of a bidirectional call; read and write may run in two goroutines.
template <class Response, class Request>
class ServerReaderWriter {
 public:
  explicit ServerReaderWriter(ServerCall& call) : call_(call) {}
  bool read(Request* msg) { return call_.read(*msg); }
  bool write(const Response& msg) { return call_.write(msg); }
  std::error_code send_initial_metadata() { return call_.context().send_initial_metadata(); }
  ServerContext& context() { return call_.context(); }

 private:
  ServerCall& call_;
};

namespace detail {
// The status of a unary call whose request stream ended without its one message.
Status missing_request_status();
}  // namespace detail

// Adapters from a ServerCall to the four handler shapes, for generated code:
//   unary:            Status f(ServerContext&, const Request&, Response*)
//   server streaming: Status f(ServerContext&, const Request&, ServerWriter<Response>&)
//   client streaming: Status f(ServerContext&, ServerReader<Request>&, Response*)
//   bidirectional:    Status f(ServerContext&, ServerReaderWriter<Response, Request>&)
template <class Request, class Response, class F>
Status serve_unary(ServerCall& call, F&& f) {
  Request request;
  if (!call.read(request)) return detail::missing_request_status();
  Response response;
  Status status = f(call.context(), request, &response);
  if (status.ok() && !call.write(response)) return Status(StatusCode::cancelled, "write failed");
  return status;
}

template <class Request, class Response, class F>
Status serve_server_streaming(ServerCall& call, F&& f) {
  Request request;
  if (!call.read(request)) return detail::missing_request_status();
  ServerWriter<Response> writer(call);
  return f(call.context(), request, writer);
}

template <class Request, class Response, class F>
Status serve_client_streaming(ServerCall& call, F&& f) {
  ServerReader<Request> reader(call);
  Response response;
  Status status = f(call.context(), reader, &response);
  if (status.ok() && !call.write(response)) return Status(StatusCode::cancelled, "write failed");
  return status;
}

template <class Request, class Response, class F>
Status serve_bidi_streaming(ServerCall& call, F&& f) {
  ServerReaderWriter<Response, Request> stream(call);
  return f(call.context(), stream);
}

}  // namespace goro::grpc
