// goro::http::metrics: the exact text Prometheus reads (labels, escaping, buckets), name
// validation, counts that stay exact under contention on several Ps, the instrument()
// middleware through the real server code and over sockets, the runtime and process
// metrics, and promtool's verdict on what we render.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/httptest.hpp>
#include <goro/http/metrics.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>
#include <goro/net/dial.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::http {
namespace {

namespace ht = httptest;
using namespace std::chrono_literals;
using metrics::Registry;

template <class F>
void on_runtime(int procs, F fn) {
  goro::run(fn, goro::Config{.maxprocs = procs});
}

// The value of the sample whose series (name and labels, as rendered) is `series`.
std::optional<double> sample(std::string_view text, std::string_view series) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (line.size() > series.size() && line.starts_with(series) && line[series.size()] == ' ') {
      return std::stod(std::string(line.substr(series.size() + 1)));
    }
    at = end + 1;
  }
  return std::nullopt;
}

TEST(MetricsExposition, CounterGaugeAndHistogramWithLabelsAndEscaping) {
  Registry reg;
  auto requests = reg.counter_family(
      "app_requests_total", "Requests by path.\nA \\ and a \"quote\" stay.", {"path", "code"});
  requests.with_labels({"/a\"b\\c\nd", "200"}).add(3);
  requests.with_labels({"/", "404"}).inc();
  reg.gauge("app_temperature_celsius", "Temperature.").set(-1.5);
  auto latency = reg.histogram_family("app_latency_seconds", "Latency.", {"method"}, {0.5, 1, 2.5});
  metrics::Histogram& get = latency.with_labels({"GET"});
  get.observe(0.25);
  get.observe(0.5);  // a bound is inclusive: le="0.5"
  get.observe(3.0);
  reg.counter_family("app_unused_total", "No child yet, so not rendered.", {"x"});

  EXPECT_EQ(reg.render(),
            "# HELP app_latency_seconds Latency.\n"
            "# TYPE app_latency_seconds histogram\n"
            "app_latency_seconds_bucket{method=\"GET\",le=\"0.5\"} 2\n"
            "app_latency_seconds_bucket{method=\"GET\",le=\"1\"} 2\n"
            "app_latency_seconds_bucket{method=\"GET\",le=\"2.5\"} 2\n"
            "app_latency_seconds_bucket{method=\"GET\",le=\"+Inf\"} 3\n"
            "app_latency_seconds_sum{method=\"GET\"} 3.75\n"
            "app_latency_seconds_count{method=\"GET\"} 3\n"
            "# HELP app_requests_total Requests by path.\\nA \\\\ and a \"quote\" stay.\n"
            "# TYPE app_requests_total counter\n"
            "app_requests_total{path=\"/\",code=\"404\"} 1\n"
            "app_requests_total{path=\"/a\\\"b\\\\c\\nd\",code=\"200\"} 3\n"
            "# HELP app_temperature_celsius Temperature.\n"
            "# TYPE app_temperature_celsius gauge\n"
            "app_temperature_celsius -1.5\n");
  EXPECT_EQ(get.count(), 3u);
  EXPECT_EQ(get.sum(), 3.75);
}

TEST(MetricsExposition, DefaultBucketsSpecialValuesAndFunctions) {
  Registry reg;
  metrics::Histogram& h = reg.histogram("op_seconds", "");
  h.observe(std::chrono::milliseconds(20));
  h.observe(std::numeric_limits<double>::quiet_NaN());
  reg.gauge("g_inf", "").set(std::numeric_limits<double>::infinity());
  reg.gauge("g_neg_inf", "").set(-std::numeric_limits<double>::infinity());
  reg.gauge("g_big", "").set(1e21);
  reg.gauge("g_fixed", "").set(123456.5);
  reg.gauge("g_exp", "").set(1234567);
  reg.gauge("g_small", "").set(0.00001);
  reg.counter("c_frac_total", "").add(0.5);
  reg.gauge_func("g_func", "Computed.", [] { return 42.0; });
  reg.counter_func("c_func_total", "Computed.", [] { return 7.0; });
  const std::string text = reg.render();

  std::string les;
  for (const char* le :
       {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}) {
    les += std::string("op_seconds_bucket{le=\"") + le + "\"}";
    les += std::string(le) == "0.005" || std::string(le) == "0.01" ? " 0\n" : " 1\n";
  }
  les.replace(les.rfind(" 1\n"), 3, " 2\n");  // the NaN counts in +Inf only
  EXPECT_NE(
      text.find("# TYPE op_seconds histogram\n" + les + "op_seconds_sum NaN\nop_seconds_count 2\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("# HELP op_seconds"), std::string::npos) << "empty help: no HELP line";
  EXPECT_NE(text.find("\ng_inf +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ng_neg_inf -Inf\n"), std::string::npos) << text;
  // As Go writes a float: exponent form below 1e-4 and from 1e+06 on.
  EXPECT_NE(text.find("\ng_big 1e+21\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ng_fixed 123456.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ng_exp 1.234567e+06\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ng_small 1e-05\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nc_frac_total 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP g_func Computed.\n# TYPE g_func gauge\ng_func 42\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE c_func_total counter\nc_func_total 7\n"), std::string::npos);
}

TEST(MetricsRegistry, RejectsBadNamesLabelsAndDefinitions) {
  Registry reg;
  for (const char* bad : {"", "1abc", "a-b", "a b", "é", "a{b}"}) {
    EXPECT_THROW(reg.counter(bad, "h"), std::invalid_argument) << bad;
  }
  EXPECT_NO_THROW(reg.counter("ns:sub_name_total", "colons are allowed in metric names"));
  for (const char* bad : {"", "1x", "a:b", "__reserved", "a-b"}) {
    EXPECT_THROW(reg.counter_family("m_total", "h", {bad}), std::invalid_argument) << bad;
  }
  EXPECT_THROW(reg.counter_family("dup_total", "h", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(reg.histogram_family("h_seconds", "h", {"le"}), std::invalid_argument);
  EXPECT_THROW(reg.histogram("h2_seconds", "h", {1, 1}), std::invalid_argument);
  EXPECT_THROW(reg.histogram("h3_seconds", "h", {2, 1}), std::invalid_argument);
  EXPECT_THROW(reg.histogram("h4_seconds", "h", {std::numeric_limits<double>::quiet_NaN()}),
               std::invalid_argument);
  EXPECT_THROW(reg.counter("bad_help_total", "\xff"), std::invalid_argument);

  // The same definition again is the same metric; any other definition is refused.
  metrics::Counter& c = reg.counter("jobs_total", "Jobs.");
  EXPECT_EQ(&reg.counter("jobs_total", "Jobs."), &c);
  EXPECT_THROW(reg.counter("jobs_total", "Other help."), std::invalid_argument);
  EXPECT_THROW(reg.gauge("jobs_total", "Jobs."), std::invalid_argument);
  EXPECT_THROW(reg.counter_family("jobs_total", "Jobs.", {"kind"}), std::invalid_argument);
  EXPECT_THROW(reg.gauge_func("jobs_total", "Jobs.", [] { return 1.0; }), std::invalid_argument);
  // A histogram writes name_bucket, name_sum and name_count: none may clash.
  reg.histogram("rpc_seconds", "RPCs.");
  EXPECT_THROW(reg.counter("rpc_seconds_count", "h"), std::invalid_argument);
  reg.gauge("queue_sum", "h");
  EXPECT_THROW(reg.histogram("queue", "h"), std::invalid_argument);
  // A trailing +Inf bound is implied, so giving it changes nothing.
  metrics::Histogram& with_inf =
      reg.histogram("sizes_bytes", "h", {1, 10, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(with_inf.bounds().size(), 2u);
  EXPECT_EQ(&reg.histogram("sizes_bytes", "h", {1, 10}), &with_inf);

  auto family = reg.counter_family("by_two_total", "h", {"a", "b"});
  EXPECT_THROW(family.with_labels({"x"}), std::invalid_argument);
  EXPECT_THROW(family.with_labels({"x", "y", "z"}), std::invalid_argument);
  EXPECT_THROW(family.with_labels({"x", "\xc3\x28"}), std::invalid_argument);
  EXPECT_EQ(&family.with_labels({"x", "y"}), &family.with_labels({"x", "y"}));
  EXPECT_THROW(c.add(-1), std::invalid_argument);
  EXPECT_THROW(metrics::linear_buckets(0, 0, 3), std::invalid_argument);
  EXPECT_EQ(metrics::linear_buckets(1, 2, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(metrics::exponential_buckets(100, 10, 3), (std::vector<double>{100, 1000, 10000}));
}

class MetricsOnPs : public ::testing::TestWithParam<int> {};

// Goroutines on every P update the same metrics, and children appear under them as they
// do: not one update is lost.
TEST_P(MetricsOnPs, ConcurrentUpdatesSumExactly) {
  constexpr int goroutines = 64;
  constexpr int updates = 2000;
  Registry reg;
  metrics::Counter& counter = reg.counter("hits_total", "h");
  metrics::Gauge& gauge = reg.gauge("level", "h");
  metrics::Histogram& histogram = reg.histogram("work_seconds", "h", {0.5, 1.5});
  auto by_shard = reg.counter_family("shard_hits_total", "h", {"shard"});
  on_runtime(GetParam(), [&] {
    WaitGroup wg;
    wg.add(goroutines);
    for (int i = 0; i < goroutines; ++i) {
      goro::go([&, i] {
        const std::string shard = std::to_string(i % 4);
        for (int k = 0; k < updates; ++k) {
          counter.inc();
          gauge.inc();
          if (k % 2 == 1) gauge.dec();
          histogram.observe(static_cast<double>(k % 2));  // 0 and 1: two buckets
          by_shard.with_labels({shard}).inc();
          if (k % 256 == 0) goro::yield();
        }
        wg.done();
      });
    }
    wg.wait();
  });
  const std::uint64_t total = std::uint64_t{goroutines} * updates;
  EXPECT_EQ(counter.value(), static_cast<double>(total));
  EXPECT_EQ(gauge.value(), static_cast<double>(total / 2));
  EXPECT_EQ(histogram.count(), total);
  EXPECT_EQ(histogram.bucket_count(0), total / 2);
  EXPECT_EQ(histogram.bucket_count(1), total / 2);
  EXPECT_EQ(histogram.sum(), static_cast<double>(total / 2));
  double shards = 0;
  for (const char* s : {"0", "1", "2", "3"}) shards += by_shard.with_labels({s}).value();
  EXPECT_EQ(shards, static_cast<double>(total));
  const std::string text = reg.render();
  EXPECT_EQ(sample(text, "hits_total"), static_cast<double>(total)) << text;
  EXPECT_EQ(sample(text, "work_seconds_count"), static_cast<double>(total)) << text;
}

INSTANTIATE_TEST_SUITE_P(Ps, MetricsOnPs, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Ps"; });

TEST(MetricsInstrument, CountsByMethodRouteAndCodeAndInFlightReturnsToZero) {
  Registry reg;
  Router r;
  double in_flight_inside = -1;
  r.handle("GET /ok", [&](Request&, ResponseWriter& w) {
    in_flight_inside =
        reg.gauge("http_requests_in_flight", "HTTP requests being handled now.").value();
    w.text("hello");
  });
  r.handle("POST /items", [](Request&, ResponseWriter& w) { w.text("made", 201); });
  r.handle("/any", [](Request&, ResponseWriter& w) { w.set_status(204); });
  r.handle("GET /boom", [](Request&, ResponseWriter&) { throw std::runtime_error("boom"); });
  ServerOptions quiet;
  quiet.error_log = [](std::string_view) {};
  Handler app = chain(r, {metrics::instrument({.registry = &reg})});

  on_runtime(4, [&] {
    EXPECT_EQ(ht::record(app, ht::new_request("GET", "/ok")).status, 200);
    EXPECT_EQ(ht::record(app, ht::new_request("GET", "/ok")).status, 200);
    EXPECT_EQ(ht::record(app, ht::new_request("HEAD", "/ok")).status, 200);
    EXPECT_EQ(ht::record(app, ht::new_request("POST", "/items", "x")).status, 201);
    EXPECT_EQ(ht::record(app, ht::new_request("GET", "/missing")).status, 404);
    EXPECT_EQ(ht::record(app, ht::new_request("DELETE", "/ok")).status, 405);
    EXPECT_EQ(ht::record(app, ht::new_request("PROPFIND", "/any")).status, 204);
    EXPECT_EQ(ht::record(app, ht::new_request("GET", "/boom"), quiet).status, 500);
  });
  EXPECT_EQ(in_flight_inside, 1);
  const std::string text = reg.render();
  EXPECT_EQ(sample(text, R"(http_requests_total{method="GET",route="GET /ok",code="200"})"), 2) << text;
  EXPECT_EQ(sample(text, R"(http_requests_total{method="HEAD",route="GET /ok",code="200"})"), 1) << text;
  EXPECT_EQ(sample(text, R"(http_requests_total{method="POST",route="POST /items",code="201"})"), 1) << text;
  EXPECT_EQ(sample(text, R"(http_requests_total{method="GET",route="none",code="404"})"), 1) << text;
  EXPECT_EQ(sample(text, R"(http_requests_total{method="DELETE",route="none",code="405"})"), 1) << text;
  EXPECT_EQ(sample(text, R"(http_requests_total{method="other",route="/any",code="204"})"), 1) << text;
  EXPECT_EQ(sample(text, R"(http_requests_total{method="GET",route="GET /boom",code="500"})"), 1) << text;
  EXPECT_EQ(text.find("PROPFIND"), std::string::npos) << "unknown methods are \"other\"";
  EXPECT_EQ(sample(text, "http_requests_in_flight"), 0) << text;
  EXPECT_EQ(sample(text, R"(http_request_duration_seconds_count{method="GET"})"), 4) << text;
  EXPECT_EQ(sample(text, R"(http_response_size_bytes_sum{method="GET"})"),
            5 + 5 + std::string_view("404 page not found\n").size())
      << text;
  EXPECT_EQ(sample(text, R"(http_response_size_bytes_bucket{method="POST",le="100"})"), 1) << text;
  // Bounds read as Go writes them, since queries match le as text.
  EXPECT_EQ(sample(text, R"(http_response_size_bytes_bucket{method="POST",le="100000"})"), 1)
      << text;
  EXPECT_EQ(sample(text, R"(http_response_size_bytes_bucket{method="POST",le="1e+06"})"), 1)
      << text;
}

// Over real sockets: requests parked in the handler are in flight, all of them, and once
// answered the gauge is back at zero and every one was counted.
TEST(MetricsInstrument, InFlightFollowsParkedRequestsOverSockets) {
  constexpr int clients = 8;
  Registry reg;
  metrics::Gauge& in_flight =
      reg.gauge("http_requests_in_flight", "HTTP requests being handled now.");
  on_runtime(4, [&] {
    Chan<int> release;
    Handler slow = [release](Request&, ResponseWriter& w) {
      release.recv();
      w.text("done");
    };
    auto srv = ht::Server::start(chain(slow, {metrics::instrument({.registry = &reg})}));
    ASSERT_TRUE(srv) << srv.error().message();
    WaitGroup wg;
    wg.add(clients);
    std::atomic<int> ok{0};
    for (int i = 0; i < clients; ++i) {
      goro::go([&] {
        auto resp = srv->client().get(srv->url() + "/slow");
        if (resp && resp->status == 200 && resp->body == "done") ok.fetch_add(1);
        wg.done();
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (in_flight.value() < clients && std::chrono::steady_clock::now() < deadline) {
      goro::sleep(1ms);
    }
    EXPECT_EQ(in_flight.value(), clients);
    release.close();
    wg.wait();
    EXPECT_EQ(ok.load(), clients);
    EXPECT_EQ(in_flight.value(), 0);
    srv->close();
  });
  EXPECT_EQ(sample(reg.render(), R"(http_requests_total{method="GET",route="none",code="200"})"),
            clients);
}

TEST(MetricsHandler, ServesTheTextFormatToGetAndHeadOnly) {
  Registry reg;
  reg.counter("things_total", "Things.").add(2);
  Handler h = metrics::handler(reg);
  on_runtime(2, [&] {
    ht::Recorded get = ht::record(h, ht::new_request("GET", "/metrics"));
    EXPECT_EQ(get.status, 200);
    EXPECT_EQ(get.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(get.body,
              "# HELP things_total Things.\n# TYPE things_total counter\nthings_total 2\n");
    ht::Recorded head = ht::record(h, ht::new_request("HEAD", "/metrics"));
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.header("content-length"), std::to_string(get.body.size()));
    EXPECT_EQ(head.body, "");
    for (const char* method : {"POST", "PUT", "DELETE"}) {
      ht::Recorded refused = ht::record(h, ht::new_request(method, "/metrics"));
      EXPECT_EQ(refused.status, 405) << method;
      EXPECT_EQ(refused.header("allow"), "GET, HEAD") << method;
    }
  });
}

// goro_goroutines counts goroutines as they start and as they return; the rest of the
// runtime and process metrics are there with plausible values, on a real /metrics.
TEST(MetricsRuntime, GoroutineGaugeFollowsGoroutines) {
  constexpr int extra = 50;
  on_runtime(4, [&] {
    Registry& reg = metrics::default_registry();
    auto goroutines = [&] { return sample(reg.render(), "goro_goroutines").value_or(-1); };
    const double before = goroutines();
    EXPECT_GE(before, 1);
    Chan<int> release;
    WaitGroup started;
    started.add(extra);
    for (int i = 0; i < extra; ++i) {
      goro::go([release, &started] {
        started.done();
        release.recv();
      });
    }
    started.wait();
    EXPECT_EQ(goroutines(), before + extra);
    release.close();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (goroutines() != before && std::chrono::steady_clock::now() < deadline) goro::sleep(1ms);
    EXPECT_EQ(goroutines(), before);

    auto srv = ht::Server::start(metrics::handler());
    ASSERT_TRUE(srv) << srv.error().message();
    auto resp = srv->client().get(srv->url() + "/metrics");
    ASSERT_TRUE(resp) << resp.error().message();
    srv->close();
    const std::string& text = resp->body;
    EXPECT_EQ(sample(text, "goro_procs"), 4) << text;
    EXPECT_GE(sample(text, "goro_goroutines").value_or(0), 2) << "main and the connection's";
    EXPECT_GE(sample(text, "goro_threads").value_or(0), 1) << text;
    EXPECT_GE(sample(text, "goro_goroutine_runs_total").value_or(0), extra) << text;
    // Every goroutine's stack is mapped; at least the pages this one and the connection's
    // touched are resident.
    EXPECT_GE(sample(text, "goro_stack_reserved_bytes").value_or(0), 2 * 64 * 1024) << text;
    EXPECT_GE(sample(text, "goro_stack_committed_bytes").value_or(0), 2 * 4096) << text;
    EXPECT_LT(sample(text, "goro_stack_committed_bytes").value_or(0),
              sample(text, "goro_stack_reserved_bytes").value_or(0))
        << text;
    for (const char* name : {"goro_idle_threads", "goro_handoffs_total", "goro_preemptions_total",
                             "goro_sysmon_wakeups_total", "goro_steals_total"}) {
      EXPECT_GE(sample(text, name).value_or(-1), 0) << name << " in " << text;
    }
    EXPECT_GT(sample(text, "process_open_fds").value_or(0), 3) << text;
    EXPECT_GT(sample(text, "process_max_fds").value_or(0), 0) << text;
    EXPECT_GT(sample(text, "process_resident_memory_bytes").value_or(0), 1 << 20) << text;
    EXPECT_GT(sample(text, "process_virtual_memory_bytes").value_or(0), 1 << 20) << text;
    EXPECT_GE(sample(text, "process_cpu_seconds_total").value_or(-1), 0) << text;
    const double now = static_cast<double>(std::time(nullptr));
    const double start = sample(text, "process_start_time_seconds").value_or(0);
    EXPECT_LE(start, now + 1) << text;
    EXPECT_GT(start, now - 3600) << text;
  });
  // Off a goroutine no runtime may be running: its metrics are left out, the process's stay.
  const std::string outside = metrics::default_registry().render();
  EXPECT_EQ(outside.find("goro_"), std::string::npos) << outside;
  EXPECT_NE(outside.find("\nprocess_open_fds "), std::string::npos) << outside;
}

// http_server_*: a connection counts as open from accept to close, and every byte of a
// request and its response is counted once the request ends.
TEST(MetricsServer, ConnectionsAndBytesFollowTheTraffic) {
  on_runtime(2, [&] {
    auto srv = ht::Server::start([](Request&, ResponseWriter& w) { w.text("hello"); });
    ASSERT_TRUE(srv) << srv.error().message();
    const ServerStats before = server_stats();
    auto conn = net::dial("tcp", srv->addr().to_string());
    ASSERT_TRUE(conn) << conn.error().message();
    const std::string request = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    ASSERT_TRUE(conn->write(request.data(), request.size()));
    std::string response;
    char buf[512];
    while (response.find("hello") == std::string::npos) {
      auto n = conn->read(buf, sizeof buf);
      ASSERT_TRUE(n && *n > 0);
      response.append(buf, *n);
    }
    // The server counts a request's bytes once it is done with it, which may be just
    // after the client has the whole response.
    ServerStats during = server_stats();
    for (int i = 0; i < 200 && (during.bytes_received - before.bytes_received < request.size() ||
                                during.bytes_sent - before.bytes_sent < response.size());
         ++i) {
      goro::sleep(std::chrono::milliseconds(5));
      during = server_stats();
    }
    EXPECT_EQ(during.connections_open, before.connections_open + 1);
    EXPECT_EQ(during.connections_total, before.connections_total + 1);
    EXPECT_EQ(during.bytes_received - before.bytes_received, request.size());
    EXPECT_EQ(during.bytes_sent - before.bytes_sent, response.size());
    const std::string text = metrics::default_registry().render();
    EXPECT_EQ(sample(text, "http_server_connections"),
              static_cast<double>(during.connections_open))
        << text;
    EXPECT_GE(sample(text, "http_server_sent_bytes_total").value_or(0),
              static_cast<double>(response.size()))
        << text;
    conn->close();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (server_stats().connections_open != before.connections_open &&
           std::chrono::steady_clock::now() < deadline) {
      goro::sleep(1ms);
    }
    EXPECT_EQ(server_stats().connections_open, before.connections_open);
    srv->close();
  });
}

// promtool (Debian's prometheus package) parses and lints what we render: the default
// registry with the runtime, process and HTTP metrics, and labels needing escapes.
// A pool's figures, as goro::pg::Pool and goro::redis::Client give them.
struct FakePoolStats {
  int open = 0, idle = 0;
  std::uint64_t connects = 0, connect_errors = 0, waits = 0, discarded = 0;
};
struct FakePool {
  FakePoolStats now;
  FakePoolStats stats() const { return now; }
};

TEST(MetricsPools, APoolsFiguresAtEachRenderUntilItsExportEnds) {
  Registry reg;
  FakePool a, b;
  a.now = {.open = 3, .idle = 1, .connects = 5, .connect_errors = 2, .waits = 7, .discarded = 1};
  std::optional<metrics::PoolExport> first = metrics::export_pool(reg, "pg", "notes", a);
  metrics::PoolExport second = metrics::export_pool(reg, "pg", "audit", b);
  std::string text = reg.render();
  EXPECT_EQ(sample(text, R"(pg_pool_open_connections{pool="notes"})"), 3);
  EXPECT_EQ(sample(text, R"(pg_pool_idle_connections{pool="notes"})"), 1);
  EXPECT_EQ(sample(text, R"(pg_pool_connects_total{pool="notes"})"), 5);
  EXPECT_EQ(sample(text, R"(pg_pool_connect_errors_total{pool="notes"})"), 2);
  EXPECT_EQ(sample(text, R"(pg_pool_waits_total{pool="notes"})"), 7);
  EXPECT_EQ(sample(text, R"(pg_pool_discarded_total{pool="notes"})"), 1);
  EXPECT_EQ(sample(text, R"(pg_pool_open_connections{pool="audit"})"), 0);
  EXPECT_NE(text.find("# TYPE pg_pool_connects_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE pg_pool_idle_connections gauge"), std::string::npos) << text;
  // Read again at the next render.
  a.now.open = 4;
  a.now.connects = 9;
  text = reg.render();
  EXPECT_EQ(sample(text, R"(pg_pool_open_connections{pool="notes"})"), 4);
  EXPECT_EQ(sample(text, R"(pg_pool_connects_total{pool="notes"})"), 9);
  // One export per system and pool at a time; a name that makes no metric is refused.
  EXPECT_THROW((void)metrics::export_pool(reg, "pg", "notes", a), std::invalid_argument);
  EXPECT_THROW((void)metrics::export_pool(reg, "no such", "x", a), std::invalid_argument);
  // Ended: its series leave, the other pool's stay; the name is free again.
  first.reset();
  text = reg.render();
  EXPECT_FALSE(sample(text, R"(pg_pool_open_connections{pool="notes"})")) << text;
  EXPECT_TRUE(sample(text, R"(pg_pool_open_connections{pool="audit"})")) << text;
  metrics::PoolExport again = metrics::export_pool(reg, "pg", "notes", a);
  EXPECT_EQ(sample(reg.render(), R"(pg_pool_connects_total{pool="notes"})"), 9);
  // A reader of the program's own.
  metrics::PoolExport own = metrics::export_pool(
      reg, "redis", "cache", std::function<metrics::PoolFigures()>([] {
        return metrics::PoolFigures{.open = 2, .idle = 2};
      }));
  EXPECT_EQ(sample(reg.render(), R"(redis_pool_idle_connections{pool="cache"})"), 2);
}

TEST(MetricsPromtool, AcceptsTheRenderedText) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not found: apt-get install prometheus (scripts/deps.sh test)";
  }
  std::string text;
  on_runtime(2, [&] {
    Handler app = chain([](Request&, ResponseWriter& w) { w.text("hi"); }, {metrics::instrument()});
    ht::record(app, ht::new_request("GET", "/"));
    ht::record(app, ht::new_request("PROPFIND", "/"));
    text = metrics::default_registry().render();
    Registry reg;
    auto family = reg.counter_family("escapes_total", "Help with \\ and\nnewline.", {"v"});
    family.with_labels({"quote \" backslash \\ newline \n end"}).inc();
    family.with_labels({"ünïcödé"}).inc();
    reg.histogram_family("sizes_bytes", "Sizes.", {"kind"}, metrics::exponential_buckets(1, 2, 4))
        .with_labels({"a"})
        .observe(3);
    FakePool pool;
    pool.now = {.open = 2, .idle = 1, .connects = 3};
    const metrics::PoolExport exported = metrics::export_pool(reg, "pg", "main", pool);
    text += reg.render();
  });
  ASSERT_NE(text.find("\ngoro_goroutines "), std::string::npos) << text;
  ASSERT_TRUE(sample(text, R"(pg_pool_connects_total{pool="main"})")) << text;
  ASSERT_TRUE(sample(text, R"(http_requests_total{method="other",route="none",code="200"})")) << text;

  char out_path[] = "/tmp/goro-metrics-promtool.XXXXXX";
  const int out_fd = ::mkstemp(out_path);
  ASSERT_GE(out_fd, 0);
  ::close(out_fd);
  const std::string command = std::string("promtool check metrics >") + out_path + " 2>&1";
  ::signal(SIGPIPE, SIG_IGN);  // promtool stopping early must fail the test, not kill it
  FILE* pipe = ::popen(command.c_str(), "w");
  ASSERT_NE(pipe, nullptr);
  std::fwrite(text.data(), 1, text.size(), pipe);
  const int status = ::pclose(pipe);
  std::ifstream in(out_path);
  std::stringstream report;
  report << in.rdbuf();
  ::unlink(out_path);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool check metrics:\n"
                                    << report.str() << "\ninput:\n"
                                    << text;
  EXPECT_EQ(report.str(), "");
}

}  // namespace
}  // namespace goro::http
