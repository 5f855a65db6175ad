// goro-pg-api: a notes service on PostgreSQL whose handlers run SQL as straight-line
// code. The queries go through examples/clients/pg.hpp, libpq's asynchronous API over
// goro::net::FdWatch: a query parks its goroutine, never its thread, so a few threads
// serve any number of requests waiting on the database (docs/hooks.md).
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
// Every handler borrows a connection from a pg::Pool (kPoolSize connections, made on
// first use) under the request's context.
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "pg.hpp"

namespace http = goro::http;
using namespace std::chrono_literals;

namespace {

// Connections to the database, shared by all requests.
constexpr int kPoolSize = 16;
// How long /sleep may keep the database busy before the service answers 504.
constexpr auto kQueryDeadline = 1s;

bool is_id(std::string_view s) {
  return !s.empty() && s.size() < 19 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A failed query: 504 when its deadline passed, 503 when the client left (nobody reads
// it), 500 with the database's message otherwise.
void fail(http::ResponseWriter& w, const pg::Result& r) {
  int status = 500;
  if (r.code() == goro::context_errc::deadline_exceeded) status = 504;
  if (r.code() == goro::context_errc::canceled) status = 503;
  w.text(r.error() + "\n", status);
}

http::Handler routes(std::shared_ptr<pg::Pool> db) {
  http::Router r;
  r.handle("POST /notes", [db](http::Request& req, http::ResponseWriter& w) {
    auto body = req.body();
    if (!body) return;  // the server has answered (too large, or the client left)
    pg::Result row =
        db->query("INSERT INTO notes (body) VALUES ($1) RETURNING id", {*body}, req.context());
    if (!row.ok()) return fail(w, row);
    const std::string id(row.get(0, 0));
    w.header().set("Location", "/notes/" + id);
    w.text("note " + id + "\n", 201);
  });
  r.handle("GET /notes", [db](http::Request& req, http::ResponseWriter& w) {
    pg::Result rows = db->query("SELECT id, body FROM notes ORDER BY id", {}, req.context());
    if (!rows.ok()) return fail(w, rows);
    std::string out;
    for (int i = 0; i < rows.rows(); ++i) {
      out.append(rows.get(i, 0)).append("\t").append(rows.get(i, 1)).append("\n");
    }
    w.text(out);
  });
  r.handle("GET /notes/{id}", [db](http::Request& req, http::ResponseWriter& w) {
    const std::string_view id = req.path_value("id");
    if (!is_id(id)) {
      w.text("the note id must be a number\n", 400);
      return;
    }
    pg::Result row =
        db->query("SELECT body FROM notes WHERE id = $1", {std::string(id)}, req.context());
    if (!row.ok()) return fail(w, row);
    if (row.rows() == 0) {
      w.text("no note " + std::string(id) + "\n", 404);
      return;
    }
    w.text(std::string(row.get(0, 0)) + "\n");
  });
  r.handle("DELETE /notes/{id}", [db](http::Request& req, http::ResponseWriter& w) {
    const std::string_view id = req.path_value("id");
    if (!is_id(id)) {
      w.text("the note id must be a number\n", 400);
      return;
    }
    pg::Result gone =
        db->query("DELETE FROM notes WHERE id = $1", {std::string(id)}, req.context());
    if (!gone.ok()) return fail(w, gone);
    if (gone.affected() == "0") {
      w.text("no note " + std::string(id) + "\n", 404);
      return;
    }
    w.set_status(204);
  });
  // Keeps the database busy for ?s= seconds, at most kQueryDeadline.
  r.handle("GET /sleep", [db](http::Request& req, http::ResponseWriter& w) {
    const std::string seconds = req.query("s").value_or("0.1");
    auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
    pg::Result slept = db->query("SELECT pg_sleep($1::float8)", {seconds}, ctx);
    if (!slept.ok()) return fail(w, slept);
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
  const std::string conninfo = app.args().empty() ? "" : app.args()[0];
  return app.run([&]() -> http::Handler {
    auto db = std::make_shared<pg::Pool>(conninfo, kPoolSize);
    // (client_min_messages: no NOTICE on stderr when the table is there already.)
    pg::Result schema = db->query(
        "SET client_min_messages = warning;"
        "CREATE TABLE IF NOT EXISTS notes (id bigserial PRIMARY KEY, body text NOT NULL)");
    if (!schema.ok()) throw std::runtime_error("database: " + schema.error());
    // Ready (/readyz) while the database answers; /healthz stays App's own.
    app.add_readiness_check("postgres", [db](const goro::Context& ctx) -> goro::Error {
      pg::Result ping = db->query("SELECT 1", {}, ctx);
      if (ping.ok()) return {};
      return goro::Error(ping.code(), ping.error());
    });
    return routes(db);
  });
}
