// goro-pg-api: a notes service on PostgreSQL whose handlers run SQL as straight-line
// code through goro::pg (docs/data.md): a query parks its goroutine, never its thread,
// so a few threads serve any number of requests waiting on the database.
//
//   $ ./goro-pg-api --addr 127.0.0.1:8080 'host=/run/postgresql dbname=app'
//         (no connection string: libpq's PGHOST, PGDATABASE, ... environment variables)
//   $ curl -d 'buy milk' localhost:8080/notes       201, Location: /notes/1   note 1
//   $ curl localhost:8080/notes/1                    buy milk
//   $ curl localhost:8080/notes                      1	buy milk
//   $ curl -X DELETE localhost:8080/notes/1          204
//   $ curl 'localhost:8080/sleep?s=0.2'              slept 0.2 s in the database
//   $ curl 'localhost:8080/sleep?s=5'                504 after 1 s; the query is cancelled
//                                                    on the server, as it is when the
//                                                    client hangs up first
//   $ curl 'localhost:8080/readyz?verbose'           [+]postgres ok ... (503 while the
//                                                    database does not answer)
//
// Every handler borrows a connection from a goro::pg::Pool (kPoolSize connections, made
// on first use) under the request's context. examples/notes is the same service with
// JSON bodies and a Redis cache.
#include <goro/app.hpp>
#include <goro/goro.hpp>
#include <goro/pg/pg.hpp>

#include <charconv>
#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace http = goro::http;
namespace pg = goro::pg;
using namespace std::chrono_literals;

namespace {

// Connections to the database, shared by all requests.
constexpr int kPoolSize = 16;
// How long /sleep may keep the database busy before the service answers 504.
constexpr auto kQueryDeadline = 1s;

// A failed query: 504 when its deadline passed, 503 when the client left (nobody reads
// it), 500 with the database's message otherwise.
void fail(http::ResponseWriter& w, const goro::Error& e) {
  int status = 500;
  if (e == goro::context_errc::deadline_exceeded) status = 504;
  if (e == goro::context_errc::canceled) status = 503;
  w.text(e.what() + "\n", status);
}

// The {id} of the path, or 400.
bool note_id(http::Request& req, http::ResponseWriter& w, long long& id) {
  const std::string_view s = req.path_value("id");
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec == std::errc() && end == s.data() + s.size() && id > 0) return true;
  w.text("the note id must be a number\n", 400);
  return false;
}

http::Handler routes(pg::Pool& db) {
  http::Router r;
  r.handle("POST /notes", [&db](http::Request& req, http::ResponseWriter& w) {
    auto body = req.body();
    if (!body) return;  // the server has answered (too large, or the client left)
    auto row =
        db.query(req.context(), "INSERT INTO notes (body) VALUES ($1) RETURNING id", {*body});
    if (!row) return fail(w, row.error());
    const std::string id = std::to_string(*(*row)[0].get<long long>(0));
    w.header().set("Location", "/notes/" + id);
    w.text("note " + id + "\n", 201);
  });
  r.handle("GET /notes", [&db](http::Request& req, http::ResponseWriter& w) {
    auto rows = db.query(req.context(), "SELECT id, body FROM notes ORDER BY id");
    if (!rows) return fail(w, rows.error());
    std::string out;
    for (int i = 0; i < rows->size(); ++i) {
      out.append((*rows)[i].text(0)).append("\t").append((*rows)[i].text(1)).append("\n");
    }
    w.text(out);
  });
  r.handle("GET /notes/{id}", [&db](http::Request& req, http::ResponseWriter& w) {
    long long id = 0;
    if (!note_id(req, w, id)) return;
    auto row = db.query(req.context(), "SELECT body FROM notes WHERE id = $1", {id});
    if (!row) return fail(w, row.error());
    if (row->size() == 0) {
      w.text("no note " + std::to_string(id) + "\n", 404);
    } else {
      w.text(std::string((*row)[0].text(0)) + "\n");
    }
  });
  r.handle("DELETE /notes/{id}", [&db](http::Request& req, http::ResponseWriter& w) {
    long long id = 0;
    if (!note_id(req, w, id)) return;
    auto gone = db.exec(req.context(), "DELETE FROM notes WHERE id = $1", {id});
    if (!gone) return fail(w, gone.error());
    if (*gone == 0) {
      w.text("no note " + std::to_string(id) + "\n", 404);
    } else {
      w.set_status(204);
    }
  });
  // Keeps the database busy for ?s= seconds, at most kQueryDeadline.
  r.handle("GET /sleep", [&db](http::Request& req, http::ResponseWriter& w) {
    const std::string seconds = req.query("s").value_or("0.1");
    auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
    auto slept = db.exec(ctx, "SELECT pg_sleep($1::float8)", {seconds});
    if (!slept) return fail(w, slept.error());
    w.text("slept " + seconds + " s in the database\n");
  });
  return http::chain(r, {http::recover()});
}

}  // namespace

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "goro-pg-api"});
  app.flags().set_description(
      "Its one argument, CONNINFO, is libpq's connection string (\"host=/tmp dbname=notes\");\n"
      "without it libpq's defaults and environment (PGHOST, ...) apply.");
  if (std::optional<int> exit = app.parse()) return *exit;
  pg::Pool db({.conninfo = app.args().empty() ? "" : app.args()[0], .max_open = kPoolSize});
  return app.run([&]() -> http::Handler {
    auto schema = db.exec(goro::Context(),
                          "CREATE TABLE IF NOT EXISTS notes (id bigserial PRIMARY KEY, body text NOT NULL)");
    if (!schema) throw std::runtime_error("database: " + schema.error().what());
    // Ready (/readyz) while the database answers; /healthz stays App's own.
    app.add_readiness_check("postgres", [&db](const goro::Context& ctx) -> goro::Error {
      auto ping = db.query(ctx, "SELECT 1");
      return ping ? goro::Error() : ping.error();
    });
    return routes(db);
  });
}
