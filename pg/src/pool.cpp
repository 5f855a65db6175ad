// goro::pg::Pool and Tx: connections lent one call (or one transaction) at a time. See
// <goro/pg/pg.hpp> for what a caller sees.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/select.hpp>

#include "conn.hpp"

namespace goro::pg {

struct Pool::State {
  explicit State(Options o)
      : opt(std::move(o)),
        max_idle(opt.max_idle.value_or(opt.max_open)),
        slots(static_cast<std::size_t>(std::max(1, opt.max_open))) {}

  const Options opt;
  const int max_idle;
  Chan<char> slots;  // a token per connection in use or being made

  // A goro::Mutex, not a std::mutex: a goroutine preempted while holding it must not
  // block the thread of the next goroutine that wants it.
  mutable goro::Mutex mu;
  std::vector<std::unique_ptr<Conn>> idle;  // (mu) newest last
  int open = 0;                             // (mu) idle, in use and being made
  bool closed = false;                      // (mu)
  int connect_failures = 0;                 // (mu) in a row
  Clock::time_point next_connect{};         // (mu) no connect before this after failures
  Error last_connect_error;                 // (mu)

  std::atomic<std::uint64_t> connects{0}, connect_errors{0}, waits{0}, discarded{0};

  Result<std::unique_ptr<Conn>, Error> connect(const Context& ctx) {
    connects.fetch_add(1, std::memory_order_relaxed);
    Result<std::unique_ptr<Conn>, Error> c = Conn::connect(opt, ctx);
    if (!c) connect_errors.fetch_add(1, std::memory_order_relaxed);
    return c;
  }

  // A connection, holding a slot until checkin.
  Result<std::unique_ptr<Conn>, Error> checkout(const Context& ctx) {
    if (!slots.try_send('x')) {
      waits.fetch_add(1, std::memory_order_relaxed);
      if (goro::select(goro::send_case(slots, 'x'), goro::recv_case(ctx.done())) != 0)
        return Error(ctx.err(), "pg: waiting for a connection: " + ctx.err().message());
    }
    std::vector<std::unique_ptr<Conn>> stale;
    std::unique_ptr<Conn> conn;
    std::uint64_t unhealthy = 0;
    {
      std::lock_guard lock(mu);
      if (closed) {
        (void)slots.try_recv();
        return Error(errc::closed, "pg: the pool is closed");
      }
      const auto now = Clock::now();
      while (!idle.empty()) {
        std::unique_ptr<Conn> c = std::move(idle.back());
        idle.pop_back();
        const bool expired = now - c->created > opt.max_lifetime ||
                             now - c->last_used > opt.max_idle_time;
        if (expired || !c->alive()) {
          if (!expired) ++unhealthy;
          stale.push_back(std::move(c));
          --open;
          continue;
        }
        conn = std::move(c);
        break;
      }
      if (!conn) {
        if (connect_failures > 0 && now < next_connect) {
          (void)slots.try_recv();
          return last_connect_error;
        }
        ++open;
      }
    }
    discarded.fetch_add(unhealthy, std::memory_order_relaxed);
    stale.clear();  // closes them, outside the lock
    if (conn) return conn;
    Result<std::unique_ptr<Conn>, Error> fresh = connect(ctx);
    {
      std::lock_guard lock(mu);
      if (fresh) {
        connect_failures = 0;
        return fresh;
      }
      --open;
      // A call whose Context ended says nothing about the server.
      if (!ctx.err()) {
        ++connect_failures;
        next_connect = Clock::now() + backoff(connect_failures - 1, opt.max_backoff);
        last_connect_error = fresh.error();
      }
    }
    (void)slots.try_recv();
    return fresh;
  }

  // Gives conn back with its slot: to the idle list when fit for use, else closed.
  void checkin(std::unique_ptr<Conn> conn) {
    const bool fit = conn->reusable();
    if (!fit) discarded.fetch_add(1, std::memory_order_relaxed);
    const auto now = Clock::now();
    {
      std::lock_guard lock(mu);
      if (fit && !closed && static_cast<int>(idle.size()) < max_idle &&
          now - conn->created <= opt.max_lifetime) {
        conn->last_used = now;
        idle.push_back(std::move(conn));
      } else {
        --open;
      }
    }
    conn.reset();
    (void)slots.try_recv();
  }

  Result<ResultPtr, Error> run(const Context& ctx, std::string_view sql,
                               std::span<const Value> params) {
    Result<std::unique_ptr<Conn>, Error> conn = checkout(ctx);
    if (!conn) return conn.error();
    Result<ResultPtr, Error> r = (*conn)->run(ctx, sql, params, true);
    checkin(std::move(*conn));
    return r;
  }
};

Result<std::unique_ptr<Conn>, Error> connect_outside(Pool::State& pool, const Context& ctx) {
  return pool.connect(ctx);
}

const Options& options_of(const Pool::State& pool) { return pool.opt; }

Result<std::unique_ptr<Conn>, Error> checkout(Pool::State& pool, const Context& ctx) {
  return pool.checkout(ctx);
}

void checkin(Pool::State& pool, std::unique_ptr<Conn> conn) { pool.checkin(std::move(conn)); }

namespace {

Result<Rows, Error> rows_of(Result<ResultPtr, Error> r) {
  if (!r) return r.error();
  return Rows(r->release());
}

Result<long long, Error> affected_of(Result<ResultPtr, Error> r) {
  if (!r) return r.error();
  return Rows(r->release()).affected();
}

std::span<const Value> span_of(std::initializer_list<Value> params) {
  return {params.begin(), params.size()};
}

const char* begin_command(Isolation isolation) {
  switch (isolation) {
    case Isolation::read_committed: return "BEGIN ISOLATION LEVEL READ COMMITTED";
    case Isolation::repeatable_read: return "BEGIN ISOLATION LEVEL REPEATABLE READ";
    case Isolation::serializable: return "BEGIN ISOLATION LEVEL SERIALIZABLE";
  }
  return "BEGIN";
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Pool.

Pool::Pool(Options options) : state_(std::make_shared<State>(std::move(options))) {}

Pool::~Pool() {
  std::vector<std::unique_ptr<Conn>> idle;
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    idle.swap(state_->idle);
    state_->open -= static_cast<int>(idle.size());
  }
}

Result<Rows, Error> Pool::query(const Context& ctx, std::string_view sql,
                                std::span<const Value> params) {
  return rows_of(state_->run(ctx, sql, params));
}
Result<Rows, Error> Pool::query(const Context& ctx, std::string_view sql,
                                std::initializer_list<Value> params) {
  return query(ctx, sql, span_of(params));
}
Result<Rows, Error> Pool::query(const Context& ctx, std::string_view sql,
                                const std::vector<Value>& params) {
  return query(ctx, sql, std::span<const Value>(params));
}

Result<long long, Error> Pool::exec(const Context& ctx, std::string_view sql,
                                    std::span<const Value> params) {
  return affected_of(state_->run(ctx, sql, params));
}
Result<long long, Error> Pool::exec(const Context& ctx, std::string_view sql,
                                    std::initializer_list<Value> params) {
  return exec(ctx, sql, span_of(params));
}
Result<long long, Error> Pool::exec(const Context& ctx, std::string_view sql,
                                    const std::vector<Value>& params) {
  return exec(ctx, sql, std::span<const Value>(params));
}

Result<Tx, Error> Pool::begin(const Context& ctx, Isolation isolation) {
  Result<std::unique_ptr<Conn>, Error> conn = state_->checkout(ctx);
  if (!conn) return conn.error();
  Result<ResultPtr, Error> r = (*conn)->run(ctx, begin_command(isolation), {}, false);
  if (!r) {
    state_->checkin(std::move(*conn));
    return r.error();
  }
  return Tx(state_, std::move(*conn));
}

PoolStats Pool::stats() const {
  PoolStats s;
  {
    std::lock_guard lock(state_->mu);
    s.open = state_->open;
    s.idle = static_cast<int>(state_->idle.size());
  }
  s.connects = state_->connects.load(std::memory_order_relaxed);
  s.connect_errors = state_->connect_errors.load(std::memory_order_relaxed);
  s.waits = state_->waits.load(std::memory_order_relaxed);
  s.discarded = state_->discarded.load(std::memory_order_relaxed);
  return s;
}

// ---------------------------------------------------------------------------------------
// Tx.

Tx::Tx(std::shared_ptr<Pool::State> pool, std::unique_ptr<Conn> conn) noexcept
    : pool_(std::move(pool)), conn_(std::move(conn)) {}

Tx::Tx(Tx&&) noexcept = default;

Tx& Tx::operator=(Tx&& other) noexcept {
  if (this != &other) {
    if (conn_) Tx ended(std::move(*this));  // rolls back as it is destroyed
    pool_ = std::move(other.pool_);
    conn_ = std::move(other.conn_);
  }
  return *this;
}

Tx::~Tx() {
  if (!conn_) return;
  auto [ctx, stop] = with_timeout(background(), kCancelDrainTimeout);
  (void)finish(ctx, "ROLLBACK");
  stop();
}

Result<Rows, Error> Tx::query(const Context& ctx, std::string_view sql,
                              std::span<const Value> params) {
  if (!conn_) return Error(errc::closed, "pg: the transaction is over");
  return rows_of(conn_->run(ctx, sql, params, true));
}
Result<Rows, Error> Tx::query(const Context& ctx, std::string_view sql,
                              std::initializer_list<Value> params) {
  return query(ctx, sql, span_of(params));
}
Result<Rows, Error> Tx::query(const Context& ctx, std::string_view sql,
                              const std::vector<Value>& params) {
  return query(ctx, sql, std::span<const Value>(params));
}

Result<long long, Error> Tx::exec(const Context& ctx, std::string_view sql,
                                  std::span<const Value> params) {
  if (!conn_) return Error(errc::closed, "pg: the transaction is over");
  return affected_of(conn_->run(ctx, sql, params, true));
}
Result<long long, Error> Tx::exec(const Context& ctx, std::string_view sql,
                                  std::initializer_list<Value> params) {
  return exec(ctx, sql, span_of(params));
}
Result<long long, Error> Tx::exec(const Context& ctx, std::string_view sql,
                                  const std::vector<Value>& params) {
  return exec(ctx, sql, std::span<const Value>(params));
}

Error Tx::commit(const Context& ctx) { return finish(ctx, "COMMIT"); }
Error Tx::rollback(const Context& ctx) { return finish(ctx, "ROLLBACK"); }

Error Tx::finish(const Context& ctx, const char* command) {
  if (!conn_) return Error(errc::closed, "pg: the transaction is over");
  Result<ResultPtr, Error> r = conn_->run(ctx, command, {}, false);
  Error outcome;
  if (!r) {
    outcome = r.error();
  } else if (std::string_view(command) == "COMMIT" &&
             std::string_view(PQcmdStatus(r->get())) == "ROLLBACK") {
    // The server answers COMMIT of a transaction that a failed statement aborted thus.
    outcome = Error(errc::server_error,
                    "pg: the transaction was rolled back: a statement in it had failed");
  }
  pool_->checkin(std::move(conn_));
  conn_.reset();
  return outcome;
}

}  // namespace goro::pg
