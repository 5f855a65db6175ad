// The client's private state (client.hpp's Impl types), shared by channel.cpp and
// call.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <goro/grpc/client.hpp>
#include <goro/http/client.hpp>
#include <goro/http/trace.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::grpc {

struct Channel::Impl {
  ChannelOptions options;
  // "http://host:port" or "https://host:port": the URL prefix of every method.
  std::string origin;
  // What peer() reports: host:port of the target.
  std::string authority;
  http::Client http;

  Impl(ChannelOptions opts, std::string origin_url, std::string target_authority,
       const http::ClientOptions& http_options)
      : options(std::move(opts)),
        origin(std::move(origin_url)),
        authority(std::move(target_authority)),
        http(http_options) {}
};

struct ClientContext::Impl {
  // The parent's context with a cancel function of our own: cancel() works before,
  // during and after the call.
  Context cancellable;
  CancelFunc cancel;
  // The call's context: cancellable, with the deadline applied (set when the call
  // starts; until then cancellable).
  Context call_context;
  CancelFunc call_cancel;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  Metadata metadata;
  std::optional<Compression> compression;
  Metadata initial_metadata;
  Metadata trailing_metadata;
  std::function<void(const Status&)> on_finish;
  std::string peer;
  bool used = false;
  // The call's client span when its context carries a trace (http/trace.hpp): set when
  // the call starts, reported to the trace's exporter when it finishes.
  std::optional<http::Trace> span;
  std::string span_name;
  std::chrono::system_clock::time_point span_start{};

  // The deadline the call runs under: the earlier of ours and the parent's.
  std::optional<std::chrono::steady_clock::time_point> effective_deadline() const {
    std::optional<std::chrono::steady_clock::time_point> parent = cancellable.deadline();
    if (!deadline) return parent;
    if (!parent) return deadline;
    return std::min(*deadline, *parent);
  }
  // Reports the final status to on_finish, and the span to its exporter, once.
  void finished(const Status& status) {
    if (span) {
      http::end_span(*span, http::SpanKind::client, std::move(span_name), span_start,
                     static_cast<int>(status.code()));
      span.reset();
    }
    if (on_finish) {
      auto fn = std::move(on_finish);
      on_finish = nullptr;
      fn(status);
    }
  }
};

// Runs the channel's interceptors around innermost (the first outermost).
Status intercept(Channel::Impl& channel, ClientContext& ctx, const MethodInfo& method,
                 const std::function<Status()>& innermost);

}  // namespace goro::grpc
