// One libpq connection on goroutines. The pattern: connect with PQconnectStart and
// PQconnectPoll, waiting on the socket for what each step asks; non-blocking mode; send
// with PQsend* and PQflush; then, while PQisBusy, wait for the socket to be readable and
// PQconsumeInput, collecting PQgetResult until it returns null (or a COPY starts: in
// COPY state libpq answers PQgetResult with the COPY result again and again). libpq
// reads once per call, not until EAGAIN, so the watch is level-triggered (FdWatch's
// default).
#include "conn.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include <goro/scheduler/runtime.hpp>

namespace goro::pg {

namespace {

// libpq's words on one line: its line breaks (and the tabs after them) become a space.
std::string trimmed(const char* words) {
  std::string s;
  for (const char* p = words != nullptr ? words : ""; *p != '\0'; ++p) {
    if (*p != '\n') {
      s += *p;
      continue;
    }
    while (p[1] == '\t' || p[1] == ' ') ++p;
    s += ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

bool by_context(std::error_code ec) {
  return ec == context_errc::canceled || ec == context_errc::deadline_exceeded;
}

bool succeeded(const PGresult* r) {
  const ExecStatusType s = PQresultStatus(r);
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY;
}

bool is_copy(ExecStatusType s) {
  return s == PGRES_COPY_IN || s == PGRES_COPY_OUT || s == PGRES_COPY_BOTH;
}

// Type OIDs (pg_type.dat) whose binary form Row reads: bytea's is its bytes; text's,
// varchar's, bpchar's and name's is their text.
constexpr Oid kByteaOid = 17, kNameOid = 19, kTextOid = 25, kBpcharOid = 1042,
              kVarcharOid = 1043;

// Whether a statement with res's columns gains from binary results: some bytea (half
// the bytes, no hex), and nothing whose binary form differs from its text but bytea.
bool binary_pays(const PGresult* res) {
  bool bytea = false;
  for (int i = 0; i < PQnfields(res); ++i) {
    const Oid t = PQftype(res, i);
    if (t == kByteaOid) {
      bytea = true;
    } else if (t != kTextOid && t != kVarcharOid && t != kBpcharOid && t != kNameOid) {
      return false;
    }
  }
  return bytea;
}

// libpq's notices (and the server's goodbye to an idle connection) are not printed.
void ignore_notice(void*, const char*) {}

}  // namespace

Error server_error(const PGresult* res) {
  const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
  std::string message = primary != nullptr ? primary : trimmed(PQresultErrorMessage(res));
  std::vector<Error::Field> fields;
  const std::pair<const char*, int> wanted[] = {
      {"sqlstate", PG_DIAG_SQLSTATE},        {"detail", PG_DIAG_MESSAGE_DETAIL},
      {"hint", PG_DIAG_MESSAGE_HINT},        {"severity", PG_DIAG_SEVERITY},
      {"context", PG_DIAG_CONTEXT},
      {"constraint", PG_DIAG_CONSTRAINT_NAME}, {"schema", PG_DIAG_SCHEMA_NAME},
      {"table", PG_DIAG_TABLE_NAME},         {"column", PG_DIAG_COLUMN_NAME},
  };
  for (const auto& [name, code] : wanted) {
    const char* v = PQresultErrorField(res, code);
    if (v != nullptr && *v != '\0') fields.push_back({name, v});
  }
  return Error(errc::server_error, std::move(message), std::move(fields));
}

std::chrono::milliseconds backoff(int failures, std::chrono::milliseconds max) {
  return std::min(max, std::chrono::milliseconds(10LL << std::min(failures, 16)));
}

Conn::~Conn() {
  // libpq closes its socket itself when the server goes; the number may be another's
  // by now.
  if (pg != nullptr && PQsocket(pg) < 0) {
    watch.forget_closed();
  } else {
    watch.release();
  }
  if (pg != nullptr) PQfinish(pg);
}

Error Conn::failure(const char* step) {
  broken = true;
  const bool gone = pg == nullptr || PQstatus(pg) == CONNECTION_BAD;
  const std::error_code code = std::make_error_code(gone ? std::errc::connection_reset
                                                         : std::errc::io_error);
  std::string words = pg != nullptr ? trimmed(PQerrorMessage(pg)) : std::string();
  if (words.empty()) words = code.message();
  return Error(code, "pg: " + std::string(step) + ": " + words);
}

Result<std::unique_ptr<Conn>, Error> Conn::connect(const Options& options, const Context& ctx) {
  const std::pair<Context, CancelFunc> limit = with_timeout(ctx, options.connect_timeout);
  const Context& limited = limit.first;
  const CancelFunc& stop = limit.second;
  auto conn = std::make_unique<Conn>();
  conn->created = conn->last_used = Clock::now();
  // With a host name libpq resolves it (getaddrinfo) inside PQconnectStart and
  // PQconnectPoll: they may block.
  conn->pg = goro::blocking([&] { return PQconnectStart(options.conninfo.c_str()); });
  const auto refused = [&](std::string words) {
    stop();
    return Error(std::make_error_code(std::errc::connection_refused),
                 "pg: connect: " + std::move(words));
  };
  if (conn->pg == nullptr) return refused("out of memory");
  PQsetNoticeProcessor(conn->pg, ignore_notice, nullptr);
  // As the libpq manual says: start as if the last poll had asked for writing.
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED || PQstatus(conn->pg) == CONNECTION_BAD)
      return refused(trimmed(PQerrorMessage(conn->pg)));
    // While it tries the server's addresses libpq may close its socket and open
    // another, perhaps under the same number.
    const int fd = PQsocket(conn->pg);
    if (conn->watch.fd() != fd || !conn->watch.watches(fd)) {
      // libpq keeps one socket: a watch on any other watches one it has closed.
      conn->watch.forget_closed();
      Result<net::FdWatch> w = net::FdWatch::open(fd);
      if (!w) return refused("watching the socket: " + w.error().message());
      conn->watch = std::move(*w);
    }
    const auto interest =
        status == PGRES_POLLING_READING ? net::Interest::read : net::Interest::write;
    if (std::error_code ec = conn->watch.wait(interest, limited)) {
      stop();
      if (ctx.err()) return Error(ctx.err(), "pg: connect: " + ctx.err().message());
      if (by_context(ec))
        return Error(std::make_error_code(std::errc::timed_out), "pg: connect: timed out");
      return Error(ec, "pg: connect: " + ec.message());
    }
    status = goro::blocking([&] { return PQconnectPoll(conn->pg); });
  }
  if (PQsetnonblocking(conn->pg, 1) != 0) return refused(trimmed(PQerrorMessage(conn->pg)));
  Result<ResultPtr, Error> tz = conn->run(limited, "SET TIME ZONE 'UTC'", {}, false);
  stop();
  if (!tz) return tz.error();
  return conn;
}

std::error_code Conn::flush(const Context& ctx) {
  for (;;) {
    const int r = PQflush(pg);
    if (r == 0) return {};
    if (r < 0) return std::make_error_code(std::errc::io_error);
    if (PQconsumeInput(pg) == 0) return std::make_error_code(std::errc::io_error);
    if (std::error_code ec = watch.wait(net::Interest::write, ctx)) return ec;
  }
}

std::error_code Conn::collect(const Context& ctx, ResultPtr& kept, bool stop_at_copy) {
  for (;;) {
    while (PQisBusy(pg) != 0) {
      if (std::error_code ec = watch.wait(net::Interest::read, ctx)) return ec;
      if (PQconsumeInput(pg) == 0) return std::make_error_code(std::errc::io_error);
    }
    ResultPtr r(PQgetResult(pg));
    if (!r) return {};
    const ExecStatusType status = PQresultStatus(r.get());
    if (is_copy(status)) {
      if (stop_at_copy) {
        kept = std::move(r);
        return {};
      }
      if (status == PGRES_COPY_BOTH) return std::make_error_code(std::errc::protocol_error);
      if (status == PGRES_COPY_IN) {
        // The server ends the copy with an error, having copied nothing.
        int sent;
        while ((sent = PQputCopyEnd(pg, "goro::pg: the COPY was ended before its data")) == 0) {
          if (std::error_code ec = flush(ctx)) return ec;
        }
        if (sent < 0) return std::make_error_code(std::errc::io_error);
        if (std::error_code ec = flush(ctx)) return ec;
      } else {
        for (;;) {
          char* row = nullptr;
          const int n = PQgetCopyData(pg, &row, 1);
          if (n > 0) {
            PQfreemem(row);
          } else if (n == 0) {
            if (std::error_code ec = watch.wait(net::Interest::read, ctx)) return ec;
            if (PQconsumeInput(pg) == 0) return std::make_error_code(std::errc::io_error);
          } else if (n == -1) {
            break;
          } else {
            return std::make_error_code(std::errc::io_error);
          }
        }
      }
      continue;
    }
    // The server runs nothing after a refusal: the first one is the answer.
    if (!kept || succeeded(kept.get())) kept = std::move(r);
  }
}

bool Conn::cancel_on_server() {
  PGcancel* cancel = PQgetCancel(pg);
  if (cancel == nullptr) return false;
  char words[256];
  // A short blocking exchange with the server on a new connection.
  const int sent = goro::blocking([&] { return PQcancel(cancel, words, sizeof words); });
  PQfreeCancel(cancel);
  if (sent == 0) return false;
  auto [ctx, stop] = with_timeout(background(), kCancelDrainTimeout);
  ResultPtr ignored;
  const bool drained = !flush(ctx) && !collect(ctx, ignored);
  stop();
  return drained;
}

Error Conn::give_up(std::error_code ec, const Context& ctx) {
  if (by_context(ec) && ctx.err()) {
    if (!cancel_on_server()) broken = true;
    return Error(ctx.err(), "pg: statement cancelled: " + ctx.err().message());
  }
  if (ec == std::errc::io_error) return failure("talking to the server");
  broken = true;
  return Error(ec, "pg: waiting for the server: " + ec.message());
}

template <class Send>
Result<ResultPtr, Error> Conn::exchange(const Context& ctx, Send send, bool copy) {
  if (std::error_code e = ctx.err()) return Error(e, "pg: " + e.message());
  if (send() == 0) return failure("sending a statement");
  ResultPtr kept;
  std::error_code ec = flush(ctx);
  if (!ec) ec = collect(ctx, kept, true);
  if (ec) return give_up(ec, ctx);
  if (!kept) {
    if (PQstatus(pg) == CONNECTION_BAD) return failure("reading a result");
    broken = true;
    return Error(errc::protocol_error, "pg: the server answered the statement with no result");
  }
  const ExecStatusType status = PQresultStatus(kept.get());
  switch (status) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
    case PGRES_EMPTY_QUERY:
      return kept;
    case PGRES_FATAL_ERROR:
    case PGRES_NONFATAL_ERROR:
      if (PQresultErrorField(kept.get(), PG_DIAG_SQLSTATE) != nullptr) return server_error(kept.get());
      // Not the server's words but libpq's: the connection broke, or what came was not
      // the protocol, and nothing more that comes on it can be trusted.
      if (PQstatus(pg) == CONNECTION_BAD) return failure("talking to the server");
      broken = true;
      return Error(errc::protocol_error, "pg: " + trimmed(PQresultErrorMessage(kept.get())));
    case PGRES_COPY_IN:
    case PGRES_COPY_OUT: {
      if (copy) return kept;
      // A COPY run as a statement: ended here (nothing copied in, what came out
      // dropped), the connection kept.
      ResultPtr end;
      if (std::error_code e = collect(ctx, end)) return give_up(e, ctx);
      return Error(errc::protocol_error,
                   status == PGRES_COPY_IN ? "pg: COPY FROM STDIN runs with copy_in()"
                                           : "pg: COPY TO STDOUT runs with copy_out()");
    }
    default:
      // COPY BOTH (replication) and what else libpq may say.
      broken = true;
      return Error(errc::protocol_error,
                   std::string("pg: unsupported result: ") + PQresStatus(status));
  }
}

Result<ResultPtr, Error> Conn::start_copy(const Context& ctx, std::string_view sql,
                                          ExecStatusType want) {
  if (broken || PQstatus(pg) != CONNECTION_OK) return failure("using a broken connection");
  const std::string text(sql);
  Result<ResultPtr, Error> r = exchange(ctx, [&] { return PQsendQuery(pg, text.c_str()); }, true);
  if (!r) return r;
  const ExecStatusType got = PQresultStatus(r->get());
  if (got == want) return r;
  if (is_copy(got)) {
    ResultPtr end;
    if (std::error_code e = collect(ctx, end)) return give_up(e, ctx);
  }
  return Error(errc::protocol_error,
               want == PGRES_COPY_IN ? "pg: copy_in() runs COPY ... FROM STDIN only"
                                     : "pg: copy_out() runs COPY ... TO STDOUT only");
}

Result<ResultPtr, Error> Conn::run(const Context& ctx, std::string_view sql,
                                   std::span<const Value> params, bool prepare) {
  if (broken || PQstatus(pg) != CONNECTION_OK) return failure("using a broken connection");
  const std::string text(sql);
  const int n = static_cast<int>(params.size());
  std::vector<const char*> values(params.size());
  // Bytes go in binary, as bytea: the server needs their lengths, and their type to
  // read them (a parameter whose type it infers from the statement would be text).
  std::vector<int> lengths, formats;
  std::vector<Oid> types;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Value& v = params[i];
    values[i] = v.is_null() ? nullptr : v.text().data();
    if (v.is_binary() && lengths.empty()) {
      lengths.assign(params.size(), 0);
      formats.assign(params.size(), 0);
      types.assign(params.size(), 0);
    }
    if (v.is_binary()) {
      lengths[i] = static_cast<int>(v.text().size());
      formats[i] = 1;
      types[i] = kByteaOid;
    }
  }
  const int* length_of = lengths.empty() ? nullptr : lengths.data();
  const int* format_of = formats.empty() ? nullptr : formats.data();
  const Oid* type_of = types.empty() ? nullptr : types.data();
  const auto unprepared = [&] {
    if (n == 0) return exchange(ctx, [&] { return PQsendQuery(pg, text.c_str()); });
    return exchange(ctx, [&] {
      return PQsendQueryParams(pg, text.c_str(), n, type_of, values.data(), length_of,
                               format_of, 0);
    });
  };
  if (!prepare) return unprepared();
  for (int attempt = 0;; ++attempt) {
    auto found = prepared.find(text);
    if (found == prepared.end()) {
      if (prepared.size() >= kMaxPrepared) return unprepared();
      const std::string name = "goro_" + std::to_string(next_statement++);
      Result<ResultPtr, Error> made = exchange(
          ctx, [&] { return PQsendPrepare(pg, name.c_str(), text.c_str(), n, type_of); });
      if (!made) return made.error();
      found = prepared.emplace(text, Statement{.name = name}).first;
    }
    Statement& statement = found->second;
    Result<ResultPtr, Error> r = exchange(ctx, [&] {
      return PQsendQueryPrepared(pg, statement.name.c_str(), n, values.data(), length_of,
                                 format_of, statement.result_format);
    });
    if (r && !statement.described) {
      statement.described = true;
      if (binary_pays(r->get())) statement.result_format = 1;
    }
    // The columns of a table changed under a prepared statement (ALTER TABLE): the server
    // refuses to run it ("cached plan must not change result type"). Prepared anew it
    // runs; outside a transaction (which the refusal would have aborted) at once.
    if (r || r.error().field("sqlstate") != "0A000" ||
        r.error().what().find("cached plan") == std::string::npos)
      return r;
    prepared.erase(found);
    if (attempt > 0 || PQtransactionStatus(pg) != PQTRANS_IDLE) return r;
  }
}

bool Conn::reusable() const noexcept {
  return !broken && pg != nullptr && PQstatus(pg) == CONNECTION_OK &&
         PQtransactionStatus(pg) == PQTRANS_IDLE;
}

bool Conn::alive() {
  // What an idle connection may have been sent: a NOTICE, a parameter's new value, or
  // the server's goodbye (an error) and then the end. Read it with libpq until nothing
  // is left; a few rounds are enough for anything but a flood.
  for (int round = 0; round < 8; ++round) {
    if (PQstatus(pg) != CONNECTION_OK) return false;
    char c;
    const ssize_t n = ::recv(PQsocket(pg), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (PQconsumeInput(pg) == 0) return false;
    while (PGnotify* stray = PQnotifies(pg)) PQfreemem(stray);
  }
  return false;
}

}  // namespace goro::pg
