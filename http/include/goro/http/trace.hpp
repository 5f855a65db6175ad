// W3C Trace Context (https://www.w3.org/TR/trace-context/, level 1): the trace a request
// belongs to, read from its traceparent and tracestate headers, carried on its Context,
// and passed on by http::Client and goro::grpc calls made under that context.
//
//   Handler app = chain(router, {trace({.exporter = print_span}), access_log()});
//   ...
//   client.get("http://backend/users/7", req.context());   // sends traceparent
//
// Vocabulary: a trace is one tree of spans, named by a 16-byte trace id; a span is one
// hop (a server handling a request, a client making a call), named by an 8-byte span
// id, whose parent is the span that called it. trace() makes a server span for each
// request; each client call made under the request's context makes a client span, a
// child of the server span, whose id travels in traceparent so that the next server's
// span is in turn its child. Every span, when it ends, is handed to the exporter hook
// (docs/observability.md): goro records nothing itself.
//
// Anything malformed in the headers is ignored as the spec says: a bad traceparent
// starts a new trace, a bad tracestate is dropped. Parsing never throws.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/headers.hpp>
#include <goro/http/middleware.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::http {

// A traceparent header's fields.
struct TraceParent {
  std::string trace_id;   // 32 lowercase hex digits, not all zero
  std::string parent_id;  // 16 lowercase hex digits, not all zero
  bool sampled = false;   // trace-flags bit 0
};

// Parses a traceparent value: version 00 exactly ("00-<trace>-<parent>-<flags>"); a
// higher version (not ff) by its first four fields, ignoring what follows a '-' after
// them. nullopt for anything else (uppercase hex, all-zero ids, version ff, ...).
std::optional<TraceParent> parse_traceparent(std::string_view value);
// "00-<trace_id>-<span_id>-0<sampled>".
std::string format_traceparent(std::string_view trace_id, std::string_view span_id, bool sampled);

// The tracestate passed on for the given header lines (several lines are one list,
// joined in order): its members (key=value, at most 32, keys unique) with empty members
// and surrounding blanks removed, joined by ','. "" when absent or invalid: a list with
// any malformed member, a repeated key or more than 32 members is dropped whole. Cut to
// kMaxTraceState bytes as the spec allows: members over 128 bytes go first, then
// members from the end.
std::string parse_tracestate(std::span<const std::string_view> lines);
inline constexpr std::size_t kMaxTraceState = 512;

// Which side of a call a span is.
enum class SpanKind { server, client };

// One finished span, as the exporter receives it.
struct Span {
  std::string name;  // "GET /users/{id}" (server: the route's pattern, else the path)
  SpanKind kind = SpanKind::server;
  std::string trace_id;   // 32 hex digits
  std::string span_id;    // 16 hex digits
  std::string parent_id;  // the calling span's id; "" for a trace's first span
  std::string tracestate;
  std::chrono::system_clock::time_point start{}, end{};
  // HTTP: the response's status, 0 when a client call failed (see error). gRPC: the
  // call's status code (0 is OK).
  int status = 0;
  std::error_code error{};  // an HTTP client call's failure
  bool sampled = false;     // whether the trace is sampled: an exporter may record only those
};

// Called once per span as it ends, on the goroutine that ran it; from many goroutines
// at once. It should not block for long: it delays the response's end (a server span)
// or the call's return (a client span). An exporter that ships spans elsewhere queues
// them and sends them from a goroutine of its own.
using SpanExporter = std::function<void(const Span& span)>;

// The trace a piece of work runs in: what a Context carries under trace_key.
struct Trace {
  std::string trace_id;
  std::string span_id;    // the current span
  std::string parent_id;  // the current span's parent; "" when it is the first
  bool sampled = true;
  std::string tracestate{};
  // Where this trace's spans are reported (trace()'s exporter); null: nowhere.
  std::shared_ptr<const SpanExporter> exporter{};
};
extern const goro::ContextKey<Trace> trace_key;

// The trace on ctx (or on the request's context), or nullptr.
const Trace* trace_of(const Context& ctx) noexcept;
const Trace* trace_of(Request& req) noexcept;

// A new random id, never all zero: 32 hex digits (trace) or 16 (span).
std::string new_trace_id();
std::string new_span_id();

// The trace a server continues for the given headers (traceparent's trace and its span
// as parent, tracestate), with a new span id; a new trace with no parent, sampled as
// sample_new_traces says, when traceparent is absent or invalid.
Trace continue_trace(std::string_view traceparent, std::span<const std::string_view> tracestate,
                     bool sample_new_traces);
// A child of trace: a new span id whose parent is trace's span, the rest the same.
Trace child_of(const Trace& trace);
// Sets traceparent (and tracestate, when there is one) for trace's span on headers.
void inject(const Trace& trace, Headers& headers);
// Hands the span to trace's exporter, if it has one.
void end_span(const Trace& trace, SpanKind kind, std::string name,
              std::chrono::system_clock::time_point start, int status, std::error_code error = {});

struct TraceOptions {
  // Receives every span made under the traces this middleware starts or continues,
  // server and client alike; empty: spans are propagated but not reported.
  SpanExporter exporter{};
  // Whether a trace started here (no valid traceparent came) is sampled; a continued
  // trace keeps its caller's decision.
  bool sample_new_traces = true;
};

// Continues the request's trace (or starts one) with a server span for this hop, kept
// on the request's context under trace_key while the handler runs: http::Client and
// gRPC calls made under that context propagate it, access_log and Logger stamp its ids.
// At the end the span goes to options.exporter. Put it before access_log in the chain
// so that the access log sees the trace.
Middleware trace(TraceOptions options = {});

}  // namespace goro::http
