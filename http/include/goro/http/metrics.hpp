// goro::http::metrics — counters, gauges and histograms for Prometheus to scrape, the
// runtime's and the process's own numbers, and the middleware that counts requests.
//
//   namespace metrics = goro::http::metrics;
//   metrics::Registry& reg = metrics::default_registry();
//   metrics::Counter& jobs = reg.counter("app_jobs_total", "Jobs finished.");
//   metrics::Family<metrics::Histogram> calls =
//       reg.histogram_family("app_backend_seconds", "Backend call time.", {"backend"});
//   jobs.inc();
//   calls.with_labels({"users"}).observe(0.012);
//
//   router.handle("GET /metrics", metrics::handler());      // off unless mounted
//   Handler app = chain(router, {metrics::instrument()});   // http_requests_total, ...
//
// Metrics live in a Registry, which owns them: the references and Family handles it
// returns stay valid as long as the registry (forever for default_registry()). Updating
// a metric is a few relaxed atomic operations on that metric alone, safe from any thread
// or goroutine; no lock is shared between cores. Registering, and with_labels() for a
// label set not seen before, take the registry's locks: keep the reference it returns
// when the labels are known in advance.
//
// Registry::render() writes the Prometheus text exposition format 0.0.4: families sorted
// by name, each with its HELP and TYPE lines, children sorted by label values.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/middleware.hpp>
#include <goro/http/server.hpp>

namespace goro::http::metrics {

namespace detail {
struct FamilyState;
struct Access;
}  // namespace detail

// A value that only goes up (requests served, bytes sent); Prometheus sees a reset when
// the process restarts. Name it with the suffix _total.
class Counter {
 public:
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds 1.
  void inc() noexcept { whole_.fetch_add(1, std::memory_order_relaxed); }
  // Adds v; a negative or NaN v throws std::invalid_argument (a counter never goes down).
  void add(double v);
  double value() const noexcept;

 private:
  friend struct detail::Access;
  Counter() = default;

  // Whole increments are counted exactly; only add() with a fraction touches fraction_.
  // Relaxed: each is a statistic read on its own, ordered with nothing else.
  std::atomic<std::uint64_t> whole_{0};
  std::atomic<double> fraction_{0};
};

// A value that goes up and down (requests in flight, queue length, temperature).
class Gauge {
 public:
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(double v) noexcept { value_.fetch_add(v, std::memory_order_relaxed); }
  void sub(double v) noexcept { add(-v); }
  void inc() noexcept { add(1); }
  void dec() noexcept { add(-1); }
  double value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  friend struct detail::Access;
  Gauge() = default;

  std::atomic<double> value_{0};  // relaxed: a statistic, ordered with nothing else
};

// Observations counted in buckets by upper bound (le, "less or equal"), with their sum
// and count: latencies, sizes. Prometheus computes quantiles from the buckets.
class Histogram {
 public:
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts v in the first bucket whose bound is >= v (NaN: only in +Inf) and adds it to
  // the sum. One atomic add on that bucket and one on the sum.
  void observe(double v) noexcept;
  // Observes a duration, in seconds.
  void observe(std::chrono::nanoseconds elapsed) noexcept {
    observe(std::chrono::duration<double>(elapsed).count());
  }

  // Observations so far (the +Inf bucket).
  std::uint64_t count() const noexcept;
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  // The upper bounds, ascending, +Inf not included.
  std::span<const double> bounds() const noexcept { return bounds_; }
  // Observations in bucket i alone (not cumulative); i == bounds().size() is +Inf's.
  std::uint64_t bucket_count(std::size_t i) const noexcept;

 private:
  friend struct detail::Access;
  explicit Histogram(std::span<const double> bounds);

  std::span<const double> bounds_;  // owned by the family
  // One per bucket, the last for +Inf. count() is their total, so a scrape always finds
  // _count equal to the +Inf bucket; _sum may lag or lead by the observations in flight.
  // Relaxed, as Counter.
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// A metric with label names: one child per set of label values (Go's CounterVec, ...).
// A cheap handle; copies refer to the same family, which the Registry owns.
template <class Metric>
class Family {
 public:
  // The child for these label values, given in the order of label_names(); made on
  // first use. Throws std::invalid_argument when the number of values differs from the
  // number of names or a value is not UTF-8. A hit takes a shared lock of this family
  // and allocates nothing.
  Metric& with_labels(std::initializer_list<std::string_view> values) {
    return with_labels(std::span<const std::string_view>(values.begin(), values.size()));
  }
  Metric& with_labels(std::span<const std::string_view> values);

  const std::string& name() const noexcept;
  const std::vector<std::string>& label_names() const noexcept;

 private:
  friend struct detail::Access;
  explicit Family(detail::FamilyState* state) noexcept : state_(state) {}
  detail::FamilyState* state_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// Prometheus' default buckets, in seconds: .005 .01 .025 .05 .1 .25 .5 1 2.5 5 10.
std::vector<double> default_buckets();
// count bounds start, start + width, ... (Go's LinearBuckets).
std::vector<double> linear_buckets(double start, double width, int count);
// count bounds start, start * factor, ... (Go's ExponentialBuckets).
std::vector<double> exponential_buckets(double start, double factor, int count);

// A set of metrics rendered together: default_registry(), or one of the program's own
// for a handler of its own. Registering is thread-safe; so is rendering, concurrently
// with updates and registrations.
//
// Names: a metric name matches [a-zA-Z_:][a-zA-Z0-9_:]*, a label name
// [a-zA-Z_][a-zA-Z0-9_]* without a leading "__" (reserved) and, on a histogram, other
// than "le"; help text is UTF-8. Anything else throws std::invalid_argument. So does a
// name already registered differently, or one whose series would clash with another's
// (a histogram x writes x_bucket, x_sum and x_count). Registering the same metric again
// (same type, help, label names and buckets) returns the one registered first.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& counter(std::string_view name, std::string_view help);
  Gauge& gauge(std::string_view name, std::string_view help);
  // buckets: upper bounds, strictly ascending, no NaN; a last +Inf is implied (and
  // dropped if given).
  Histogram& histogram(std::string_view name, std::string_view help,
                       std::vector<double> buckets = default_buckets());

  Family<Counter> counter_family(std::string_view name, std::string_view help,
                                 std::vector<std::string> label_names);
  Family<Gauge> gauge_family(std::string_view name, std::string_view help,
                             std::vector<std::string> label_names);
  Family<Histogram> histogram_family(std::string_view name, std::string_view help,
                                     std::vector<std::string> label_names,
                                     std::vector<double> buckets = default_buckets());

  // A counter or gauge whose value fn computes at each render (Go's CounterFunc,
  // GaugeFunc). fn runs on the rendering thread or goroutine, outside the registry's
  // locks, and may block in goro::blocking. A name registered before throws.
  void counter_func(std::string_view name, std::string_view help, std::function<double()> fn);
  void gauge_func(std::string_view name, std::string_view help, std::function<double()> fn);

  // The exposition, text format 0.0.4. A family with labels and no children yet is
  // left out, as Go does.
  std::string render() const;

  struct Impl;

 private:
  friend struct detail::Access;
  std::unique_ptr<Impl> impl_;
};

// The process-wide registry, made on first use with the runtime, process and server
// metrics (register_runtime_metrics, register_process_metrics, register_server_metrics)
// already in it.
Registry& default_registry();

// The runtime's numbers (goro::stats()), read at each render: goro_goroutines and
// goro_goroutines_{running,runnable,waiting,syscall}, goro_procs, goro_idle_procs,
// goro_threads, goro_idle_threads, goro_spinning_threads, goro_runqueue_global,
// goro_runqueue_local, goro_netpoll_waiters, goro_stack_reserved_bytes,
// goro_stack_committed_bytes, goro_handoffs_total, goro_preemptions_total,
// goro_sysmon_wakeups_total, goro_steals_total, goro_goroutine_runs_total. One
// goro::stats(), taken as the render starts, serves them all. They describe the
// goro::run in progress, and are left out of a render that does not run on one of its
// goroutines (no runtime may be running then). The counters restart with each goro::run.
void register_runtime_metrics(Registry& registry);

// The process's numbers, as Go's process collector names them, read from /proc/self
// (in goro::blocking) at each render: process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds, process_start_time_seconds.
void register_process_metrics(Registry& registry);

// Every http::Server's numbers (http::server_stats()): http_server_connections (open
// now), http_server_connections_total, http_server_received_bytes_total,
// http_server_sent_bytes_total. Bytes are added as each request ends, and as each
// connection closes.
void register_server_metrics(Registry& registry);

// What a pool of connections to a server says of itself (goro::pg::PoolStats and
// goro::redis::PoolStats have these).
struct PoolFigures {
  double open = 0;            // connections open now, idle and in use
  double idle = 0;            // of them, idle
  double connects = 0;        // connections made (tried), since the pool was made
  double connect_errors = 0;  // of them, failed
  double waits = 0;           // calls that waited for a connection to come free
  double discarded = 0;       // connections closed because broken
};

// A pool's figures on a registry (export_pool). Move-only. Destroyed, it stops reading
// the pool (waiting for a render that is reading it now) and its series leave the
// registry; destroy it before the pool.
class PoolExport {
 public:
  PoolExport() noexcept;
  PoolExport(PoolExport&&) noexcept;
  PoolExport& operator=(PoolExport&&) noexcept;
  ~PoolExport();

  struct Source;  // http/src/metrics/metrics_pools.cpp

 private:
  friend PoolExport export_pool(Registry&, std::string_view, std::string_view,
                                std::function<PoolFigures()>);
  explicit PoolExport(std::shared_ptr<Source> source) noexcept;
  std::shared_ptr<Source> source_;
};

// Exports a pool's figures, read by `read` at each render (on the rendering goroutine)
// while the handle lives, labeled pool="<pool>":
//   <system>_pool_open_connections, <system>_pool_idle_connections     gauges
//   <system>_pool_connects_total, <system>_pool_connect_errors_total,
//   <system>_pool_waits_total, <system>_pool_discarded_total           counters
// system names the client ("pg", "redis") and must make valid metric names; pool tells
// one program's pools apart. Exporting the same system and pool again while the first
// handle lives throws std::invalid_argument.
[[nodiscard]] PoolExport export_pool(Registry& registry, std::string_view system,
                                     std::string_view pool, std::function<PoolFigures()> read);

// The same for a pool whose stats() has those fields (goro::pg::Pool,
// goro::redis::Client):
//   auto exported = metrics::export_pool(metrics::default_registry(), "pg", "notes", db);
template <class Pool>
  requires requires(const Pool& p) {
    p.stats().open, p.stats().idle, p.stats().connects, p.stats().connect_errors,
        p.stats().waits, p.stats().discarded;
  }
[[nodiscard]] PoolExport export_pool(Registry& registry, std::string_view system,
                                     std::string_view pool, const Pool& source) {
  return export_pool(registry, system, pool, std::function<PoolFigures()>([&source] {
                       const auto s = source.stats();
                       return PoolFigures{static_cast<double>(s.open),
                                          static_cast<double>(s.idle),
                                          static_cast<double>(s.connects),
                                          static_cast<double>(s.connect_errors),
                                          static_cast<double>(s.waits),
                                          static_cast<double>(s.discarded)};
                     }));
}

// What instrument() records, and where.
struct InstrumentOptions {
  // Where the http_* metrics are registered; nullptr: default_registry(). It must
  // outlive the handlers instrument() wraps.
  Registry* registry = nullptr;
  // Bounds of http_request_duration_seconds, in seconds.
  std::vector<double> duration_buckets = default_buckets();
  // Bounds of http_response_size_bytes: 100 B to 100 MB by tens.
  std::vector<double> size_buckets = exponential_buckets(100, 10, 7);
};

// Counts and times every request that passes through it:
//   http_requests_total{method,route,code}     counter, after the handler returns
//   http_request_duration_seconds{method}      histogram, time in the handlers inside it
//   http_requests_in_flight                    gauge, requests inside it now
//   http_response_size_bytes{method}           histogram, body bytes written
// method is one of GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH, else "other";
// route is the Router's pattern that matched (Request::pattern()), "none" when none did;
// code is the status as three digits ("other" outside 100..999), 500 for a handler that
// threw before answering (the server answers 500; the exception goes on). Those bounds
// keep the number of series small whatever clients send. Instrumenting twice into one
// registry shares the metrics; different buckets for the same registry throw
// std::invalid_argument. Put it first in chain() so that it sees the answers of recover()
// and timeout(). The replies the server makes on its own (400, 408, 413, ...) never
// reach middleware and are not counted.
Middleware instrument(InstrumentOptions options = {});

// Serves registry.render() with Content-Type text/plain; version=0.0.4; charset=utf-8,
// to GET and HEAD; other methods get 405 with Allow: GET, HEAD. Rendering runs on the
// request's goroutine. registry must outlive the handler.
Handler handler(Registry& registry = default_registry());

}  // namespace goro::http::metrics
