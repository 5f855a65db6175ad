// W3C Trace Context: the traceparent and tracestate parsers against the spec's valid and
// invalid forms; a trace crossing test client → server A → (http::Client) → server B
// with a span per hop and the exporter seeing the parent links; new traces; the trace
// and request ids in the access log and the structured logger; where goro::grpc is
// built, a gRPC call under a traced context and the server's trace_interceptor. The
// servers run on 1 and 4 Ps.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/client.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/logger.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>
#include <goro/http/trace.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#ifdef GORO_TRACE_TEST_GRPC
#include <google/protobuf/empty.pb.h>

#include <goro/grpc/client.hpp>
#include <goro/grpc/server.hpp>
#endif

namespace goro::http {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view kParent = "00f067aa0ba902b7";

std::string traceparent(std::string_view version, std::string_view trace_id,
                        std::string_view parent_id, std::string_view flags) {
  return std::string(version) + "-" + std::string(trace_id) + "-" + std::string(parent_id) + "-" +
         std::string(flags);
}

bool hex_id(std::string_view id, std::size_t size) {
  return id.size() == size && id.find_first_not_of("0123456789abcdef") == std::string_view::npos &&
         id.find_first_not_of('0') != std::string_view::npos;
}

TEST(TraceParent, ParsesValidForms) {
  struct Case {
    std::string value;
    bool sampled;
  };
  const std::string base = traceparent("00", kTrace, kParent, "01");
  const Case cases[] = {
      {base, true},
      {traceparent("00", kTrace, kParent, "00"), false},
      // Unknown flags are ignored; bit 0 is sampled.
      {traceparent("00", kTrace, kParent, "03"), true},
      {traceparent("00", kTrace, kParent, "fe"), false},
      // Blanks around the value are not part of it.
      {" \t" + base + " ", true},
      // A later version is read by its first four fields.
      {traceparent("01", kTrace, kParent, "01"), true},
      {traceparent("cc", kTrace, kParent, "01") + "-what-the-future-will-be-like", true},
      {traceparent("fe", kTrace, kParent, "00") + "-", false},
  };
  for (const Case& c : cases) {
    std::optional<TraceParent> p = parse_traceparent(c.value);
    ASSERT_TRUE(p) << c.value;
    EXPECT_EQ(p->trace_id, kTrace) << c.value;
    EXPECT_EQ(p->parent_id, kParent) << c.value;
    EXPECT_EQ(p->sampled, c.sampled) << c.value;
  }
}

TEST(TraceParent, RefusesInvalidForms) {
  const std::string upper_trace = "4BF92F3577B34DA6A3CE929D0E0E4736";
  const std::string invalid[] = {
      "",
      "00",
      // Version ff is forbidden; versions are lowercase hex.
      traceparent("ff", kTrace, kParent, "01"),
      traceparent("0A", kTrace, kParent, "01"),
      traceparent("0g", kTrace, kParent, "01"),
      // All-zero ids.
      traceparent("00", "00000000000000000000000000000000", kParent, "01"),
      traceparent("00", kTrace, "0000000000000000", "01"),
      // Uppercase or non-hex digits.
      traceparent("00", upper_trace, kParent, "01"),
      traceparent("00", kTrace, "00F067AA0BA902B7", "01"),
      traceparent("00", kTrace, kParent, "0x"),
      traceparent("00", kTrace, kParent, "0G"),
      traceparent("00", "4bf92f3577b34da6a3ce929d0e0e473z", kParent, "01"),
      // Wrong lengths.
      traceparent("00", kTrace.substr(1), kParent, "01"),
      traceparent("00", std::string(kTrace) + "5", kParent, "01"),
      traceparent("00", kTrace, kParent.substr(1), "01"),
      traceparent("00", kTrace, kParent, "1"),
      traceparent("00", kTrace, kParent, "011"),
      // Version 00 has exactly four fields.
      traceparent("00", kTrace, kParent, "01") + "-",
      traceparent("00", kTrace, kParent, "01") + "-extra",
      // A later version still needs a '-' after its fourth field.
      traceparent("cc", kTrace, kParent, "01") + "x",
      // Other separators.
      "00_" + std::string(kTrace) + "-" + std::string(kParent) + "-01",
      "00-" + std::string(kTrace) + "_" + std::string(kParent) + "-01",
      "00-" + std::string(kTrace) + "-" + std::string(kParent) + "_01",
      std::string(55, '-'),
  };
  for (const std::string& value : invalid) EXPECT_FALSE(parse_traceparent(value)) << value;
}

TEST(TraceParent, FormatsWhatItParses) {
  const std::string written = format_traceparent(kTrace, kParent, true);
  EXPECT_EQ(written, traceparent("00", kTrace, kParent, "01"));
  EXPECT_EQ(format_traceparent(kTrace, kParent, false), traceparent("00", kTrace, kParent, "00"));
  std::optional<TraceParent> back = parse_traceparent(written);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->trace_id, kTrace);
  EXPECT_EQ(back->parent_id, kParent);
  EXPECT_TRUE(back->sampled);
}

TEST(TraceParent, NewIdsAreRandomHexAndNotZero) {
  std::vector<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string t = new_trace_id(), s = new_span_id();
    EXPECT_TRUE(hex_id(t, 32)) << t;
    EXPECT_TRUE(hex_id(s, 16)) << s;
    seen.push_back(std::move(s));
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
}

std::string tracestate(std::initializer_list<std::string_view> lines) {
  std::vector<std::string_view> list(lines);
  return parse_tracestate(list);
}

TEST(TraceState, KeepsValidListsAndCombinesLines) {
  EXPECT_EQ(tracestate({}), "");
  EXPECT_EQ(tracestate({"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}),
            "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  // Blanks around members and empty members go.
  EXPECT_EQ(tracestate({" rojo=1 ,, \tcongo=2\t,"}), "rojo=1,congo=2");
  // Several header lines are one list, in order.
  EXPECT_EQ(tracestate({"rojo=1", "congo=2,blue=3"}), "rojo=1,congo=2,blue=3");
  // Keys: lowercase, digits, _-*/ and tenant@system; values: printable but ',' and '='.
  EXPECT_EQ(tracestate({"a_-*/9=x", "1tenant@sys_-*/=v", "k=a b!~\"<>"}),
            "a_-*/9=x,1tenant@sys_-*/=v,k=a b!~\"<>");
  EXPECT_EQ(tracestate({"k=" + std::string(256, 'v')}), "k=" + std::string(256, 'v'));
  EXPECT_EQ(tracestate({std::string(256, 'k') + "=v"}), std::string(256, 'k') + "=v");
}

TEST(TraceState, DropsInvalidLists) {
  const std::string invalid[] = {
      "Rojo=1",                        // uppercase key
      "1a=1",                          // a simple key starts with a letter
      "a=1,b",                         // member without '='
      "a=",                            // empty value
      "=1",                            // empty key
      "a=b=c",                         // '=' in a value
      "a=1\x7f",                       // not printable
      "a=\x01",                        // control character
      "a=1,a=2",                       // repeated key
      "t@=1",                          // empty system id
      "@s=1",                          // empty tenant id
      "t@s0123456789abcd=1",           // system id over 14
      "t@1s=1",                        // system id starts with a letter
      "k=" + std::string(257, 'v'),    // value over 256
      std::string(257, 'k') + "=v",    // key over 256
      std::string(242, 't') + "@s=1",  // tenant id over 241
      "ok=1,k\xc3\xa9=1",              // non-ASCII key
  };
  for (const std::string& value : invalid) {
    EXPECT_EQ(tracestate({value}), "") << value;
    // One bad line spoils the combined list.
    EXPECT_EQ(tracestate({"good=1", value}), "") << value;
  }
}

TEST(TraceState, LimitsMembersAndSize) {
  std::string list;
  for (int i = 0; i < 32; ++i) list += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_EQ(tracestate({list}), list);
  EXPECT_EQ(tracestate({list + ",k32=v"}), "");
  EXPECT_EQ(tracestate({list, "k32=v"}), "");

  // Past 512 bytes: members over 128 bytes go first, then members from the end.
  const std::string big = "big=" + std::string(200, 'b');
  std::string members;
  for (int i = 0; i < 8; ++i) members += ",m" + std::to_string(i) + "=" + std::string(50, 'x');
  const std::string cut = tracestate({big + members});
  EXPECT_LE(cut.size(), kMaxTraceState);
  EXPECT_EQ(cut, members.substr(1));
  std::string longer = members;
  for (int i = 8; i < 12; ++i) longer += ",m" + std::to_string(i) + "=" + std::string(50, 'x');
  const std::string trimmed = tracestate({longer.substr(1)});
  EXPECT_LE(trimmed.size(), kMaxTraceState);
  EXPECT_EQ(trimmed.rfind("m0=", 0), 0u);
  EXPECT_EQ(trimmed.find("m11="), std::string::npos);
  EXPECT_EQ(longer.substr(1).rfind(trimmed, 0), 0u) << "members are cut from the end";
}

// What the exporter and the handlers saw, from many goroutines.
struct Seen {
  std::mutex mu;
  std::vector<Span> spans;
  std::vector<std::string> log_lines;
  Trace b_trace;
  std::string b_traceparent, b_tracestate;

  SpanExporter exporter() {
    return [this](const Span& s) {
      std::lock_guard lock(mu);
      spans.push_back(s);
    };
  }
  LogSink sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu);
      log_lines.emplace_back(line);
    };
  }
  std::optional<Span> span(SpanKind kind, std::string_view name_prefix) {
    std::lock_guard lock(mu);
    for (const Span& s : spans) {
      if (s.kind == kind && s.name.rfind(name_prefix, 0) == 0) return s;
    }
    return std::nullopt;
  }
  std::size_t span_count() {
    std::lock_guard lock(mu);
    return spans.size();
  }
};

// Server B, which records the trace it sees, and server A, whose handler calls B with
// http::Client under the request's context.
struct Hops {
  httptest::Server b, a;
};

Hops start_hops(Seen& seen, TraceOptions options) {
  options.exporter = seen.exporter();
  Handler b_handler = [&seen](Request& req, ResponseWriter& w) {
    {
      std::lock_guard lock(seen.mu);
      if (const Trace* t = trace_of(req)) seen.b_trace = *t;
      seen.b_traceparent = std::string(req.header("traceparent"));
      seen.b_tracestate = std::string(req.header("tracestate"));
    }
    w.text("b");
  };
  Result<httptest::Server> b = httptest::Server::start(chain(b_handler, {trace(options)}));
  EXPECT_TRUE(b);
  auto client = std::make_shared<Client>();
  const std::string b_url = b->url() + "/b";
  Handler a_handler = [client, b_url](Request& req, ResponseWriter& w) {
    Result<ClientResponse> r = client->get(b_url, req.context());
    w.text(r ? "a+" + r->body : "a: " + r.error().message());
  };
  Result<httptest::Server> a = httptest::Server::start(
      chain(a_handler,
            {trace(options), request_id(), access_log({AccessLogFormat::logfmt, seen.sink()})}));
  EXPECT_TRUE(a);
  return Hops{std::move(*b), std::move(*a)};
}

bool wait_for_spans(Seen& seen, std::size_t n) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (seen.span_count() < n) {
    if (std::chrono::steady_clock::now() > until) return false;
    goro::sleep(1ms);
  }
  return true;
}

class TracePropagation : public ::testing::TestWithParam<int> {};

TEST_P(TracePropagation, CrossesServerClientServer) {
  Seen seen;
  goro::run(
      [&] {
        Hops hops = start_hops(seen, {});
        Client client;
        ClientRequest req;
        req.url = hops.a.url() + "/a?secret=1";
        req.headers.set("traceparent", traceparent("00", kTrace, kParent, "01"));
        req.headers.add("tracestate", "rojo=00f067aa0ba902b7");
        req.headers.add("tracestate", "congo=t61rcWkgMzE");
        Result<ClientResponse> r = client.send(req);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->body, "a+b");
        ASSERT_TRUE(wait_for_spans(seen, 3)) << seen.span_count() << " spans";
        hops.a.close();
        hops.b.close();
      },
      goro::Config{.maxprocs = GetParam()});

  std::optional<Span> a_server = seen.span(SpanKind::server, "GET /a");
  std::optional<Span> a_client = seen.span(SpanKind::client, "GET http://");
  std::optional<Span> b_server = seen.span(SpanKind::server, "GET /b");
  ASSERT_TRUE(a_server && a_client && b_server);
  // A honours the incoming traceparent: same trace, its parent is the caller's span.
  EXPECT_EQ(a_server->trace_id, kTrace);
  EXPECT_EQ(a_server->parent_id, kParent);
  EXPECT_TRUE(hex_id(a_server->span_id, 16));
  EXPECT_NE(a_server->span_id, kParent);
  EXPECT_EQ(a_server->status, 200);
  EXPECT_TRUE(a_server->sampled);
  EXPECT_LE(a_server->start, a_server->end);
  // A's client span is a child of A's server span, named without the query.
  EXPECT_EQ(a_client->trace_id, kTrace);
  EXPECT_EQ(a_client->parent_id, a_server->span_id);
  EXPECT_NE(a_client->span_id, a_server->span_id);
  EXPECT_EQ(a_client->name.find('?'), std::string::npos) << a_client->name;
  EXPECT_EQ(a_client->status, 200);
  // B continues the trace with A's client span as its parent.
  EXPECT_EQ(b_server->trace_id, kTrace);
  EXPECT_EQ(b_server->parent_id, a_client->span_id);
  EXPECT_EQ(seen.b_trace.trace_id, kTrace);
  EXPECT_EQ(seen.b_trace.parent_id, a_client->span_id);
  EXPECT_EQ(seen.b_trace.span_id, b_server->span_id);
  EXPECT_EQ(seen.b_traceparent, format_traceparent(kTrace, a_client->span_id, true));
  // The two tracestate lines, combined, travel on.
  EXPECT_EQ(seen.b_tracestate, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(b_server->tracestate, seen.b_tracestate);

  // A's access log line carries its trace and span.
  ASSERT_EQ(seen.log_lines.size(), 1u);
  const std::string& line = seen.log_lines[0];
  EXPECT_NE(line.find(" trace_id=" + std::string(kTrace) + " span_id=" + a_server->span_id),
            std::string::npos)
      << line;
}

TEST_P(TracePropagation, RequestWithoutTraceparentStartsATrace) {
  for (bool sample : {true, false}) {
    Seen seen;
    goro::run(
        [&] {
          Hops hops = start_hops(seen, {.sample_new_traces = sample});
          Client client;
          ClientRequest req;
          req.url = hops.a.url() + "/a";
          // Invalid: treated as absent.
          if (!sample) req.headers.set("traceparent", traceparent("00", kTrace, kParent, "0z"));
          req.headers.set("tracestate", "rojo=1");
          Result<ClientResponse> r = client.send(req);
          ASSERT_TRUE(r) << r.error().message();
          EXPECT_EQ(r->body, "a+b");
          ASSERT_TRUE(wait_for_spans(seen, 3)) << seen.span_count() << " spans";
          hops.a.close();
          hops.b.close();
        },
        goro::Config{.maxprocs = GetParam()});
    std::optional<Span> a_server = seen.span(SpanKind::server, "GET /a");
    std::optional<Span> a_client = seen.span(SpanKind::client, "GET http://");
    std::optional<Span> b_server = seen.span(SpanKind::server, "GET /b");
    ASSERT_TRUE(a_server && a_client && b_server);
    EXPECT_TRUE(hex_id(a_server->trace_id, 32));
    EXPECT_NE(a_server->trace_id, kTrace);
    EXPECT_EQ(a_server->parent_id, "");
    EXPECT_EQ(a_server->sampled, sample);
    // A tracestate without its traceparent is not passed on.
    EXPECT_EQ(a_server->tracestate, "");
    EXPECT_EQ(seen.b_tracestate, "");
    EXPECT_EQ(b_server->trace_id, a_server->trace_id);
    EXPECT_EQ(b_server->parent_id, a_client->span_id);
    EXPECT_EQ(a_client->parent_id, a_server->span_id);
    EXPECT_EQ(seen.b_traceparent,
              format_traceparent(a_server->trace_id, a_client->span_id, sample));
  }
}

INSTANTIATE_TEST_SUITE_P(Procs, TracePropagation, ::testing::Values(1, 4));

TEST(TraceMiddleware, ReportsTheRoutePatternAndAThrowingHandler) {
  Seen seen;
  goro::run([&] {
    Router router;
    router.handle("GET /users/{id}", [](Request&, ResponseWriter& w) { w.text("u"); });
    router.handle("GET /boom", [](Request&, ResponseWriter&) { throw std::runtime_error("boom"); });
    Handler h =
        chain(router, {recover([](std::string_view) {}), trace({.exporter = seen.exporter()})});
    EXPECT_EQ(httptest::record(h, httptest::new_request("GET", "/users/7")).status, 200);
    EXPECT_EQ(httptest::record(h, httptest::new_request("GET", "/boom")).status, 500);
  });
  ASSERT_EQ(seen.spans.size(), 2u);
  EXPECT_EQ(seen.spans[0].name, "GET /users/{id}");
  EXPECT_EQ(seen.spans[0].status, 200);
  EXPECT_EQ(seen.spans[1].name, "GET /boom");
  EXPECT_EQ(seen.spans[1].status, 500);
}

TEST(AccessLogTrace, EveryFormatCarriesTheIds) {
  const std::string incoming = traceparent("00", kTrace, kParent, "01");
  for (AccessLogFormat format :
       {AccessLogFormat::common, AccessLogFormat::logfmt, AccessLogFormat::json}) {
    Seen seen;
    Handler h = [](Request& req, ResponseWriter& w) {
      const Trace* t = trace_of(req);
      w.text(t ? t->span_id : "none");
    };
    Handler traced = chain(h, {trace(), access_log({format, seen.sink()})});
    Handler untraced = chain(h, {access_log({format, seen.sink()})});
    httptest::Recorded r = httptest::record(
        traced, httptest::new_request("GET", "/x").header("traceparent", incoming));
    httptest::record(untraced, httptest::new_request("GET", "/y").header("traceparent", incoming));
    ASSERT_EQ(seen.log_lines.size(), 2u);
    const std::string& with = seen.log_lines[0];
    const std::string& without = seen.log_lines[1];
    const std::string span = r.body;
    ASSERT_TRUE(hex_id(span, 16)) << span;
    switch (format) {
      case AccessLogFormat::common:
        EXPECT_TRUE(with.ends_with("ms " + std::string(kTrace) + " " + span)) << with;
        EXPECT_TRUE(without.ends_with("ms - -")) << without;
        break;
      case AccessLogFormat::logfmt:
        EXPECT_TRUE(with.ends_with(" trace_id=" + std::string(kTrace) + " span_id=" + span))
            << with;
        EXPECT_TRUE(without.ends_with(" trace_id=- span_id=-")) << without;
        break;
      case AccessLogFormat::json:
        EXPECT_TRUE(with.ends_with(R"(,"trace_id":")" + std::string(kTrace) + R"(","span_id":")" +
                                   span + "\"}"))
            << with;
        EXPECT_TRUE(without.ends_with(R"(,"trace_id":null,"span_id":null})")) << without;
        break;
    }
  }
}

TEST(AccessLogTrace, ServerRepliesCarryTheIncomingTrace) {
  Seen seen;
  ServerOptions options;
  options.max_header_bytes = 1024;
  options.on_error_reply = log_error_replies({AccessLogFormat::logfmt, seen.sink()});
  Handler h = [](Request&, ResponseWriter& w) { w.text("never"); };
  httptest::Recorded r =
      httptest::record(h,
                       httptest::new_request("GET", "/")
                           .header("traceparent", traceparent("00", kTrace, kParent, "01"))
                           .header("x-big", std::string(2000, 'a')),
                       options);
  EXPECT_EQ(r.status, 431);
  ASSERT_EQ(seen.log_lines.size(), 1u);
  EXPECT_NE(seen.log_lines[0].find(" trace_id=" + std::string(kTrace) + " span_id=-"),
            std::string::npos)
      << seen.log_lines[0];
}

TEST(Logger, StampsTraceAndRequestIds) {
  for (LogFormat format : {LogFormat::logfmt, LogFormat::json}) {
    Seen seen;
    Logger log({.min_level = LogLevel::info, .format = format, .sink = seen.sink()});
    Handler h = [&log](Request& req, ResponseWriter& w) {
      log.debug(req, "dropped");
      log.info(req, "user loaded", {{"user", "ann lee"}, {"rows", 3}, {"ok", true}, {"ms", 1.5}});
      w.text("ok");
    };
    Handler app = chain(h, {trace(), request_id()});
    httptest::record(app, httptest::new_request("GET", "/")
                              .header("traceparent", traceparent("00", kTrace, kParent, "01"))
                              .header("x-request-id", "req-1"));
    log.warn(goro::background(), "no request", {{"n", -2}});
    log.set_min_level(LogLevel::error);
    log.warn(goro::background(), "dropped too");
    log.error(goro::background(), "bad \"thing\"");
    ASSERT_EQ(seen.log_lines.size(), 3u);
    const std::string& l = seen.log_lines[0];
    if (format == LogFormat::logfmt) {
      EXPECT_EQ(l.rfind("time=20", 0), 0u) << l;
      EXPECT_NE(
          l.find(" level=info msg=\"user loaded\" trace_id=" + std::string(kTrace) + " span_id="),
          std::string::npos)
          << l;
      EXPECT_TRUE(l.ends_with(" request_id=req-1 user=\"ann lee\" rows=3 ok=true ms=1.5")) << l;
      EXPECT_NE(seen.log_lines[1].find(" level=warn msg=\"no request\" n=-2"), std::string::npos)
          << seen.log_lines[1];
      EXPECT_EQ(seen.log_lines[1].find("trace_id"), std::string::npos) << seen.log_lines[1];
      EXPECT_NE(seen.log_lines[2].find(R"( level=error msg="bad \"thing\"")"), std::string::npos)
          << seen.log_lines[2];
    } else {
      EXPECT_EQ(l.rfind(R"({"time":"20)", 0), 0u) << l;
      EXPECT_NE(l.find(R"(,"level":"info","msg":"user loaded","trace_id":")" + std::string(kTrace) +
                       R"(","span_id":")"),
                std::string::npos)
          << l;
      EXPECT_TRUE(
          l.ends_with(R"(,"request_id":"req-1","user":"ann lee","rows":3,"ok":true,"ms":1.5})"))
          << l;
      EXPECT_TRUE(seen.log_lines[1].ends_with(R"("level":"warn","msg":"no request","n":-2})"))
          << seen.log_lines[1];
      EXPECT_TRUE(seen.log_lines[2].ends_with(R"("level":"error","msg":"bad \"thing\""})"))
          << seen.log_lines[2];
    }
  }
}

#ifdef GORO_TRACE_TEST_GRPC
// A unary call made under a traced context is a client span whose id reaches the
// server's trace_interceptor as its span's parent. The call is the health service's
// Check: Empty serialises as an empty HealthCheckRequest, and the reply parses as Empty.
TEST_P(TracePropagation, GrpcCallCarriesTheTrace) {
  Seen seen;
  goro::run(
      [&] {
        grpc::ServerOptions options;
        options.interceptors.push_back(grpc::trace_interceptor({.exporter = seen.exporter()}));
        grpc::Server server(std::move(options));
        Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
        ASSERT_TRUE(listener);
        goro::WaitGroup serving;
        serving.add(1);
        goro::go([&] {
          server.serve(*listener);
          serving.done();
        });
        auto channel =
            grpc::Channel::create("127.0.0.1:" + std::to_string(listener->addr().port()));
        Trace root{std::string(kTrace),
                   std::string(kParent),
                   "",
                   true,
                   "rojo=1",
                   std::make_shared<const SpanExporter>(seen.exporter())};
        grpc::ClientContext ctx(goro::with_value(goro::background(), trace_key, root));
        google::protobuf::Empty request, response;
        grpc::Status status =
            grpc::call_unary(*channel, ctx, "/grpc.health.v1.Health/Check", request, response);
        EXPECT_TRUE(status.ok()) << status.message();
        EXPECT_TRUE(wait_for_spans(seen, 2)) << seen.span_count() << " spans";
        server.shutdown(std::chrono::steady_clock::now() + 1s);
        serving.wait();
      },
      goro::Config{.maxprocs = GetParam()});
  std::optional<Span> client = seen.span(SpanKind::client, "grpc.health.v1.Health/Check");
  std::optional<Span> server = seen.span(SpanKind::server, "grpc.health.v1.Health/Check");
  ASSERT_TRUE(client && server);
  EXPECT_EQ(client->trace_id, kTrace);
  EXPECT_EQ(client->parent_id, kParent);
  EXPECT_EQ(client->status, 0);  // OK
  EXPECT_EQ(server->trace_id, kTrace);
  EXPECT_EQ(server->parent_id, client->span_id);
  EXPECT_EQ(server->tracestate, "rojo=1");
  EXPECT_EQ(server->status, 0);
}
#endif

}  // namespace
}  // namespace goro::http
