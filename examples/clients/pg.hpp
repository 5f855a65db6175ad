// pg.hpp — PostgreSQL from goroutines: libpq's asynchronous API driven over
// goro::net::FdWatch, so a query parks its goroutine, never its thread.
//
//   pg::Pool pool("host=/run/postgresql dbname=app", 16);
//   r.handle("GET /users/{id}", [&](http::Request& req, http::ResponseWriter& w) {
//     pg::Result r = pool.query("SELECT name FROM users WHERE id = $1",
//                               {std::string(req.path_value("id"))}, req.context());
//     if (!r.ok()) {
//       w.text(r.error() + "\n", 500);
//     } else {
//       w.text(r.rows() ? std::string(r.get(0, 0)) + "\n" : "no such user\n");
//     }
//   });
//
// The pattern (docs/hooks.md explains it step by step): connect with PQconnectStart and
// PQconnectPoll, waiting for what each step asks for; put the connection in non-blocking
// mode; send with PQsendQueryParams and PQflush; then, while PQisBusy, wait until the
// socket is readable and PQconsumeInput, and collect PQgetResult until it returns null.
// libpq reads once per call, not until EAGAIN, so the watch is level-triggered (the
// default). The plain blocking calls (PQexec, PQconnectdb) would block the thread.
//
// A context's cancellation ends a wait at once: the query is cancelled on the server
// (PQcancel, a short blocking exchange on a new connection, in goro::blocking) and its
// results drained, so the connection stays usable; a server that does not answer within
// kCancelDrainTimeout has its connection closed instead.
//
// A Conn is one PGconn: one goroutine at a time, as libpq requires (a goroutine may move
// between threads; libpq does not mind). Pool lends connections to many goroutines.
// Header-only: include it and link libpq and goro::net.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <goro/net/wait_fd.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

namespace pg {

// How long a cancelled query's connection waits for the server to confirm the cancel
// before it is closed instead.
inline constexpr std::chrono::seconds kCancelDrainTimeout{5};

// One statement's result. Move-only; owns its PGresult.
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* res) : res_(res) {
    if (res == nullptr) {
      error_ = "no result";
    } else if (!ok()) {
      error_ = PQresultErrorMessage(res);
    }
  }
  // A failure without a result from the server: libpq's message, or a context's error.
  static Result failed(std::string message, std::error_code code = {}) {
    Result r;
    r.error_ = std::move(message);
    r.code_ = code;
    return r;
  }

  // The statement ran (PGRES_COMMAND_OK or PGRES_TUPLES_OK).
  bool ok() const noexcept {
    if (!res_) return false;
    const ExecStatusType s = PQresultStatus(res_.get());
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  }
  // Why not: the server's message, or libpq's; empty when ok().
  const std::string& error() const noexcept { return error_; }
  // The context's error (goro::context_errc::canceled or deadline_exceeded) when a
  // context ended the query; {} otherwise.
  std::error_code code() const noexcept { return code_; }
  // The SQLSTATE of a server error ("23505" for a unique violation), else empty.
  std::string_view sqlstate() const noexcept {
    const char* s = res_ ? PQresultErrorField(res_.get(), PG_DIAG_SQLSTATE) : nullptr;
    return s != nullptr ? s : "";
  }

  int rows() const noexcept { return res_ ? PQntuples(res_.get()) : 0; }
  int columns() const noexcept { return res_ ? PQnfields(res_.get()) : 0; }
  // A value in text form; "" for NULL (tell them apart with is_null).
  std::string_view get(int row, int column) const noexcept {
    return {PQgetvalue(res_.get(), row, column),
            static_cast<std::size_t>(PQgetlength(res_.get(), row, column))};
  }
  bool is_null(int row, int column) const noexcept {
    return PQgetisnull(res_.get(), row, column) != 0;
  }
  std::string_view column_name(int column) const noexcept { return PQfname(res_.get(), column); }
  // Rows an INSERT, UPDATE or DELETE touched, as text ("" for other statements).
  std::string_view affected() const noexcept { return res_ ? PQcmdTuples(res_.get()) : ""; }

 private:
  struct Clear {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> res_;
  std::string error_;
  std::error_code code_;
};

// Query parameters in text form, $1, $2, ...; std::nullopt is SQL NULL.
using Params = std::vector<std::optional<std::string>>;

// One connection. Move-only.
class Conn {
 public:
  // Connects with a libpq connection string ("host=/tmp dbname=app user=app", or a
  // postgresql:// URI; empty: libpq's PG* environment variables), parking the goroutine
  // while the server answers; gives up when ctx is cancelled. Check ok(). libpq
  // resolves a host name with getaddrinfo, which blocks: its calls run in goro::blocking.
  static Conn connect(const std::string& conninfo, const goro::Context& ctx = goro::background()) {
    Conn c;
    c.conn_.reset(goro::blocking([&] { return PQconnectStart(conninfo.c_str()); }));
    if (!c.conn_) {
      c.error_ = "out of memory";
      return c;
    }
    // As the libpq manual says: start as if the last poll had said "writing".
    PostgresPollingStatusType status = PGRES_POLLING_WRITING;
    while (status != PGRES_POLLING_OK) {
      if (status == PGRES_POLLING_FAILED || PQstatus(c.conn_.get()) == CONNECTION_BAD) {
        c.fail(PQerrorMessage(c.conn_.get()));
        return c;
      }
      if (!c.watch_socket()) return c;
      const auto interest =
          status == PGRES_POLLING_READING ? goro::net::Interest::read : goro::net::Interest::write;
      if (std::error_code ec = c.watch_.wait(interest, ctx)) {
        c.fail("connect: " + ec.message());
        return c;
      }
      status = goro::blocking([&] { return PQconnectPoll(c.conn_.get()); });
    }
    if (!c.watch_socket()) return c;
    if (PQsetnonblocking(c.conn_.get(), 1) != 0) c.fail(PQerrorMessage(c.conn_.get()));
    return c;
  }

  Conn() = default;
  Conn(Conn&&) noexcept = default;
  Conn& operator=(Conn&& other) noexcept {
    if (this != &other) {
      close();
      watch_ = std::move(other.watch_);
      conn_ = std::move(other.conn_);
      error_ = std::move(other.error_);
    }
    return *this;
  }
  ~Conn() { close(); }

  // Connected and usable.
  bool ok() const noexcept { return conn_ && PQstatus(conn_.get()) == CONNECTION_OK; }
  // Why not.
  const std::string& error() const noexcept { return error_; }
  // The PGconn, for what this class does not wrap (PQescapeLiteral, PQserverVersion).
  PGconn* native() const noexcept { return conn_.get(); }

  // Runs sql with params ($1, $2, ...; one statement) and returns its result, parking
  // the goroutine while the server works. With no params, sql may hold several
  // statements separated by ';': the last one's result comes back, or the first error.
  // Gives up when ctx is cancelled (see the top of this file).
  Result query(std::string_view sql, const Params& params = {},
               const goro::Context& ctx = goro::background()) {
    if (!ok()) return Result::failed(error_.empty() ? "not connected" : error_);
    if (auto e = ctx.err()) return Result::failed(e.message(), e);
    PGconn* c = conn_.get();
    const std::string text(sql);
    int sent;
    if (params.empty()) {
      sent = PQsendQuery(c, text.c_str());
    } else {
      std::vector<const char*> values;
      values.reserve(params.size());
      for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
      sent = PQsendQueryParams(c, text.c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, 0);
    }
    if (!sent) return Result::failed(PQerrorMessage(c));
    if (std::error_code ec = flush(ctx)) return give_up(ec);
    Result kept;
    bool have = false;
    for (;;) {
      if (std::error_code ec = await_result(ctx)) return give_up(ec);
      PGresult* r = PQgetResult(c);
      if (r == nullptr) break;
      // Of several statements, the last result, or the first error (the server runs
      // nothing after an error).
      if (!have || kept.ok()) {
        kept = Result(r);
        have = true;
      } else {
        PQclear(r);
      }
    }
    if (!have) return Result::failed(PQerrorMessage(c));
    return kept;
  }

 private:
  struct Finish {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };

  void fail(std::string message) {
    error_ = std::move(message);
    while (!error_.empty() && (error_.back() == '\n' || error_.back() == ' ')) error_.pop_back();
    close();
  }

  // Makes the watch follow libpq's socket. While it tries the server's addresses, libpq
  // may close its socket and open another, perhaps under the same number. False (and
  // closed) when the socket cannot be watched.
  bool watch_socket() {
    const int fd = PQsocket(conn_.get());
    if (watch_.watches(fd)) return true;
    watch_ = {};  // the old socket: closed by libpq, or no longer the one it uses
    auto watch = goro::net::FdWatch::open(fd);
    if (!watch) {
      fail("watching the socket: " + watch.error().message());
      return false;
    }
    watch_ = std::move(*watch);
    return true;
  }

  // Forget the socket before libpq closes it.
  void close() noexcept {
    watch_.release();
    conn_.reset();
  }

  // Sends what PQsendQuery queued. While the socket is full, the server's replies are
  // read meanwhile (PQconsumeInput), so that neither side waits for the other: what it
  // sends before it has read the whole query is only notices, which a socket buffer
  // holds.
  std::error_code flush(const goro::Context& ctx) {
    for (;;) {
      const int r = PQflush(conn_.get());
      if (r == 0) return {};
      if (r < 0) return std::make_error_code(std::errc::io_error);
      if (!PQconsumeInput(conn_.get())) return std::make_error_code(std::errc::io_error);
      if (std::error_code ec = watch_.wait(goro::net::Interest::write, ctx)) return ec;
    }
  }

  // Waits until PQgetResult will not block.
  std::error_code await_result(const goro::Context& ctx) {
    while (PQisBusy(conn_.get())) {
      if (std::error_code ec = watch_.wait(goro::net::Interest::read, ctx)) return ec;
      if (!PQconsumeInput(conn_.get())) return std::make_error_code(std::errc::io_error);
    }
    return {};
  }

  // A wait failed: a context's cancellation (cancel on the server, drain, keep the
  // connection) or a broken connection (close it).
  Result give_up(std::error_code ec) {
    const bool by_context =
        ec == goro::context_errc::canceled || ec == goro::context_errc::deadline_exceeded;
    if (!by_context) {
      std::string message = ec == std::errc::io_error ? PQerrorMessage(conn_.get()) : ec.message();
      fail(message);
      return Result::failed(error_);
    }
    if (!cancel_on_server()) fail("the server did not confirm the cancel of a query");
    return Result::failed(ec.message(), ec);
  }

  // PQcancel, then read the cancelled query's results to the end, within
  // kCancelDrainTimeout. Whether the connection is usable afterwards.
  bool cancel_on_server() {
    PGcancel* cancel = PQgetCancel(conn_.get());
    if (cancel == nullptr) return false;
    char message[256];
    const int sent = goro::blocking([&] { return PQcancel(cancel, message, sizeof message); });
    PQfreeCancel(cancel);
    if (!sent) return false;
    auto [ctx, stop] = goro::with_timeout(goro::background(), kCancelDrainTimeout);
    bool drained = !flush(ctx);
    while (drained) {
      if (await_result(ctx)) {
        drained = false;
        break;
      }
      PGresult* r = PQgetResult(conn_.get());
      if (r == nullptr) break;
      PQclear(r);
    }
    stop();
    return drained;
  }

  goro::net::FdWatch watch_;  // on conn_'s socket; released before conn_ closes it
  std::unique_ptr<PGconn, Finish> conn_;
  std::string error_;
};

// Lends up to `size` connections to any number of goroutines. Connections are made on
// first use and kept; one that broke is replaced by the next borrower. The pool must
// outlive its leases.
class Pool {
 public:
  Pool(std::string conninfo, int size) : conninfo_(std::move(conninfo)), idle_(size) {
    // A slot holding no connection is the right to make one.
    for (int i = 0; i < size; ++i) idle_.send(nullptr);
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A borrowed connection; given back when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)),
          conn_(std::move(other.conn_)),
          error_(std::move(other.error_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (pool_ != nullptr) pool_->give_back(std::move(conn_));
    }
    // Check before use: a borrow that failed (no connection, or ctx cancelled) holds
    // the reason in error().
    bool ok() const noexcept { return conn_ && conn_->ok(); }
    std::string error() const { return conn_ ? conn_->error() : error_; }
    Conn& operator*() const noexcept { return *conn_; }
    Conn* operator->() const noexcept { return conn_.get(); }

   private:
    friend class Pool;
    Lease(Pool* pool, std::unique_ptr<Conn> conn, std::string error)
        : pool_(pool), conn_(std::move(conn)), error_(std::move(error)) {}
    Pool* pool_;
    std::unique_ptr<Conn> conn_;
    std::string error_;
  };

  // Borrows a connection: an idle one, a new one while fewer than size exist, else the
  // first given back; gives up when ctx is cancelled first.
  Lease acquire(const goro::Context& ctx = goro::background()) {
    std::optional<std::unique_ptr<Conn>> slot;
    if (goro::select(goro::recv_case(idle_, slot), goro::recv_case(ctx.done())) != 0) {
      return Lease(nullptr, nullptr, ctx.err().message());
    }
    std::unique_ptr<Conn> conn = std::move(*slot);
    if (!conn || !conn->ok()) conn = std::make_unique<Conn>(Conn::connect(conninfo_, ctx));
    return Lease(this, std::move(conn), "");
  }

  // Runs one query on a borrowed connection.
  Result query(std::string_view sql, const Params& params = {},
               const goro::Context& ctx = goro::background()) {
    Lease lease = acquire(ctx);
    if (!lease.ok()) return Result::failed(lease.error(), ctx.err());
    return lease->query(sql, params, ctx);
  }

 private:
  void give_back(std::unique_ptr<Conn> conn) {
    if (conn && !conn->ok()) conn.reset();
    idle_.send(std::move(conn));
  }

  const std::string conninfo_;
  goro::Chan<std::unique_ptr<Conn>> idle_;  // one slot per connection allowed
};

}  // namespace pg
