// The HTTP side of goro::http::metrics: the instrument() middleware that counts and
// times requests, and the /metrics handler. The metric types, the registry, the text
// format and the collectors are in metrics.cpp.
#include <goro/http/metrics.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include <goro/http/status.hpp>

namespace goro::http::metrics {

namespace {

constexpr std::array<std::string_view, 9> standard_methods = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
constexpr std::size_t other_method = standard_methods.size();
constexpr std::size_t method_slots = standard_methods.size() + 1;

std::size_t method_index(std::string_view method) {
  for (std::size_t i = 0; i < standard_methods.size(); ++i) {
    if (method == standard_methods[i]) return i;
  }
  return other_method;
}

std::string_view method_label(std::size_t index) {
  return index == other_method ? std::string_view("other") : standard_methods[index];
}

// The children the middleware touches, found once each and kept, so a request does no
// lookup: a null slot is filled from with_labels(), which returns the same child to any
// thread that races here. Release/acquire publish the child's construction with it.
template <class Metric>
Metric& cached(std::atomic<Metric*>& slot, Family<Metric> family,
               std::initializer_list<std::string_view> labels) {
  Metric* m = slot.load(std::memory_order_acquire);
  if (m == nullptr) {
    m = &family.with_labels(labels);
    slot.store(m, std::memory_order_release);
  }
  return *m;
}

struct Instruments {
  Family<Counter> requests;
  Family<Histogram> duration;
  Family<Histogram> size;
  Gauge& in_flight;
  std::array<std::atomic<Histogram*>, method_slots> duration_by_method{};
  std::array<std::atomic<Histogram*>, method_slots> size_by_method{};

  void record(std::size_t method, std::string_view route, int code,
              std::chrono::nanoseconds elapsed, std::uint64_t bytes) {
    const std::string_view m = method_label(method);
    cached(duration_by_method[method], duration, {m}).observe(elapsed);
    cached(size_by_method[method], size, {m}).observe(static_cast<double>(bytes));
    char digits[4] = {};
    std::string_view c = "other";
    if (code >= 100 && code <= 999) {
      std::snprintf(digits, sizeof digits, "%d", code);
      c = std::string_view(digits, 3);
    }
    requests.with_labels({m, route.empty() ? std::string_view("none") : route, c}).inc();
  }
};

}  // namespace

Middleware instrument(InstrumentOptions options) {
  Registry& r = options.registry != nullptr ? *options.registry : default_registry();
  auto in = std::shared_ptr<Instruments>(new Instruments{
      r.counter_family("http_requests_total",
                       "HTTP requests answered, by method, route pattern and status code.",
                       {"method", "route", "code"}),
      r.histogram_family("http_request_duration_seconds",
                         "Time spent handling HTTP requests, in seconds.", {"method"},
                         std::move(options.duration_buckets)),
      r.histogram_family("http_response_size_bytes", "Body bytes of HTTP responses.", {"method"},
                         std::move(options.size_buckets)),
      r.gauge("http_requests_in_flight", "HTTP requests being handled now."),
  });
  return [in](Handler next) -> Handler {
    return [in, next = std::move(next)](Request& req, ResponseWriter& w) {
      const std::size_t method = method_index(req.method());
      const auto start = std::chrono::steady_clock::now();
      in->in_flight.inc();
      try {
        next(req, w);
      } catch (...) {
        in->in_flight.dec();
        // Unanswered, the server answers 500; answered, the response is cut as it was.
        in->record(method, req.pattern(),
                   w.headers_sent() ? w.status() : status::internal_server_error,
                   std::chrono::steady_clock::now() - start, w.bytes_written());
        throw;
      }
      in->in_flight.dec();
      in->record(method, req.pattern(), w.status(), std::chrono::steady_clock::now() - start, w.bytes_written());
    };
  };
}

Handler handler(Registry& registry) {
  return [&registry](Request& req, ResponseWriter& w) {
    if (req.method() != "GET" && req.method() != "HEAD") {
      w.header().set("Allow", "GET, HEAD");
      w.text("405 method not allowed\n", status::method_not_allowed);
      return;
    }
    const std::string body = registry.render();
    w.header().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    w.write(body);
  };
}

}  // namespace goro::http::metrics
