// Overload protection: a server that takes on only what it can serve fast, and turns the
// rest away at once instead of letting every request slow down together.
//
//   auto limiter = goro::http::ConcurrencyLimiter::adaptive();
//   goro::http::Handler app = goro::http::chain(router, {
//       goro::http::limit_concurrency(limiter),             // 503 + Retry-After past the limit
//       goro::http::rate_limit({.rate = 50, .burst = 100}),  // 429 per client address
//   });
//
// Three layers, outermost first:
//  - ServerOptions::max_connections: past it the accept loop waits and the kernel's
//    listen backlog holds the new connections (accept backpressure, as Go's
//    netutil.LimitListener and nginx's worker_connections).
//  - limit_concurrency: at most limit() requests in their handlers at once; the next one is
//    answered 503 with Retry-After before any handler work. The limit is fixed, or
//    adaptive: it follows the handlers' latency (ConcurrencyLimiter::adaptive below).
//  - rate_limit: a token bucket per key (client address, a header, anything of the
//    request); an empty bucket answers 429 with Retry-After and the RateLimit fields.
// Every request these turn away counts in http_server_shed_requests_total on /metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <goro/http/middleware.hpp>

namespace goro::http {

// How an adaptive limit moves. The limiter measures the handlers' latency in windows
// (`window` long with at least `min_samples` requests). It keeps an estimate of the
// latency without queueing (the lowest window mean seen lately, rising by 1% a window so
// that it follows a handler that really became slower). While a window's mean stays
// within `tolerance` times that estimate and the limit was reached, the limit grows by
// its square root (at least 1); when the mean goes above it, the limit shrinks in
// proportion (estimate × tolerance / mean, at most halving). So the requests admitted
// run at close to their unloaded latency, and the rest are shed.
struct AdaptiveLimitOptions {
  std::size_t initial_limit = 16;
  std::size_t min_limit = 1;
  std::size_t max_limit = 1000;
  double tolerance = 2.0;
  std::chrono::nanoseconds window = std::chrono::milliseconds(100);
  std::size_t min_samples = 10;
};

// Requests in flight against a limit; one limiter may guard a server, a group of routes
// or one route (each limit_concurrency sharing it counts against the same limit). Safe
// from many goroutines at once.
class ConcurrencyLimiter {
 public:
  // A limit that never moves.
  static std::shared_ptr<ConcurrencyLimiter> fixed(std::size_t limit);
  // A limit that follows latency (AdaptiveLimitOptions).
  static std::shared_ptr<ConcurrencyLimiter> adaptive(AdaptiveLimitOptions options = {});

  ~ConcurrencyLimiter();
  ConcurrencyLimiter(const ConcurrencyLimiter&) = delete;
  ConcurrencyLimiter& operator=(const ConcurrencyLimiter&) = delete;

  // Takes a place; false when limit() requests are in flight.
  bool try_acquire() noexcept;
  // Gives a place back; latency is how long the request held it.
  void release(std::chrono::nanoseconds latency) noexcept;

  std::size_t limit() const noexcept { return limit_.load(std::memory_order_relaxed); }
  std::size_t in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  // How long a request may wait before its handler starts (limit_concurrency's
  // max_queue_delay when that is zero): for an adaptive limit, its no-load latency
  // estimate times (tolerance - 1) — the wait that, added to a request's own service,
  // keeps it within tolerance of the no-load latency — at least 1 ms (before any window:
  // none); for a fixed one, none (zero).
  std::chrono::nanoseconds queue_target() const noexcept;

  struct Adaptive;

 private:
  explicit ConcurrencyLimiter(std::size_t limit);

  std::atomic<std::size_t> limit_;
  std::atomic<std::size_t> in_flight_{0};
  std::unique_ptr<Adaptive> adaptive_;  // null for a fixed limit
};

struct LimitConcurrencyOptions {
  // The Retry-After of a shed request, in seconds.
  std::chrono::seconds retry_after{1};
  // A request that waited longer than this from its arrival (Request::received_at) to
  // this middleware is shed too: served, it would be late. Under CPU overload this is
  // where requests wait — in the run queue and the socket, before any handler starts —
  // and the limit on requests in the handlers cannot see it. Zero: the limiter's
  // queue_target(); negative: no limit.
  std::chrono::nanoseconds max_queue_delay{0};
};

// Runs the handler only while the limiter has room and the request has not waited past
// max_queue_delay; otherwise answers 503 "overloaded" with Retry-After at once (through
// ServerOptions::shape_reply, origin "limiter"). A request shed for its wait is one
// whose client has likely given up or will soon: serving it would only delay the next.
Middleware limit_concurrency(std::shared_ptr<ConcurrencyLimiter> limiter,
                             LimitConcurrencyOptions options = {});

// What a request is rate-limited by; "" exempts it.
using RateLimitKey = std::function<std::string(Request&)>;

// The client's address without its port ("203.0.113.7", "2001:db8::1").
RateLimitKey key_by_remote_address();
// The value of a request header field; requests without it share one bucket of their own.
RateLimitKey key_by_header(std::string name);
// The client's address as the proxies in front of this server saw it: the
// `trusted_proxies`-th address from the right of X-Forwarded-For (1: the address the
// nearest proxy saw). When the field has fewer addresses, or that one is not an IP
// address, the connection's address is the key (a client cannot choose its key by
// sending the field itself).
RateLimitKey key_by_forwarded_for(unsigned trusted_proxies = 1);

// The `trusted_proxies`-th address from the right of an X-Forwarded-For value (its
// elements joined by commas, blanks around them allowed), checked to be an IPv4 or IPv6
// address (an IPv6 one may be bracketed, with or without a port, and comes back without
// brackets); nullopt when there is none such. The parser behind key_by_forwarded_for.
std::optional<std::string_view> forwarded_address(std::string_view x_forwarded_for,
                                                  unsigned trusted_proxies);

struct RateLimitOptions {
  // Requests a second each key may make on average, and how many at once after idling.
  double rate = 10;
  std::size_t burst = 20;
  RateLimitKey key = key_by_remote_address();
  // Keys kept at most. Past it, keys whose bucket has filled up again (as good as new)
  // are forgotten first, then the longest-idle ones; memory stays bounded under a flood
  // of distinct keys.
  std::size_t max_keys = 100000;
  // Every response carries RateLimit-Limit (the burst), RateLimit-Remaining (requests
  // left now) and RateLimit-Reset (seconds until the bucket is full again), as the IETF
  // RateLimit header fields draft-06 names them; off: only the 429 carries them.
  bool headers_on_every_response = true;
};

// A token bucket per key: each request takes a token; an empty bucket answers 429 "rate
// limit exceeded" with Retry-After (seconds until a token is back) and the RateLimit
// fields, before any handler work (shape_reply, origin "rate_limit").
Middleware rate_limit(RateLimitOptions options);

}  // namespace goro::http
