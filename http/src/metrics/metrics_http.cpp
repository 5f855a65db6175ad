// The HTTP side of goro::http::metrics: the instrument() middleware that counts and
// times requests, and the /metrics handler. The metric types, the registry, the text
// format and the collectors are in metrics.cpp.
#include <goro/http/metrics.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include <goro/http/status.hpp>

#include "access.hpp"
#include "bytes.hpp"

namespace goro::http::metrics {

namespace {

constexpr std::array<std::string_view, 9> standard_methods = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
constexpr std::size_t other_method = standard_methods.size();
constexpr std::size_t method_slots = standard_methods.size() + 1;

std::size_t method_index(std::string_view method) {
  for (std::size_t i = 0; i < standard_methods.size(); ++i) {
    if (http::detail::same_bytes(method, standard_methods[i])) return i;
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

// http_requests_total's children by (route, method, code), found once each and kept in
// an open-addressed table that only grows: a slot, once published, never changes, so a
// lookup is a hash and a few acquire loads. A full table sends the rest to with_labels().
class RequestCounters {
 public:
  explicit RequestCounters(Family<Counter> family) : family_(family) {}
  RequestCounters(const RequestCounters&) = delete;
  RequestCounters& operator=(const RequestCounters&) = delete;
  ~RequestCounters() {
    for (auto& slot : slots_) delete slot.load(std::memory_order_relaxed);
  }

  Counter& get(std::string_view route, std::size_t method, int code) {
    const std::uint64_t h = hash(route, method, code);
    for (std::size_t probe = 0; probe < kProbes; ++probe) {
      std::atomic<Entry*>& slot = slots_[(h + probe) & (kSlots - 1)];
      Entry* e = slot.load(std::memory_order_acquire);
      if (e == nullptr) {
        Labels l;
        auto made = std::make_unique<Entry>(
            Entry{std::string(route), method, code, &family_.with_labels(labels(route, method, code, l))});
        if (slot.compare_exchange_strong(e, made.get(), std::memory_order_acq_rel)) {
          return *made.release()->counter;
        }
        // Another thread filled the slot first: e is its entry.
      }
      if (e->method == method && e->code == code && http::detail::same_bytes(e->route, route)) {
        return *e->counter;
      }
    }
    Labels l;
    return family_.with_labels(labels(route, method, code, l));
  }

 private:
  struct Entry {
    std::string route;
    std::size_t method;
    int code;
    Counter* counter;
  };
  struct Labels {
    std::array<std::string_view, 3> values;
    char digits[4] = {};
  };
  static constexpr std::size_t kSlots = 1024;
  static constexpr std::size_t kProbes = 16;

  // A route is a pattern such as "GET /users/{id}", hashed once per request.
  static std::uint64_t hash(std::string_view route, std::size_t method, int code) {
    return http::detail::hash_bytes(route, (method << 16) ^ static_cast<std::uint16_t>(code));
  }

  // The label values; the code's digits live in out.
  static std::span<const std::string_view> labels(std::string_view route, std::size_t method,
                                                  int code, Labels& out) {
    std::string_view c = "other";
    if (code >= 100 && code <= 999) {
      out.digits[0] = static_cast<char>('0' + code / 100);
      out.digits[1] = static_cast<char>('0' + code / 10 % 10);
      out.digits[2] = static_cast<char>('0' + code % 10);
      c = std::string_view(out.digits, 3);
    }
    out.values = {method_label(method), route.empty() ? std::string_view("none") : route, c};
    return out.values;
  }
  Family<Counter> family_;
  std::array<std::atomic<Entry*>, kSlots> slots_{};
};

struct Instruments {
  RequestCounters requests;
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
    requests.get(route, method, code).inc();
  }
};

}  // namespace

Middleware instrument(InstrumentOptions options) {
  Registry& r = options.registry != nullptr ? *options.registry : default_registry();
  auto in = std::shared_ptr<Instruments>(new Instruments{
      RequestCounters(r.counter_family("http_requests_total",
                       "HTTP requests answered, by method, route pattern and status code.",
                       {"method", "route", "code"})),
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
      (void)http::detail::send_builtin_error(req, w, status::method_not_allowed,
                                             "405 method not allowed\n", "method not allowed",
                                             "metrics");
      return;
    }
    const std::string body = registry.render();
    w.header().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    w.write(body);
  };
}

}  // namespace goro::http::metrics
