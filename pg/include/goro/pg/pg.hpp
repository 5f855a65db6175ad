// goro::pg — a PostgreSQL client for goroutines, as pgx is to Go: straight-line calls
// that park the calling goroutine, never its thread, on a pool of libpq connections
// driven through libpq's asynchronous API and goro::net::FdWatch.
//
//   goro::pg::Pool db({.conninfo = "host=/run/postgresql dbname=app", .max_open = 16});
//   auto rows = db.query(ctx, "SELECT name, born FROM users WHERE id = $1", {id});
//   if (!rows) return log(rows.error().what());     // the server's words
//   for (int i = 0; i < rows->size(); ++i) {
//     auto name = (*rows)[i].get<std::string>(0);   // Result<std::string, Error>
//     auto born = (*rows)[i].get<std::optional<std::chrono::system_clock::time_point>>(1);
//   }
//   auto tx = db.begin(ctx, goro::pg::Isolation::serializable);
//   tx->exec(ctx, "UPDATE accounts SET n = n - 1 WHERE id = $1", {id});
//   if (goro::Error e = tx->commit(ctx)) ...         // e.field("sqlstate") == "40001"
//
// Errors. A statement the server refused fails with errc::server_error, the server's
// primary message in what(), and its fields "sqlstate", "detail", "hint", "severity",
// "context", "constraint", "schema", "table", "column" where it sent them. A connection
// that could not be made fails with std::errc::connection_refused, one that broke under
// a call with std::errc::connection_reset (std::errc::io_error when libpq cannot tell),
// what() starting with "pg: " and ending with libpq's words. A call that fails on a
// broken connection is not tried again: libpq cannot say whether the statement reached
// the server before the break (see docs/data.md), and running an INSERT twice is worse
// than an error. A connection the server closed while idle is caught before use.
//
// Contexts. Every call takes one: its cancellation or deadline ends a wait for a
// connection, a connect or a statement at once, with ctx.err(). A statement cut short is
// cancelled on the server (PQcancel) and its results read to the end, so the connection
// stays in the pool; one whose server does not confirm within 5 s is closed instead.
//
// Parameters ($1, $2, ...) are sent as text, a Value each, except Bytes (bytea), which
// go in binary; results come back as text and Row::get parses them, except those of a
// prepared statement whose columns are all bytea or text (text, varchar, char, name),
// which come back in binary from its second run on (the bytes of a bytea as they are,
// not in hex). The session's TimeZone is UTC, so a timestamptz reads back with offset +00.
//
// Prepared statements: the first run of an SQL text on a connection prepares it
// (PQsendPrepare, named "goro_N"), later runs execute what was prepared; up to 256 per
// connection, beyond that statements run unprepared. A statement is one command: several
// separated by ';' cannot be prepared, and fail. A statement whose table's columns have
// changed since it was prepared is prepared again (and, outside a transaction, run again).
//
// Connections: at most Options::max_open in use or idle at once (listeners not
// counted); a call waits, under its Context, for one to come free. Up to max_idle are
// kept idle. A connection older than max_lifetime, idle longer than max_idle_time, or
// that fails its check when taken from the idle list (libpq says it is broken, or the
// server has closed it) is closed; so is one that broke under a call, or that a call
// left inside a transaction (BEGIN through exec; use begin() instead).
//
// COPY: copy_in() ("COPY t FROM STDIN") gives a CopyIn to write the data to, in the
// format the statement names; copy_out() ("COPY t TO STDOUT") a CopyOut to read it from,
// a row at a time. Each holds its connection until finished.
//
// Every function that can wait must be called on a goroutine. A Pool is shared by any
// number of goroutines; a Tx, a CopyIn or a CopyOut is one goroutine's at a time.
#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <goro/base/error.hpp>
#include <goro/base/result.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>

struct pg_result;  // libpq's PGresult

namespace goro::pg {

// Errors of goro::pg itself ("goro.pg").
enum class errc {
  server_error = 1,  // the server refused a statement (the fields say why)
  protocol_error,    // the server answered in a way this client does not handle
  closed,            // the pool (or the transaction) is no longer usable
  bad_value,         // a value could not be read as the type asked for (or is NULL)
};
const std::error_category& category() noexcept;
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

struct Options {
  // A libpq connection string ("host=/tmp dbname=app user=app") or a postgresql:// URI;
  // empty: libpq's PG* environment variables.
  std::string conninfo{};
  int max_open = 10;  // connections open at once, idle and in use, at most
  // Idle connections kept, at most; unset: max_open. Fewer than max_open closes
  // connections whenever the load dips and makes them again when it comes back.
  std::optional<int> max_idle{};
  std::chrono::milliseconds max_lifetime{std::chrono::minutes(30)};  // from its connect
  std::chrono::milliseconds max_idle_time{std::chrono::minutes(5)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  // After a connect fails, calls fail at once with its error (rather than each trying
  // to connect) for 10 ms, doubling with each failure in a row up to this.
  std::chrono::milliseconds max_backoff{std::chrono::milliseconds(500)};
};

// bytea: any bytes.
struct Bytes {
  std::string data;
  friend bool operator==(const Bytes&, const Bytes&) = default;
};

// uuid: 16 bytes, written and read in the canonical text form
// ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").
struct Uuid {
  std::array<std::uint8_t, 16> bytes{};

  // The 36-character form, or 32 hex digits without the hyphens; either case.
  static std::optional<Uuid> parse(std::string_view text) noexcept;
  // The canonical form, lowercase.
  std::string to_string() const;
  friend bool operator==(const Uuid&, const Uuid&) = default;
  friend auto operator<=>(const Uuid&, const Uuid&) = default;
};

// A statement's parameter: PostgreSQL's text form of it, or for Bytes the bytes
// themselves (sent in binary); std::nullopt is NULL.
class Value {
 public:
  Value(std::nullopt_t) noexcept {}  // NOLINT: implicit, as every Value constructor
  Value(bool v);                      // NOLINT
  Value(int v);                       // NOLINT
  Value(long v);                      // NOLINT
  Value(long long v);                 // NOLINT
  Value(double v);                    // NOLINT
  Value(const char* v);               // NOLINT: nullptr is NULL
  Value(std::string v) : text_(std::move(v)) {}       // NOLINT
  Value(std::string_view v) : text_(std::string(v)) {}  // NOLINT
  Value(Bytes v) : text_(std::move(v.data)), binary_(true) {}  // NOLINT: as bytea
  Value(const Uuid& v) : text_(v.to_string()) {}                 // NOLINT
  Value(std::chrono::system_clock::time_point v);                // NOLINT: UTC, microseconds
  template <class T>
  Value(const std::optional<T>& v) : Value(v ? Value(*v) : Value(std::nullopt)) {}  // NOLINT

  bool is_null() const noexcept { return !text_; }
  // Whether text() is bytes sent in binary, as a bytea (a Bytes).
  bool is_binary() const noexcept { return binary_; }
  // What is sent: the text form, or a Bytes' bytes; "" for NULL.
  std::string_view text() const noexcept { return text_ ? std::string_view(*text_) : ""; }

 private:
  std::optional<std::string> text_;
  bool binary_ = false;
};

// One row of Rows; valid while its Rows lives.
class Row {
 public:
  // Column `column` as T: bool, int, long, long long (int32_t, int64_t), double,
  // std::string, std::string_view (into the result), Bytes (bytea), Uuid, or
  // std::chrono::system_clock::time_point (timestamptz or timestamp, read as UTC); or
  // std::optional of one of those, std::nullopt for NULL. errc::bad_value, naming the
  // column, for NULL read as a T that is not optional, or text that is not a T.
  template <class T>
  Result<T, Error> get(int column) const {
    if constexpr (is_optional<T>::value) {
      if (in_range(column) && is_null(column)) return T();
      Result<typename T::value_type, Error> v = get<typename T::value_type>(column);
      if (!v) return v.error();
      return T(std::move(*v));
    } else {
      T out{};
      if (Error e = read(column, out)) return e;
      return out;
    }
  }
  bool is_null(int column) const noexcept;
  // The value as the server sent it, "" for NULL: its text form, except for a bytea
  // column that came in binary (see the top of this file), which is the bytes. Bytes
  // reads a bytea column the same either way.
  std::string_view text(int column) const noexcept;

 private:
  friend class Rows;
  template <class T>
  struct is_optional : std::false_type {};
  template <class T>
  struct is_optional<std::optional<T>> : std::true_type {};

  Row(const pg_result* res, int row) noexcept : res_(res), row_(row) {}
  bool in_range(int column) const noexcept;
  Error check(int column) const;
  Error read(int column, bool& out) const;
  Error read(int column, int& out) const;
  Error read(int column, long& out) const;
  Error read(int column, long long& out) const;
  Error read(int column, double& out) const;
  Error read(int column, std::string& out) const;
  Error read(int column, std::string_view& out) const;
  Error read(int column, Bytes& out) const;
  Error read(int column, Uuid& out) const;
  Error read(int column, std::chrono::system_clock::time_point& out) const;

  const pg_result* res_;
  int row_;
};

// A statement's result: its rows (none for most commands) and how many rows it touched.
// Move-only; owns libpq's result.
class Rows {
 public:
  Rows() noexcept;
  explicit Rows(pg_result* res) noexcept;
  Rows(Rows&&) noexcept;
  Rows& operator=(Rows&&) noexcept;
  ~Rows();

  int size() const noexcept;
  int columns() const noexcept;
  std::string_view column_name(int column) const noexcept;
  // Rows an INSERT, UPDATE, DELETE, MERGE, SELECT or COPY touched; 0 for other commands.
  long long affected() const noexcept;
  // Precondition: 0 <= row < size().
  Row operator[](int row) const noexcept { return Row(res_, row); }

 private:
  pg_result* res_ = nullptr;
};

enum class Isolation { read_committed, repeatable_read, serializable };

struct PoolStats {
  int open = 0;                      // connections open now, idle and in use
  int idle = 0;                      // of them, idle
  std::uint64_t connects = 0;        // connections made, ever (listeners too)
  std::uint64_t connect_errors = 0;  // of them, failed
  std::uint64_t waits = 0;           // calls that waited for a connection to come free
  std::uint64_t discarded = 0;       // connections closed because broken or failing the check
};

// A NOTIFY received by a Listener.
struct Notification {
  std::string channel, payload;
  int backend_pid = 0;  // the server process that sent it
};

class Tx;
class Listener;
class CopyIn;
class CopyOut;
struct Conn;  // internal: one libpq connection (pg/src/conn.hpp)
struct Copy;  // internal: a COPY in progress (pg/src/copy.cpp)

class Pool {
 public:
  explicit Pool(Options options);
  // Closes the idle connections. No call may be running on it; transactions and
  // listeners may outlive it.
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Runs one statement with params on a pooled connection; its rows.
  Result<Rows, Error> query(const Context& ctx, std::string_view sql,
                            std::initializer_list<Value> params = {});
  Result<Rows, Error> query(const Context& ctx, std::string_view sql,
                            std::span<const Value> params);
  Result<Rows, Error> query(const Context& ctx, std::string_view sql,
                            const std::vector<Value>& params);
  // Runs one statement; the rows it touched.
  Result<long long, Error> exec(const Context& ctx, std::string_view sql,
                                std::initializer_list<Value> params = {});
  Result<long long, Error> exec(const Context& ctx, std::string_view sql,
                                std::span<const Value> params);
  Result<long long, Error> exec(const Context& ctx, std::string_view sql,
                                const std::vector<Value>& params);

  // A transaction (BEGIN ISOLATION LEVEL ...) on a connection of the pool, which it
  // holds until committed, rolled back or destroyed.
  Result<Tx, Error> begin(const Context& ctx, Isolation isolation = Isolation::read_committed);

  // COPY ... FROM STDIN (sql) on a pooled connection, held until the copy ends.
  Result<CopyIn, Error> copy_in(const Context& ctx, std::string_view sql);
  // COPY ... TO STDOUT (sql) on a pooled connection, held until the copy ends.
  Result<CopyOut, Error> copy_out(const Context& ctx, std::string_view sql);

  // LISTEN channel on a connection of its own (outside max_open); returns once the
  // server has confirmed it.
  Result<std::unique_ptr<Listener>, Error> listen(const Context& ctx, std::string channel);

  PoolStats stats() const;

  struct State;  // pg/src/pool.cpp

 private:
  std::shared_ptr<State> state_;
};

// One transaction on one connection. Move-only. Destroyed before commit() or
// rollback(), it rolls back (waiting up to 5 s for the server) and gives its connection
// back to the pool. After a statement fails the server ignores the rest: commit() then
// fails with errc::server_error and the transaction is rolled back.
class Tx {
 public:
  Tx(Tx&&) noexcept;
  Tx& operator=(Tx&&) noexcept;
  ~Tx();

  Result<Rows, Error> query(const Context& ctx, std::string_view sql,
                            std::initializer_list<Value> params = {});
  Result<Rows, Error> query(const Context& ctx, std::string_view sql,
                            std::span<const Value> params);
  Result<Rows, Error> query(const Context& ctx, std::string_view sql,
                            const std::vector<Value>& params);
  Result<long long, Error> exec(const Context& ctx, std::string_view sql,
                                std::initializer_list<Value> params = {});
  Result<long long, Error> exec(const Context& ctx, std::string_view sql,
                                std::span<const Value> params);
  Result<long long, Error> exec(const Context& ctx, std::string_view sql,
                                const std::vector<Value>& params);

  // COPY inside the transaction, which must outlive the copy and is not used meanwhile.
  Result<CopyIn, Error> copy_in(const Context& ctx, std::string_view sql);
  Result<CopyOut, Error> copy_out(const Context& ctx, std::string_view sql);

  // COMMIT. Either way the transaction is over and its connection back in the pool;
  // errc::closed when it was over already.
  Error commit(const Context& ctx);
  // ROLLBACK, likewise.
  Error rollback(const Context& ctx);

 private:
  friend class Pool;
  Tx(std::shared_ptr<Pool::State> pool, std::unique_ptr<Conn> conn) noexcept;
  Error finish(const Context& ctx, const char* command);
  std::shared_ptr<Pool::State> pool_;
  std::unique_ptr<Conn> conn_;  // null once over
};

// A COPY ... FROM STDIN in progress. write() the data in the format the statement
// names (text: a line per row, tab between columns; csv; binary), in chunks of any size
// (a row may straddle two), then finish(). Move-only. Aborted or destroyed before
// finish(), nothing is copied. A failure of write() ends the copy the same way.
class CopyIn {
 public:
  CopyIn(CopyIn&&) noexcept;
  CopyIn& operator=(CopyIn&&) noexcept;
  ~CopyIn();  // abort(), waiting up to 5 s for the server

  // Sends data, waiting while the server's socket takes no more.
  Error write(const Context& ctx, std::string_view data);
  // Ends the data: the rows copied, or the server's refusal of them (errc::server_error;
  // for a malformed row the field "context" says which: "COPY t, line 2, column n").
  Result<long long, Error> finish(const Context& ctx);
  // Ends the copy with nothing copied; the server is told why.
  Error abort(const Context& ctx, std::string_view why);

 private:
  friend class Pool;
  friend class Tx;
  explicit CopyIn(std::unique_ptr<Copy> copy) noexcept;
  std::unique_ptr<Copy> copy_;  // null once over
};

// A COPY ... TO STDOUT in progress: next() gives its data a row at a time, in the
// statement's format. Move-only. Destroyed before the end, the statement is cancelled
// and the rest dropped.
class CopyOut {
 public:
  CopyOut(CopyOut&&) noexcept;
  CopyOut& operator=(CopyOut&&) noexcept;
  ~CopyOut();

  // The next row (valid until the next call), or std::nullopt after the last one.
  Result<std::optional<std::string_view>, Error> next(const Context& ctx);
  // The rows sent, once next() has returned std::nullopt.
  long long rows() const noexcept { return rows_; }

 private:
  friend class Pool;
  friend class Tx;
  explicit CopyOut(std::unique_ptr<Copy> copy) noexcept;
  std::unique_ptr<Copy> copy_;  // null once over
  long long rows_ = 0;
};

// Notifications of one channel arrive on notifications() until close(). When the
// connection breaks (the server restarted, the backend was terminated) it is made
// again, with Options::max_backoff's pauses between tries, and LISTEN sent again;
// notifications sent meanwhile are lost, as with any LISTEN.
class Listener {
 public:
  ~Listener();  // close()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  const Chan<Notification>& notifications() const noexcept { return notifications_; }
  // How many times the connection was made again after breaking.
  std::uint64_t reconnects() const noexcept;
  // Stops listening: the connection is closed and notifications() closed after what was
  // received. Waits for the reading goroutine to end.
  void close();

  struct Loop;  // pg/src/listener.cpp

 private:
  friend class Pool;
  Listener(std::shared_ptr<Loop> loop, Chan<Notification> notifications);
  std::shared_ptr<Loop> loop_;
  Chan<Notification> notifications_;
};

}  // namespace goro::pg

template <>
struct std::is_error_code_enum<goro::pg::errc> : std::true_type {};
