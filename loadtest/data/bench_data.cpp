// goro's side of loadtest/data (run.sh); the Go peer (go/data.go) answers the same:
//   GET /cache/{key}  one Redis GET with goro::redis (--pool connections);
//   GET /note/{id}    one indexed SELECT with goro::pg (--pg-pool connections) and one
//                     Redis GET, answered together (with --pg).
// 404 for a key that is not there, 502 when a server fails.
//
//   bench_data --addr 127.0.0.1:8080 --redis unix:/tmp/x/redis.sock --pg "host=/tmp/y"
#include <charconv>

#include <goro/goro.hpp>
#include <goro/pg/pg.hpp>
#include <goro/redis/redis.hpp>

namespace http = goro::http;

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "bench_data"});
  const std::string& redis_address =
      app.flags().add("redis", "127.0.0.1:6379", "the Redis server's `ADDRESS` (or unix:PATH)");
  int& pool = app.flags().add("pool", 16, "Redis connections at most");
  const std::string& conninfo =
      app.flags().add("pg", "", "PostgreSQL's connection `STRING` (none: no /note)");
  int& pg_pool = app.flags().add("pg-pool", 16, "PostgreSQL connections at most");
  if (std::optional<int> exit = app.parse()) return *exit;
  goro::redis::Client redis({.address = redis_address, .pool_size = pool});
  std::optional<goro::pg::Pool> db;
  if (!conninfo.empty()) db.emplace(goro::pg::Options{.conninfo = conninfo, .max_open = pg_pool});

  http::Router r;
  r.handle("GET /cache/{key}", [&](http::Request& req, http::ResponseWriter& w) {
    auto got = redis.get(req.context(), req.path_value("key"));
    if (!got) {
      w.text(got.error().what() + "\n", 502);
    } else if (!*got) {
      w.text("no such key\n", 404);
    } else {
      w.text(**got);
    }
  });
  r.handle("GET /note/{id}", [&](http::Request& req, http::ResponseWriter& w) {
    const std::string_view text = req.path_value("id");
    long long id = 0;
    if (!db || std::from_chars(text.data(), text.data() + text.size(), id).ec != std::errc()) {
      w.text("no such note\n", 404);
      return;
    }
    auto rows = db->query(req.context(), "SELECT title FROM notes WHERE id = $1", {id});
    if (!rows || rows->size() == 0) {
      w.text(rows ? "no such note\n" : rows.error().what() + "\n", rows ? 404 : 502);
      return;
    }
    auto title = (*rows)[0].get<std::string_view>(0);
    auto views = redis.get(req.context(), "views:" + std::string(text));
    if (!title || !views || !*views) {
      w.text("a server failed\n", 502);
      return;
    }
    w.text(std::string(*title) + ": " + **views + " views\n");
  });
  r.handle("GET /healthz", [](http::Request&, http::ResponseWriter& w) { w.text("ok\n"); });
  return app.run(r);
}
