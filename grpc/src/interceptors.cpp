// The server interceptors goro::grpc ships: one log line per call, per-method metrics
// on the http::metrics registry (what /metrics exports), and W3C trace context.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <goro/grpc/server.hpp>
#include <goro/http/metrics.hpp>
#include <goro/http/trace.hpp>

namespace goro::grpc {

namespace {

std::string_view kind_name(CallKind kind) {
  switch (kind) {
    case CallKind::unary: return "unary";
    case CallKind::server_streaming: return "server_stream";
    case CallKind::client_streaming: return "client_stream";
    case CallKind::bidi_streaming: return "bidi_stream";
  }
  return "unary";
}

// "/pkg.S/M" -> {"pkg.S", "M"}.
std::pair<std::string_view, std::string_view> split_method(std::string_view full) {
  if (!full.empty() && full[0] == '/') full.remove_prefix(1);
  const std::size_t slash = full.find('/');
  if (slash == std::string_view::npos) return {full, {}};
  return {full.substr(0, slash), full.substr(slash + 1)};
}

}  // namespace

ServerInterceptor logging_interceptor(std::function<void(std::string_view line)> log) {
  return [log = std::move(log)](ServerContext& ctx, const MethodInfo& method,
                                const std::function<Status()>& next) {
    const auto start = std::chrono::steady_clock::now();
    Status status = next();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char duration[32];
    std::snprintf(duration, sizeof duration, "%.3fms", ms);
    std::string line = "grpc ";
    line.append(method.full_name).append(" peer=").append(ctx.peer());
    line.append(" code=")
        .append(status_code_name(status.code()))
        .append(" duration=")
        .append(duration);
    if (!status.message().empty()) line.append(" message=\"").append(status.message()).append("\"");
    if (log) {
      log(line);
    } else {
      line.push_back('\n');
      std::fputs(line.c_str(), stderr);
    }
    return status;
  };
}

ServerInterceptor metrics_interceptor() {
  namespace metrics = http::metrics;
  struct Families {
    metrics::Family<metrics::Counter> started, handled;
    metrics::Family<metrics::Histogram> seconds;
  };
  // One set per process: the registry refuses a second definition of a name.
  static Families families{
      metrics::default_registry().counter_family("grpc_server_started_total",
                                                 "gRPC calls started on the server.",
                                                 {"grpc_method", "grpc_service", "grpc_type"}),
      metrics::default_registry().counter_family(
          "grpc_server_handled_total", "gRPC calls completed on the server, by status code.",
          {"grpc_method", "grpc_service", "grpc_type", "grpc_code"}),
      metrics::default_registry().histogram_family("grpc_server_handling_seconds",
                                                   "Time to handle a gRPC call on the server.",
                                                   {"grpc_method", "grpc_service", "grpc_type"})};
  return [](ServerContext&, const MethodInfo& method, const std::function<Status()>& next) {
    const auto [service, name] = split_method(method.full_name);
    const std::string_view type = kind_name(method.kind);
    families.started.with_labels({name, service, type}).inc();
    const auto start = std::chrono::steady_clock::now();
    Status status = next();
    families.seconds.with_labels({name, service, type})
        .observe(std::chrono::steady_clock::now() - start);
    families.handled.with_labels({name, service, type, status_code_name(status.code())}).inc();
    return status;
  };
}

ServerInterceptor trace_interceptor(http::TraceOptions options) {
  auto exporter = options.exporter
                      ? std::make_shared<const http::SpanExporter>(std::move(options.exporter))
                      : nullptr;
  const bool sample_new = options.sample_new_traces;
  return [exporter, sample_new](ServerContext& ctx, const MethodInfo& method,
                                const std::function<Status()>& next) {
    const auto start = std::chrono::system_clock::now();
    const Metadata& md = ctx.client_metadata();
    std::vector<std::string_view> states = md.values("tracestate");
    http::Trace t = http::continue_trace(md.get("traceparent"), states, sample_new);
    t.exporter = exporter;
    const Context outer = ctx.context();
    ctx.set_context(with_value(outer, http::trace_key, t));
    Status status = next();
    ctx.set_context(outer);
    std::string_view name = method.full_name;
    if (!name.empty() && name[0] == '/') name.remove_prefix(1);
    http::end_span(t, http::SpanKind::server, std::string(name), start,
                   static_cast<int>(status.code()));
    return status;
  };
}

}  // namespace goro::grpc
