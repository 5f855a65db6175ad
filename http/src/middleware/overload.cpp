// Overload protection (overload.hpp): the concurrency limiter, fixed or adaptive, and the
// per-key token buckets of rate_limit. Both turn a request away before any handler work,
// through send_error, so the client's answer takes microseconds.
#include <goro/http/overload.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <goro/http/error_reply.hpp>
#include <goro/http/status.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>

#include "core/server_impl.hpp"

namespace goro::http {

namespace {

std::int64_t ns_since_epoch(std::chrono::steady_clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::int64_t now_ns() noexcept { return ns_since_epoch(std::chrono::steady_clock::now()); }

void count_shed() noexcept { detail::stats_shard().shed.fetch_add(1, std::memory_order_relaxed); }

std::error_code send_shed(Request& req, ResponseWriter& w, int status, std::string body,
                          std::string_view message, std::string_view origin,
                          long long retry_after) {
  count_shed();
  FrameworkReply reply;
  reply.status = status;
  reply.body = std::move(body);
  reply.message = message;
  reply.origin = origin;
  reply.headers.set("Retry-After", std::to_string(std::max(retry_after, 0LL)));
  return send_error(req, w, std::move(reply));
}

}  // namespace

// The adaptive limit's state (AdaptiveLimitOptions says how it moves). Each release adds
// its latency to the current window; the release that finds the window complete wins a
// flag and decides the next limit, the others go on counting into the next window.
struct ConcurrencyLimiter::Adaptive {
  AdaptiveLimitOptions options;
  std::atomic<std::int64_t> window_start;
  std::atomic<std::int64_t> sum_ns{0};
  std::atomic<std::size_t> samples{0};
  std::atomic<std::size_t> peak{0};  // most requests in flight during the window
  std::atomic<bool> deciding{false};
  double no_load_ns = 0;  // under deciding; 0: no window seen yet
  // no_load_ns × (tolerance - 1), at least 1 ms: what a request may wait beyond its own
  // service for the latency to stay within tolerance of the no-load one.
  std::atomic<std::int64_t> queue_target_ns{0};

  explicit Adaptive(AdaptiveLimitOptions o) : options(o), window_start(now_ns()) {}

  // Returns the next limit, given the current one and a window's mean latency and peak.
  std::size_t decide(std::size_t limit, double mean_ns, std::size_t window_peak) {
    no_load_ns = no_load_ns == 0 ? mean_ns : std::min(mean_ns, no_load_ns * 1.01);
    const double allowed = no_load_ns * options.tolerance;
    queue_target_ns.store(
        std::max<std::int64_t>(static_cast<std::int64_t>(allowed - no_load_ns), 1'000'000),
        std::memory_order_relaxed);
    double next = static_cast<double>(limit);
    if (mean_ns <= allowed) {
      // Grow only when the limit was what held the requests back.
      if (window_peak >= limit) next += std::max(1.0, std::sqrt(next));
    } else {
      next *= std::max(0.5, allowed / mean_ns);
    }
    next = std::clamp(next, static_cast<double>(options.min_limit),
                      static_cast<double>(options.max_limit));
    return static_cast<std::size_t>(next);
  }
};

ConcurrencyLimiter::ConcurrencyLimiter(std::size_t limit) : limit_(std::max<std::size_t>(limit, 1)) {}
ConcurrencyLimiter::~ConcurrencyLimiter() = default;

std::shared_ptr<ConcurrencyLimiter> ConcurrencyLimiter::fixed(std::size_t limit) {
  return std::shared_ptr<ConcurrencyLimiter>(new ConcurrencyLimiter(limit));
}

std::shared_ptr<ConcurrencyLimiter> ConcurrencyLimiter::adaptive(AdaptiveLimitOptions options) {
  options.min_limit = std::max<std::size_t>(options.min_limit, 1);
  options.max_limit = std::max(options.max_limit, options.min_limit);
  options.initial_limit = std::clamp(options.initial_limit, options.min_limit, options.max_limit);
  if (!(options.tolerance >= 1.0)) options.tolerance = 1.0;
  options.min_samples = std::max<std::size_t>(options.min_samples, 1);
  std::shared_ptr<ConcurrencyLimiter> limiter(new ConcurrencyLimiter(options.initial_limit));
  limiter->adaptive_ = std::make_unique<Adaptive>(options);
  return limiter;
}

std::chrono::nanoseconds ConcurrencyLimiter::queue_target() const noexcept {
  return std::chrono::nanoseconds(
      adaptive_ ? adaptive_->queue_target_ns.load(std::memory_order_relaxed) : 0);
}

bool ConcurrencyLimiter::try_acquire() noexcept {
  std::size_t now = in_flight_.load(std::memory_order_relaxed);
  do {
    if (now >= limit_.load(std::memory_order_relaxed)) return false;
  } while (!in_flight_.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
  if (adaptive_) {
    std::size_t peak = adaptive_->peak.load(std::memory_order_relaxed);
    while (now + 1 > peak &&
           !adaptive_->peak.compare_exchange_weak(peak, now + 1, std::memory_order_relaxed)) {
    }
  }
  return true;
}

void ConcurrencyLimiter::release(std::chrono::nanoseconds latency) noexcept {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (!adaptive_) return;
  Adaptive& a = *adaptive_;
  a.sum_ns.fetch_add(latency.count(), std::memory_order_relaxed);
  const std::size_t samples = a.samples.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::int64_t now = now_ns();
  if (samples < a.options.min_samples ||
      now - a.window_start.load(std::memory_order_relaxed) < a.options.window.count()) {
    return;
  }
  if (a.deciding.exchange(true, std::memory_order_acquire)) return;
  const std::int64_t sum = a.sum_ns.exchange(0, std::memory_order_relaxed);
  const std::size_t n = a.samples.exchange(0, std::memory_order_relaxed);
  const std::size_t peak = a.peak.exchange(in_flight(), std::memory_order_relaxed);
  if (n > 0) {
    limit_.store(a.decide(limit(), static_cast<double>(sum) / static_cast<double>(n), peak),
                 std::memory_order_relaxed);
  }
  a.window_start.store(now, std::memory_order_relaxed);
  a.deciding.store(false, std::memory_order_release);
}

namespace {

// How limit_concurrency serves the newest requests first while requests are shed for their
// wait (adaptive LIFO). On a saturated P the run queue holds a batch of connections the
// netpoller readied together. First in, first out, the first of them would run its
// handler, and the others, shed for having waited behind it, would be answered only after
// it: a millisecond handler puts a millisecond into every shed answer. So while the
// server is under that pressure, a request that passed the wait check yields once before
// taking its place, and when it runs again it gives way if at least GOMAXPROCS requests
// that passed after it are still waiting to run: those are fresher, and there is room for
// only so many at once. The whole batch is decided first, the shed ones are answered at
// once, and the handlers that run are of the freshest requests.
struct LifoState {
  // When a request was last shed for its wait or gave way (steady clock, ns; 0: never).
  std::atomic<std::int64_t> pressure_at{0};
  // Requests that passed the wait check and yielded, not yet running again.
  std::atomic<std::size_t> deferred{0};
};

// How long after the last shed for waiting the newest-first order stays on.
constexpr std::int64_t kPressureWindow = 100'000'000;

}  // namespace

Middleware limit_concurrency(std::shared_ptr<ConcurrencyLimiter> limiter,
                             LimitConcurrencyOptions options) {
  const long long retry_after = options.retry_after.count();
  const std::chrono::nanoseconds max_wait = options.max_queue_delay;
  auto lifo = std::make_shared<LifoState>();
  return [limiter = std::move(limiter), retry_after, max_wait, lifo](Handler next) -> Handler {
    return [limiter, retry_after, max_wait, lifo, next = std::move(next)](Request& req,
                                                                          ResponseWriter& w) {
      auto start = std::chrono::steady_clock::now();
      auto shed = [&] {
        (void)send_shed(req, w, status::service_unavailable,
                        "503 Service Unavailable: overloaded\n", "overloaded", "limiter",
                        retry_after);
      };
      const std::chrono::nanoseconds wait_limit =
          max_wait.count() == 0 ? limiter->queue_target() : max_wait;
      const bool stamped = req.received_at().time_since_epoch().count() != 0;
      if (wait_limit.count() > 0 && stamped) {
        const std::int64_t now = ns_since_epoch(start);
        if (start - req.received_at() > wait_limit) {
          lifo->pressure_at.store(now, std::memory_order_relaxed);
          shed();
          return;
        }
        if (const std::int64_t at = lifo->pressure_at.load(std::memory_order_relaxed);
            at != 0 && now - at < kPressureWindow) {
          lifo->deferred.fetch_add(1, std::memory_order_relaxed);
          goro::yield();
          const std::size_t behind = lifo->deferred.fetch_sub(1, std::memory_order_relaxed) - 1;
          start = std::chrono::steady_clock::now();
          if (behind >= static_cast<std::size_t>(std::max(1, goro::maxprocs()))) {
            lifo->pressure_at.store(ns_since_epoch(start), std::memory_order_relaxed);
            shed();
            return;
          }
        }
      }
      if (!limiter->try_acquire()) {
        shed();
        return;
      }
      struct Release {
        ConcurrencyLimiter& limiter;
        std::chrono::steady_clock::time_point start;
        ~Release() { limiter.release(std::chrono::steady_clock::now() - start); }
      } release{*limiter, start};
      next(req, w);
    };
  };
}

// ---- rate_limit ----

std::optional<std::string_view> forwarded_address(std::string_view xff, unsigned trusted_proxies) {
  if (trusted_proxies == 0) return std::nullopt;
  // Walk the elements from the right.
  std::string_view rest = xff;
  for (unsigned i = 1;; ++i) {
    if (rest.empty()) return std::nullopt;
    const std::size_t comma = rest.rfind(',');
    std::string_view element = comma == std::string_view::npos ? rest : rest.substr(comma + 1);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    if (i < trusted_proxies) {
      if (comma == std::string_view::npos) return std::nullopt;
      continue;
    }
    while (!element.empty() && (element.front() == ' ' || element.front() == '\t')) {
      element.remove_prefix(1);
    }
    while (!element.empty() && (element.back() == ' ' || element.back() == '\t')) {
      element.remove_suffix(1);
    }
    if (!element.empty() && element.front() == '[') {  // [v6] or [v6]:port
      const std::size_t close = element.find(']');
      if (close == std::string_view::npos) return std::nullopt;
      std::string_view after = element.substr(close + 1);
      if (!after.empty() && (after.front() != ':' || after.size() == 1 ||
                             after.substr(1).find_first_not_of("0123456789") !=
                                 std::string_view::npos)) {
        return std::nullopt;
      }
      element = element.substr(1, close - 1);
    }
    if (element.empty() || element.size() >= INET6_ADDRSTRLEN) return std::nullopt;
    char text[INET6_ADDRSTRLEN];
    element.copy(text, element.size());
    text[element.size()] = '\0';
    unsigned char addr[sizeof(in6_addr)];
    if (inet_pton(AF_INET, text, addr) == 1 || inet_pton(AF_INET6, text, addr) == 1) {
      return element;
    }
    return std::nullopt;
  }
}

namespace {

// "203.0.113.7:51234" → "203.0.113.7"; "[2001:db8::1]:443" → "2001:db8::1".
std::string_view host_of(std::string_view addr) {
  if (!addr.empty() && addr.front() == '[') {
    const std::size_t close = addr.find(']');
    return close == std::string_view::npos ? addr : addr.substr(1, close - 1);
  }
  const std::size_t colon = addr.rfind(':');
  return colon == std::string_view::npos ? addr : addr.substr(0, colon);
}

}  // namespace

RateLimitKey key_by_remote_address() {
  return [](Request& req) { return std::string(host_of(req.remote_addr())); };
}

RateLimitKey key_by_header(std::string name) {
  // Requests without the field share one bucket, under a key no field value can be.
  return [name = std::move(name)](Request& req) {
    return req.has_header(name) ? std::string(req.header(name)) : std::string(1, '\0');
  };
}

RateLimitKey key_by_forwarded_for(unsigned trusted_proxies) {
  return [trusted_proxies](Request& req) {
    std::optional<std::string_view> client =
        forwarded_address(req.header("x-forwarded-for"), trusted_proxies);
    return std::string(client ? *client : host_of(req.remote_addr()));
  };
}

namespace {

// The buckets, in shards each under its own mutex so that requests with different keys
// seldom wait for one another.
class Buckets {
 public:
  explicit Buckets(const RateLimitOptions& o)
      : rate_(o.rate > 0 ? o.rate : 1e-9),
        burst_(static_cast<double>(std::max<std::size_t>(o.burst, 1))),
        per_shard_(std::max<std::size_t>(o.max_keys / kShards, 1)) {}

  struct Verdict {
    bool allowed;
    long long remaining;    // whole tokens left
    long long reset_s;      // until the bucket is full
    long long retry_after;  // until a token is back (when refused)
  };

  Verdict take(const std::string& key) {
    Shard& shard = shards_[std::hash<std::string>{}(key) % kShards];
    const std::int64_t now = now_ns();
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) {
      if (shard.map.size() >= per_shard_) forget_some(shard, now);
      it = shard.map.emplace(key, Bucket{burst_, now}).first;
    }
    Bucket& b = it->second;
    b.tokens = refilled(b, now);
    b.last_ns = now;
    Verdict v{};
    v.allowed = b.tokens >= 1.0;
    if (v.allowed) b.tokens -= 1.0;
    v.remaining = static_cast<long long>(std::floor(b.tokens));
    v.reset_s = static_cast<long long>(std::ceil((burst_ - b.tokens) / rate_));
    v.retry_after = v.allowed ? 0 : std::max(1LL, static_cast<long long>(std::ceil((1.0 - b.tokens) / rate_)));
    return v;
  }

  double burst() const noexcept { return burst_; }

 private:
  static constexpr std::size_t kShards = 16;
  struct Bucket {
    double tokens;
    std::int64_t last_ns;
  };
  struct Shard {
    goro::Mutex mu;
    std::unordered_map<std::string, Bucket> map;
  };

  double refilled(const Bucket& b, std::int64_t now) const noexcept {
    return std::min(burst_, b.tokens + static_cast<double>(now - b.last_ns) * 1e-9 * rate_);
  }

  // Makes room: forgets the buckets that have filled up again (a new one would be the
  // same), and if fewer than an eighth of the shard were, the longest-idle ones up to an
  // eighth, so each sweep pays for many inserts.
  void forget_some(Shard& shard, std::int64_t now) {
    const std::size_t target = std::max<std::size_t>(shard.map.size() / 8, 1);
    std::size_t forgotten = 0;
    for (auto it = shard.map.begin(); it != shard.map.end();) {
      if (refilled(it->second, now) >= burst_) {
        it = shard.map.erase(it);
        ++forgotten;
      } else {
        ++it;
      }
    }
    if (forgotten >= target) return;
    std::vector<std::pair<std::int64_t, const std::string*>> by_age;
    by_age.reserve(shard.map.size());
    for (const auto& [key, bucket] : shard.map) by_age.emplace_back(bucket.last_ns, &key);
    const std::size_t more = std::min(target - forgotten, by_age.size());
    std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(more),
                     by_age.end());
    std::vector<std::string> oldest;
    oldest.reserve(more);
    for (std::size_t i = 0; i < more; ++i) oldest.push_back(*by_age[i].second);
    for (const std::string& key : oldest) shard.map.erase(key);
  }

  double rate_;
  double burst_;
  std::size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace

Middleware rate_limit(RateLimitOptions options) {
  auto buckets = std::make_shared<Buckets>(options);
  return [buckets, key = std::move(options.key), every = options.headers_on_every_response](
             Handler next) -> Handler {
    return [buckets, key, every, next = std::move(next)](Request& req, ResponseWriter& w) {
      const std::string k = key ? key(req) : std::string();
      if (k.empty() && key) {
        next(req, w);
        return;
      }
      const Buckets::Verdict v = buckets->take(k);
      auto set_fields = [&](Headers& h) {
        h.set("RateLimit-Limit", std::to_string(static_cast<long long>(buckets->burst())));
        h.set("RateLimit-Remaining", std::to_string(v.remaining));
        h.set("RateLimit-Reset", std::to_string(v.reset_s));
      };
      if (!v.allowed) {
        count_shed();
        FrameworkReply reply;
        reply.status = status::too_many_requests;
        reply.body = "429 Too Many Requests: rate limit exceeded\n";
        reply.message = "rate limit exceeded";
        reply.origin = "rate_limit";
        reply.headers.set("Retry-After", std::to_string(v.retry_after));
        set_fields(reply.headers);
        (void)send_error(req, w, std::move(reply));
        return;
      }
      if (every) set_fields(w.header());
      next(req, w);
    };
  };
}

}  // namespace goro::http
