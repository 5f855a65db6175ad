// goro::pg internals: one libpq connection driven over an FdWatch (conn.cpp), shared by
// the pool, transactions, copies and listeners.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include <goro/net/wait_fd.hpp>
#include <goro/pg/pg.hpp>

namespace goro::pg {

using Clock = std::chrono::steady_clock;

// How long a cancelled statement's connection waits for the server to confirm the
// cancel (and a destroyed Tx for its ROLLBACK, a destroyed copy for its end) before the
// connection is closed instead.
inline constexpr std::chrono::seconds kCancelDrainTimeout{5};

// Prepared statements kept per connection; beyond this, statements run unprepared.
inline constexpr std::size_t kMaxPrepared = 256;

struct ClearResult {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ClearResult>;

// The server's refusal in res as an Error (errc::server_error with its fields).
Error server_error(const PGresult* res);

// The pause before the next connect after `failures` failed in a row: 10 ms, doubling,
// at most max.
std::chrono::milliseconds backoff(int failures, std::chrono::milliseconds max);

// One PGconn, in non-blocking mode, its socket watched. One goroutine at a time.
struct Conn {
  ~Conn();

  // A connection made with options.conninfo, its TimeZone set to UTC, within ctx and
  // options.connect_timeout.
  static Result<std::unique_ptr<Conn>, Error> connect(const Options& options, const Context& ctx);

  // Runs sql with params: prepared (cached per connection) when prepare is set, else as
  // a simple query (params empty) or unprepared with parameters. The result of a
  // statement that ran, or why not; a failure other than the server's refusal leaves
  // broken set, or (a Context's end) the statement cancelled and drained.
  Result<ResultPtr, Error> run(const Context& ctx, std::string_view sql,
                               std::span<const Value> params, bool prepare);

  // Sends sql (a COPY) and waits for the server to start copying: the PGRES_COPY_IN or
  // PGRES_COPY_OUT result, or why not (a COPY of the other direction is refused and
  // ended, the connection kept).
  Result<ResultPtr, Error> start_copy(const Context& ctx, std::string_view sql,
                                      ExecStatusType want);

  // Fit to be used again: not broken, libpq connected, outside any transaction.
  bool reusable() const noexcept;
  // Checks an idle connection: libpq connected and the socket not closed by the server
  // (what the server sent meanwhile, such as its goodbye, is read). Never blocks.
  bool alive();

  PGconn* pg = nullptr;
  net::FdWatch watch;  // on pg's socket; released before PQfinish closes it
  Clock::time_point created{}, last_used{};
  bool broken = false;

  // A statement prepared on this connection.
  struct Statement {
    std::string name;  // "goro_N"
    // 1 (binary) once its first run showed columns that are all bytea or text, 0 else.
    int result_format = 0;
    bool described = false;  // whether result_format has been decided
  };
  std::unordered_map<std::string, Statement> prepared;  // by SQL text
  std::uint64_t next_statement = 1;

  // A failure of libpq on this connection: "pg: <step>: <libpq's words>".
  Error failure(const char* step);

  // Sends what libpq has queued, reading meanwhile so that neither side waits for the
  // other.
  std::error_code flush(const Context& ctx);
  // Reads the results of what was sent until there are no more: the first refusal, else
  // the last result. With stop_at_copy a COPY's start ends it, kept; without, a COPY is
  // ended (FROM STDIN: told it failed; TO STDOUT: its rows dropped) and reading goes on.
  std::error_code collect(const Context& ctx, ResultPtr& kept, bool stop_at_copy = false);
  // Sends with send(), then flush and collect; the statement's result or why not. A
  // COPY's start is returned as it is when copy is set, else refused and ended.
  template <class Send>
  Result<ResultPtr, Error> exchange(const Context& ctx, Send send, bool copy = false);
  // A wait failed with ec: a Context's end (cancel on the server, drain) or a break.
  Error give_up(std::error_code ec, const Context& ctx);
  // PQcancel, then read the cancelled statement's results to the end within
  // kCancelDrainTimeout. Whether the connection is usable afterwards.
  bool cancel_on_server();
};

// A connection with pool's options, counted in its stats but outside its limit (a
// Listener's). pool.cpp.
Result<std::unique_ptr<Conn>, Error> connect_outside(Pool::State& pool, const Context& ctx);
// The pool's options. pool.cpp.
const Options& options_of(const Pool::State& pool);
// A connection of the pool for one use (a copy's), given back by checkin. pool.cpp.
Result<std::unique_ptr<Conn>, Error> checkout(Pool::State& pool, const Context& ctx);
void checkin(Pool::State& pool, std::unique_ptr<Conn> conn);

}  // namespace goro::pg
