// The state of one Server, shared by its accept loops (core/server.cpp), its connections
// (core/server.cpp) and the protocol engines (h1/, h2/), and the process-wide counters of
// server_stats().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <unordered_set>

#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/cond.hpp>
#include <goro/scheduler/mutex.hpp>

namespace goro::http {

namespace detail {
class Connection;

// A server's connections, linked through the Connections themselves: a node per
// connection in a set would sit in malloc's heap among short-lived allocations and keep
// their pages from going back (goro/base/object_pool.hpp). Under Server::Impl::mu.
class ConnList {
 public:
  void insert(Connection* c) noexcept;
  void erase(Connection* c) noexcept;
  bool empty() const noexcept { return count_ == 0; }
  std::size_t size() const noexcept { return count_; }
  // fn(c) for each connection; fn may not erase any.
  template <class F>
  void for_each(F&& fn) const;

 private:
  Connection* head_ = nullptr;
  std::size_t count_ = 0;
};
}  // namespace detail

struct Server::Impl {
  ServerOptions options;
  Handler handler;
  // Every request context derives from base, cancelled when the shutdown deadline
  // passes; shutdown_started is cancelled as shutdown begins.
  Context base;
  CancelFunc cancel_base;
  Context shutdown_started;
  CancelFunc cancel_shutdown_started;
  // Cancelled by drain(), or by shutdown() if it comes first; draining says so without
  // the context (relaxed: readiness reads it, ordered with nothing else).
  Context drain_started;
  CancelFunc cancel_drain_started;
  std::atomic<bool> draining{false};

  mutable goro::Mutex mu;  // guards the fields below, and each Connection's engine pointer
  detail::ConnList conns;
  // conns.size(), written under mu, read without it (connection_count(), callable from
  // any thread, where mu, a goro::Mutex, could not be waited for).
  std::atomic<std::size_t> conn_count{0};
  std::unordered_set<net::Listener*> listeners;
  bool shutting_down = false;
  // shutting_down, readable without mu; seq_cst against Connection::idle_ (set_idle)
  // and Connection::parked_.
  std::atomic<bool> closing{false};
  // Until when idle connections with a goroutine may wait for one more request once
  // closing is set (ServerOptions::shutdown_idle_grace); written before closing.
  std::atomic<std::chrono::steady_clock::time_point> idle_grace_end{};
  std::optional<goro::Chan<int>> drained;  // closed when the last connection ends
  // Signalled when a connection ends below options.max_connections, and at shutdown:
  // where the accept loops wait at the limit.
  goro::Cond room;

  void log_error(std::string_view message) const {
    if (options.error_log) {
      options.error_log(message);
    } else {
      std::fprintf(stderr, "goro/http: %.*s\n", static_cast<int>(message.size()), message.data());
    }
  }
};

namespace detail {

// Where a request's context finds its server's shutdown_context() and drain_context().
extern const goro::ContextKey<Context> shutdown_key;
extern const goro::ContextKey<Context> drain_key;

// Server::readiness.
Readiness readiness(const Server::Impl& server, const Context& ctx);

// server_stats()'s counters, in shards so that connections on different cores do not
// write one cache line: a thread takes a shard on first use, round robin. Relaxed: each
// is a statistic, ordered with nothing else.
struct alignas(64) StatsShard {
  std::atomic<std::uint64_t> opened{0}, closed{0}, bytes_in{0}, bytes_out{0}, requests{0};
  std::atomic<std::uint64_t> accept_waits{0}, shed{0};
};
StatsShard& stats_shard();

// ServerStats::max_connections: a server adds its limit while any of its accept loops
// runs.
extern std::atomic<std::uint64_t> connection_limit;

}  // namespace detail
}  // namespace goro::http
