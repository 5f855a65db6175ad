// COPY FROM STDIN and TO STDOUT as streams: CopyIn hands libpq the data
// (PQputCopyData, PQputCopyEnd), CopyOut takes it a row at a time (PQgetCopyData in its
// asynchronous form), each waiting on the connection's socket as statements do. See
// <goro/pg/pg.hpp> for what a caller sees.
#include <algorithm>

#include "conn.hpp"

namespace goro::pg {

namespace {

// Data is handed to libpq at most this much at a time, and sent before the next piece:
// libpq would otherwise grow its buffer to hold a whole write.
constexpr std::size_t kCopyPiece = 64 * 1024;

Error over() { return Error(errc::closed, "pg: the COPY is over"); }

}  // namespace

// A COPY in progress on a connection: a pool's, given back when the copy ends, or a
// transaction's, left to it.
struct Copy {
  std::shared_ptr<Pool::State> pool;  // the pool `owned` goes back to; null in a Tx
  std::unique_ptr<Conn> owned;
  Conn* conn = nullptr;  // owned.get(), or the transaction's
  char* row = nullptr;   // CopyOut: the row next() gave last, freed at the next call

  ~Copy() {
    if (row != nullptr) PQfreemem(row);
    if (pool && owned) checkin(*pool, std::move(owned));
  }

  // Ends a COPY FROM STDIN that will not finish: the server is told it failed (why),
  // within kCancelDrainTimeout, and its answer read. Whether the connection is fit.
  bool end_in(const char* why) {
    auto [ctx, stop] = with_timeout(background(), kCancelDrainTimeout);
    int sent;
    std::error_code ec;
    while (!ec && (sent = PQputCopyEnd(conn->pg, why)) == 0) ec = conn->flush(ctx);
    if (!ec && sent < 0) ec = std::make_error_code(std::errc::io_error);
    ResultPtr ignored;
    if (!ec) ec = conn->flush(ctx);
    if (!ec) ec = conn->collect(ctx, ignored);
    stop();
    if (ec) conn->broken = true;
    return !ec;
  }
};

// ---------------------------------------------------------------------------------------
// Starting one.

namespace {

Result<std::unique_ptr<Copy>, Error> start(std::shared_ptr<Pool::State> pool,
                                           std::unique_ptr<Conn> owned, Conn& conn,
                                           const Context& ctx, std::string_view sql,
                                           ExecStatusType want) {
  auto copy = std::make_unique<Copy>();
  copy->conn = &conn;
  copy->pool = std::move(pool);
  copy->owned = std::move(owned);
  Result<ResultPtr, Error> r = conn.start_copy(ctx, sql, want);
  if (!r) return r.error();  // ~Copy gives the connection back
  return copy;
}

Result<std::unique_ptr<Copy>, Error> start_in_pool(const std::shared_ptr<Pool::State>& pool,
                                                   const Context& ctx, std::string_view sql,
                                                   ExecStatusType want) {
  Result<std::unique_ptr<Conn>, Error> conn = checkout(*pool, ctx);
  if (!conn) return conn.error();
  Conn& c = **conn;
  return start(pool, std::move(*conn), c, ctx, sql, want);
}

}  // namespace

Result<CopyIn, Error> Pool::copy_in(const Context& ctx, std::string_view sql) {
  Result<std::unique_ptr<Copy>, Error> c = start_in_pool(state_, ctx, sql, PGRES_COPY_IN);
  if (!c) return c.error();
  return CopyIn(std::move(*c));
}

Result<CopyOut, Error> Pool::copy_out(const Context& ctx, std::string_view sql) {
  Result<std::unique_ptr<Copy>, Error> c = start_in_pool(state_, ctx, sql, PGRES_COPY_OUT);
  if (!c) return c.error();
  return CopyOut(std::move(*c));
}

Result<CopyIn, Error> Tx::copy_in(const Context& ctx, std::string_view sql) {
  if (!conn_) return Error(errc::closed, "pg: the transaction is over");
  Result<std::unique_ptr<Copy>, Error> c = start(nullptr, nullptr, *conn_, ctx, sql, PGRES_COPY_IN);
  if (!c) return c.error();
  return CopyIn(std::move(*c));
}

Result<CopyOut, Error> Tx::copy_out(const Context& ctx, std::string_view sql) {
  if (!conn_) return Error(errc::closed, "pg: the transaction is over");
  Result<std::unique_ptr<Copy>, Error> c =
      start(nullptr, nullptr, *conn_, ctx, sql, PGRES_COPY_OUT);
  if (!c) return c.error();
  return CopyOut(std::move(*c));
}

// ---------------------------------------------------------------------------------------
// CopyIn.

CopyIn::CopyIn(std::unique_ptr<Copy> copy) noexcept : copy_(std::move(copy)) {}
CopyIn::CopyIn(CopyIn&&) noexcept = default;

CopyIn& CopyIn::operator=(CopyIn&& other) noexcept {
  if (this != &other) {
    if (copy_) CopyIn ended(std::move(*this));  // aborted as it is destroyed
    copy_ = std::move(other.copy_);
  }
  return *this;
}

CopyIn::~CopyIn() {
  if (copy_) (void)copy_->end_in("goro::pg: the CopyIn was destroyed before finish()");
}

Error CopyIn::write(const Context& ctx, std::string_view data) {
  if (!copy_) return over();
  Conn& c = *copy_->conn;
  std::error_code ec = ctx.err();
  while (!ec && !data.empty()) {
    const std::size_t piece = std::min(data.size(), kCopyPiece);
    const int queued = PQputCopyData(c.pg, data.data(), static_cast<int>(piece));
    if (queued < 0) {
      Error e = c.failure("sending COPY data");
      copy_.reset();
      return e;
    }
    if (queued == 1) data.remove_prefix(piece);
    // Sent before the next piece (and, when libpq could not queue it, to make room).
    ec = c.flush(ctx);
  }
  if (!ec) return {};
  if (ctx.err()) {
    (void)copy_->end_in("goro::pg: the COPY's Context ended");
    copy_.reset();
    return Error(ctx.err(), "pg: COPY cancelled: " + ctx.err().message());
  }
  Error e = c.give_up(ec, ctx);
  copy_.reset();
  return e;
}

Result<long long, Error> CopyIn::finish(const Context& ctx) {
  if (!copy_) return over();
  Conn& c = *copy_->conn;
  std::unique_ptr<Copy> copy = std::move(copy_);
  if (ctx.err()) {
    (void)copy->end_in("goro::pg: the COPY's Context ended");
    return Error(ctx.err(), "pg: COPY cancelled: " + ctx.err().message());
  }
  int sent;
  std::error_code ec;
  while (!ec && (sent = PQputCopyEnd(c.pg, nullptr)) == 0) ec = c.flush(ctx);
  if (!ec && sent < 0) return c.failure("ending COPY data");
  ResultPtr kept;
  if (!ec) ec = c.flush(ctx);
  if (!ec) ec = c.collect(ctx, kept);
  if (ec) return c.give_up(ec, ctx);
  if (!kept) return c.failure("reading a result");
  if (PQresultStatus(kept.get()) != PGRES_COMMAND_OK) return server_error(kept.get());
  return Rows(kept.release()).affected();
}

Error CopyIn::abort(const Context& ctx, std::string_view why) {
  if (!copy_) return over();
  std::unique_ptr<Copy> copy = std::move(copy_);
  Conn& c = *copy->conn;
  const std::string reason(why);
  int sent;
  std::error_code ec = ctx.err();
  while (!ec && (sent = PQputCopyEnd(c.pg, reason.c_str())) == 0) ec = c.flush(ctx);
  if (!ec && sent < 0) return c.failure("ending COPY data");
  ResultPtr refusal;  // the server's "COPY from stdin failed: why"
  if (!ec) ec = c.flush(ctx);
  if (!ec) ec = c.collect(ctx, refusal);
  if (ec) return c.give_up(ec, ctx);
  return {};
}

// ---------------------------------------------------------------------------------------
// CopyOut.

CopyOut::CopyOut(std::unique_ptr<Copy> copy) noexcept : copy_(std::move(copy)) {}
CopyOut::CopyOut(CopyOut&&) noexcept = default;

CopyOut& CopyOut::operator=(CopyOut&& other) noexcept {
  if (this != &other) {
    if (copy_) CopyOut ended(std::move(*this));  // cancelled as it is destroyed
    copy_ = std::move(other.copy_);
    rows_ = other.rows_;
  }
  return *this;
}

CopyOut::~CopyOut() {
  if (!copy_) return;
  // Cancelled on the server, the rest of its rows read and dropped.
  if (!copy_->conn->cancel_on_server()) copy_->conn->broken = true;
}

Result<std::optional<std::string_view>, Error> CopyOut::next(const Context& ctx) {
  if (!copy_) return over();
  Conn& c = *copy_->conn;
  if (copy_->row != nullptr) {
    PQfreemem(copy_->row);
    copy_->row = nullptr;
  }
  std::error_code ec = ctx.err();
  while (!ec) {
    char* row = nullptr;
    const int n = PQgetCopyData(c.pg, &row, 1);
    if (n > 0) {
      copy_->row = row;
      return std::optional<std::string_view>(std::string_view(row, static_cast<std::size_t>(n)));
    }
    if (n == -2) {
      Error e = c.failure("reading COPY data");
      copy_.reset();
      return e;
    }
    if (n == -1) {
      // All sent: the COPY's own result follows.
      std::unique_ptr<Copy> copy = std::move(copy_);
      ResultPtr kept;
      if (std::error_code e = c.collect(ctx, kept)) return c.give_up(e, ctx);
      if (!kept) return c.failure("reading a result");
      if (PQresultStatus(kept.get()) != PGRES_COMMAND_OK) return server_error(kept.get());
      rows_ = Rows(kept.release()).affected();
      return std::optional<std::string_view>();
    }
    ec = c.watch.wait(net::Interest::read, ctx);
    if (!ec && PQconsumeInput(c.pg) == 0) ec = std::make_error_code(std::errc::io_error);
  }
  Error e = c.give_up(ec, ctx);
  copy_.reset();
  return e;
}

}  // namespace goro::pg
