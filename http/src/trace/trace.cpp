#include <goro/http/trace.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <goro/http/request.hpp>
#include <goro/http/response.hpp>
#include <goro/scheduler/thread_local.hpp>

namespace goro::http {
namespace {

// A per-thread splitmix64 generator, seeded from the OS (as request ids are).
constinit goro::ThreadLocal id_state = [] {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ 0x2545f4914f6cdd1dull;
};

std::uint64_t next_random() {
  std::uint64_t z = (*id_state.use() += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void append_hex64(std::string& out, std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(digits[(v >> shift) & 15]);
}

bool lower_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool all_zero(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool lcalpha(char c) { return c >= 'a' && c <= 'z'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool key_char(char c) {
  return lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// simple-key = lcalpha 0*255(key_char); multi-tenant-key = tenant-id "@" system-id,
// tenant-id = (lcalpha / DIGIT) 0*240(key_char), system-id = lcalpha 0*13(key_char).
bool valid_key(std::string_view key) {
  const std::size_t at = key.find('@');
  auto rest_ok = [](std::string_view s) {
    for (char c : s.substr(1)) {
      if (!key_char(c)) return false;
    }
    return true;
  };
  if (at == std::string_view::npos) {
    return !key.empty() && key.size() <= 256 && lcalpha(key[0]) && rest_ok(key);
  }
  std::string_view tenant = key.substr(0, at), system = key.substr(at + 1);
  return !tenant.empty() && tenant.size() <= 241 && (lcalpha(tenant[0]) || digit(tenant[0])) &&
         rest_ok(tenant) && !system.empty() && system.size() <= 14 && lcalpha(system[0]) &&
         rest_ok(system);
}

// value = 0*255(chr) nblk-chr; chr = 0x20 / nblk-chr; nblk-chr = 0x21-0x7e but ',' '='.
bool valid_value(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value) {
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
  }
  return true;
}

// A server span's name: the route's pattern with its method ("GET /users/{id}"), else
// the method and path.
std::string span_name(Request& req) {
  std::string_view pattern = req.pattern();
  if (pattern.find(' ') != std::string_view::npos) return std::string(pattern);
  std::string name(req.method());
  name.push_back(' ');
  name.append(pattern.empty() ? req.path() : pattern);
  return name;
}

}  // namespace

const goro::ContextKey<Trace> trace_key{"goro.http.trace"};

std::optional<TraceParent> parse_traceparent(std::string_view value) {
  value = trim_blanks(value);
  // version "-" trace-id "-" parent-id "-" trace-flags: 2+1+32+1+16+1+2.
  constexpr std::size_t kLength = 55;
  if (value.size() < kLength) return std::nullopt;
  std::string_view version = value.substr(0, 2);
  if (!lower_hex(version) || version == "ff") return std::nullopt;
  if (version == "00" ? value.size() != kLength : value.size() > kLength && value[kLength] != '-') {
    return std::nullopt;
  }
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  std::string_view trace_id = value.substr(3, 32), parent_id = value.substr(36, 16),
                   flags = value.substr(53, 2);
  if (!lower_hex(trace_id) || !lower_hex(parent_id) || !lower_hex(flags)) return std::nullopt;
  if (all_zero(trace_id) || all_zero(parent_id)) return std::nullopt;
  const int flag_bits = (flags[1] >= 'a' ? flags[1] - 'a' + 10 : flags[1] - '0');
  return TraceParent{std::string(trace_id), std::string(parent_id), (flag_bits & 1) != 0};
}

std::string format_traceparent(std::string_view trace_id, std::string_view span_id, bool sampled) {
  std::string out;
  out.reserve(55);
  out.append("00-").append(trace_id).push_back('-');
  out.append(span_id).append(sampled ? "-01" : "-00");
  return out;
}

std::string parse_tracestate(std::span<const std::string_view> lines) {
  std::vector<std::string_view> members;
  for (std::string_view line : lines) {
    while (true) {
      const std::size_t comma = line.find(',');
      std::string_view member = trim_blanks(line.substr(0, comma));
      if (!member.empty()) {
        if (members.size() == 32) return {};
        const std::size_t eq = member.find('=');
        if (eq == std::string_view::npos) return {};
        std::string_view key = member.substr(0, eq);
        if (!valid_key(key) || !valid_value(member.substr(eq + 1))) return {};
        for (std::string_view seen : members) {
          if (seen.substr(0, seen.find('=')) == key) return {};
        }
        members.push_back(member);
      }
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
  }
  auto joined_size = [&] {
    std::size_t n = members.empty() ? 0 : members.size() - 1;
    for (std::string_view m : members) n += m.size();
    return n;
  };
  while (joined_size() > kMaxTraceState) {
    auto large = std::find_if(members.begin(), members.end(),
                              [](std::string_view m) { return m.size() > 128; });
    members.erase(large != members.end() ? large : members.end() - 1);
  }
  std::string out;
  for (std::string_view m : members) {
    if (!out.empty()) out.push_back(',');
    out.append(m);
  }
  return out;
}

const Trace* trace_of(const Context& ctx) noexcept { return ctx.value(trace_key); }
const Trace* trace_of(Request& req) noexcept { return req.context().value(trace_key); }

std::string new_trace_id() {
  std::string id;
  id.reserve(32);
  std::uint64_t high = next_random(), low = next_random();
  while ((high | low) == 0) low = next_random();
  append_hex64(id, high);
  append_hex64(id, low);
  return id;
}

std::string new_span_id() {
  std::uint64_t v = next_random();
  while (v == 0) v = next_random();
  std::string id;
  id.reserve(16);
  append_hex64(id, v);
  return id;
}

Trace continue_trace(std::string_view traceparent, std::span<const std::string_view> tracestate,
                     bool sample_new_traces) {
  Trace t;
  t.span_id = new_span_id();
  if (std::optional<TraceParent> parent = parse_traceparent(traceparent)) {
    t.trace_id = std::move(parent->trace_id);
    t.parent_id = std::move(parent->parent_id);
    t.sampled = parent->sampled;
    // tracestate belongs to the traceparent it came with: without one it means nothing.
    t.tracestate = parse_tracestate(tracestate);
  } else {
    t.trace_id = new_trace_id();
    t.sampled = sample_new_traces;
  }
  return t;
}

Trace child_of(const Trace& trace) {
  Trace child = trace;
  child.parent_id = trace.span_id;
  child.span_id = new_span_id();
  return child;
}

void inject(const Trace& trace, Headers& headers) {
  headers.set("traceparent", format_traceparent(trace.trace_id, trace.span_id, trace.sampled));
  if (trace.tracestate.empty()) {
    headers.remove("tracestate");
  } else {
    headers.set("tracestate", trace.tracestate);
  }
}

void end_span(const Trace& trace, SpanKind kind, std::string name,
              std::chrono::system_clock::time_point start, int status, std::error_code error) {
  if (!trace.exporter || !*trace.exporter) return;
  Span span;
  span.name = std::move(name);
  span.kind = kind;
  span.trace_id = trace.trace_id;
  span.span_id = trace.span_id;
  span.parent_id = trace.parent_id;
  span.tracestate = trace.tracestate;
  span.start = start;
  span.end = std::chrono::system_clock::now();
  span.status = status;
  span.error = error;
  span.sampled = trace.sampled;
  (*trace.exporter)(span);
}

Middleware trace(TraceOptions options) {
  auto exporter = options.exporter
                      ? std::make_shared<const SpanExporter>(std::move(options.exporter))
                      : nullptr;
  const bool sample_new = options.sample_new_traces;
  return [exporter, sample_new](Handler next) -> Handler {
    return [exporter, sample_new, next = std::move(next)](Request& req, ResponseWriter& w) {
      const auto start = std::chrono::system_clock::now();
      std::vector<std::string_view> states;
      for (const HeaderField& f : req.headers()) {
        if (iequals(f.name, "tracestate")) states.push_back(f.value);
      }
      Trace t = continue_trace(req.header("traceparent"), states, sample_new);
      t.exporter = exporter;
      const Context outer = req.context();
      req.set_context(goro::with_value(outer, trace_key, t));
      try {
        next(req, w);
      } catch (...) {
        // The span ends however the handler leaves; the exception goes on to
        // recover() or the server, which answer 500 unless the response had started.
        req.set_context(outer);
        end_span(t, SpanKind::server, span_name(req), start, w.headers_sent() ? w.status() : 500);
        throw;
      }
      req.set_context(outer);
      end_span(t, SpanKind::server, span_name(req), start, w.status());
    };
  };
}

}  // namespace goro::http
