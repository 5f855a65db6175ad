// goro-notes: a JSON notes API on PostgreSQL (goro::pg) with a Redis read-through cache
// (goro::redis), as a Go team would write it with pgx and go-redis (docs/data.md).
//
//   $ ./goro-notes --pg 'host=/run/postgresql dbname=app' --redis 127.0.0.1:6379
//   $ curl --json '{"title":"milk","body":"buy milk"}' localhost:8080/notes
//       201, Location: /notes/1   {"body":"buy milk","created_at":"2026-...Z","id":1,...}
//   $ curl -i localhost:8080/notes/1       X-Cache: miss (from PostgreSQL, now cached)
//   $ curl -i localhost:8080/notes/1       X-Cache: hit (from Redis)
//   $ curl -X PUT --json '{"title":"milk","body":"oat milk"}' localhost:8080/notes/1
//   $ curl 'localhost:8080/notes?after=0&limit=20'           [{...}, ...], by id
//   $ curl -X DELETE localhost:8080/notes/1                  204
//   $ curl localhost:8080/status                             ok (or 503: which is down)
//   $ curl localhost:8080/readyz       ok while PostgreSQL answers (App's readiness probe;
//                                      a Redis that is down costs the cache, not traffic)
//   $ curl localhost:8080/metrics          pg_pool_* and redis_pool_*, http_requests_*
//
// Reads go to Redis first and to PostgreSQL on a miss, caching what they found for
// --cache-ttl; a write changes the row, then drops the cached copy. A cache that is down
// costs the cache, not the answer: reads go to PostgreSQL (X-Cache: off). Every query
// runs under the request's context with a kQueryDeadline: a client that leaves, or a
// slow database, cancels the statement on the server.
#include <goro/app.hpp>
#include <goro/goro.hpp>
#include <goro/http/json.hpp>
#include <goro/pg/pg.hpp>
#include <goro/redis/redis.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace http = goro::http;
namespace metrics = goro::http::metrics;
namespace pg = goro::pg;
using namespace std::chrono_literals;

namespace {

constexpr auto kQueryDeadline = 2s;  // per request, for PostgreSQL and Redis together
constexpr int kMaxPage = 100;        // notes per GET /notes, at most

struct Note {
  long long id = 0;
  std::string title, body, created_at, updated_at;
};
void to_json(nlohmann::json& j, const Note& n) {
  j = {{"id", n.id}, {"title", n.title}, {"body", n.body},
       {"created_at", n.created_at}, {"updated_at", n.updated_at}};
}
// What a client sends: a title (1 to 200 characters) and a body.
struct NoteInput {
  std::string title, body;
};
void from_json(const nlohmann::json& j, NoteInput& n) {
  j.at("title").get_to(n.title);
  j.at("body").get_to(n.body);
}

// The columns of a Note, the times as RFC 3339 (the session's time zone is UTC).
constexpr const char* kColumns =
    "id, title, body, to_char(created_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
    "to_char(updated_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

Note note_of(const pg::Row& r) {
  return {*r.get<long long>(0), *r.get<std::string>(1), *r.get<std::string>(2),
          *r.get<std::string>(3), *r.get<std::string>(4)};
}

// A positive integer from text, or nothing.
std::optional<long long> number(std::string_view s) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

class Notes {
 public:
  Notes(pg::Pool& db, goro::redis::Client& cache, std::chrono::seconds ttl)
      : db_(db), cache_(cache), ttl_(ttl) {}

  void routes(http::Router& r) {
    r.handle("POST /notes", [this](http::Request& req, http::ResponseWriter& w) {
      NoteInput in;
      if (!read_input(req, w, in)) return;
      auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
      auto rows = db_.query(ctx,
                            std::string("INSERT INTO notes (title, body) VALUES ($1, $2) "
                                        "RETURNING ") + kColumns,
                            {in.title, in.body});
      if (!rows) return fail(w, rows.error());
      const Note n = note_of((*rows)[0]);
      w.header().set("Location", "/notes/" + std::to_string(n.id));
      http::write_json(w, n, 201);
    });
    r.handle("GET /notes", [this](http::Request& req, http::ResponseWriter& w) {
      const auto after = number(req.query("after").value_or("0"));
      const auto limit = number(req.query("limit").value_or("20"));
      if (!after || !limit || *limit < 1 || *limit > kMaxPage)
        return bad(w, "after must be a note id and limit 1 to " + std::to_string(kMaxPage));
      auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
      auto rows = db_.query(ctx,
                            std::string("SELECT ") + kColumns +
                                " FROM notes WHERE id > $1 ORDER BY id LIMIT $2",
                            {*after, *limit});
      if (!rows) return fail(w, rows.error());
      nlohmann::json page = nlohmann::json::array();
      for (int i = 0; i < rows->size(); ++i) page.push_back(note_of((*rows)[i]));
      http::write_json(w, page);
    });
    r.handle("GET /notes/{id}", [this](http::Request& req, http::ResponseWriter& w) {
      const auto id = number(req.path_value("id"));
      if (!id) return bad(w, "the note id must be a number");
      auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
      const std::string key = "note:" + std::to_string(*id);
      auto cached = cache_.get(ctx, key);
      if (cached && *cached) {
        w.header().set("X-Cache", "hit");
        return (void)w.json(**cached);
      }
      auto rows = db_.query(ctx, std::string("SELECT ") + kColumns + " FROM notes WHERE id = $1",
                            {*id});
      if (!rows) return fail(w, rows.error());
      if (rows->size() == 0) return missing(w, *id);
      const std::string json = nlohmann::json(note_of((*rows)[0])).dump();
      // A cache that failed once in this request is not asked again.
      if (cached) (void)cache_.set(ctx, key, json, ttl_);
      w.header().set("X-Cache", cached ? "miss" : "off");
      w.json(json);
    });
    r.handle("PUT /notes/{id}", [this](http::Request& req, http::ResponseWriter& w) {
      const auto id = number(req.path_value("id"));
      if (!id) return bad(w, "the note id must be a number");
      NoteInput in;
      if (!read_input(req, w, in)) return;
      auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
      auto rows = db_.query(ctx,
                            std::string("UPDATE notes SET title = $2, body = $3, updated_at = "
                                        "now() WHERE id = $1 RETURNING ") + kColumns,
                            {*id, in.title, in.body});
      if (!rows) return fail(w, rows.error());
      if (rows->size() == 0) return missing(w, *id);
      forget(ctx, *id);
      http::write_json(w, note_of((*rows)[0]));
    });
    r.handle("DELETE /notes/{id}", [this](http::Request& req, http::ResponseWriter& w) {
      const auto id = number(req.path_value("id"));
      if (!id) return bad(w, "the note id must be a number");
      auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
      auto gone = db_.exec(ctx, "DELETE FROM notes WHERE id = $1", {*id});
      if (!gone) return fail(w, gone.error());
      if (*gone == 0) return missing(w, *id);
      forget(ctx, *id);
      w.set_status(204);
    });
    r.handle("GET /status", [this](http::Request& req, http::ResponseWriter& w) {
      auto [ctx, cancel] = goro::with_timeout(req.context(), kQueryDeadline);
      auto db = db_.exec(ctx, "SELECT 1");
      auto cache = cache_.command(ctx, {"PING"});
      if (db && cache) return (void)w.text("ok\n");
      w.text(std::string(db ? "" : "postgres: " + db.error().what() + "\n") +
                 (cache ? "" : "redis: " + cache.error().what() + "\n"),
             503);
    });
    r.handle("GET /metrics", metrics::handler());
  }

 private:
  static bool read_input(http::Request& req, http::ResponseWriter& w, NoteInput& in) {
    if (!http::decode_or_400(req, w, in)) return false;
    if (in.title.empty() || in.title.size() > 200) {
      bad(w, "title must be 1 to 200 characters");
      return false;
    }
    return true;
  }
  // Drops a note's cached copy after a write. If Redis cannot be told, the copy lives
  // until its TTL: the log says so.
  void forget(const goro::Context& ctx, long long id) {
    auto dropped = cache_.del(ctx, {"note:" + std::to_string(id)});
    if (!dropped) std::fprintf(stderr, "goro-notes: note %lld stays cached: %s\n", id,
                               dropped.error().what().c_str());
  }
  static void bad(http::ResponseWriter& w, const std::string& why) {
    http::write_json_error(w, 400, why);
  }
  static void missing(http::ResponseWriter& w, long long id) {
    http::write_json_error(w, 404, "no note " + std::to_string(id));
  }
  // 504 when the deadline passed, 503 when PostgreSQL is away, 500 otherwise.
  static void fail(http::ResponseWriter& w, const goro::Error& e) {
    int status = 500;
    if (e == goro::context_errc::deadline_exceeded) status = 504;
    if (e == std::errc::connection_refused || e == std::errc::connection_reset) status = 503;
    http::write_json_error(w, status, e.what());
  }

  pg::Pool& db_;
  goro::redis::Client& cache_;
  std::chrono::seconds ttl_;
};

}  // namespace

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "goro-notes"});
  const std::string& conninfo =
      app.flags().add("pg", "", "PostgreSQL's connection `STRING` (empty: libpq's PG* variables)");
  const std::string& redis_address =
      app.flags().add("redis", "127.0.0.1:6379", "the Redis server's `ADDRESS` (or unix:PATH)");
  int& pool = app.flags().add("pool", 16, "connections to each server, at most");
  int& ttl = app.flags().add("cache-ttl", 300, "how long a note stays cached, in `SECONDS`");
  if (std::optional<int> exit = app.parse()) return *exit;

  pg::Pool db({.conninfo = conninfo, .max_open = pool});
  goro::redis::Client cache({.address = redis_address, .pool_size = pool});
  Notes notes(db, cache, std::chrono::seconds(ttl));
  const metrics::PoolExport db_metrics =
      metrics::export_pool(metrics::default_registry(), "pg", "notes", db);
  const metrics::PoolExport cache_metrics =
      metrics::export_pool(metrics::default_registry(), "redis", "notes", cache);
  return app.run([&]() -> http::Handler {
    auto schema = db.exec(goro::Context(),
                          "CREATE TABLE IF NOT EXISTS notes (id bigserial PRIMARY KEY, "
                          "title text NOT NULL, body text NOT NULL, "
                          "created_at timestamptz NOT NULL DEFAULT now(), "
                          "updated_at timestamptz NOT NULL DEFAULT now())");
    if (!schema) throw std::runtime_error("database: " + schema.error().what());
    app.add_readiness_check("postgres", [&db](const goro::Context& ctx) -> goro::Error {
      auto ping = db.exec(ctx, "SELECT 1");
      return ping ? goro::Error() : ping.error();
    });
    http::Router r;
    notes.routes(r);
    return http::chain(r, {metrics::instrument(), http::recover()});
  });
}
