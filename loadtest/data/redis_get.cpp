// goro's side of loadtest/data: GET /cache/{key} answers the value of the Redis key,
// read with goro::redis on a pool of --pool connections (404 when there is no such key,
// 502 when Redis fails). The Go peer (go/redis_get.go) does the same with redigo.
//
//   bench_redis_get --addr 127.0.0.1:8080 --redis unix:/tmp/x/redis.sock --pool 16
#include <goro/goro.hpp>
#include <goro/redis/redis.hpp>

namespace http = goro::http;

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "bench_redis_get"});
  const std::string& redis_address =
      app.flags().add("redis", "127.0.0.1:6379", "the Redis server's `ADDRESS` (or unix:PATH)");
  int& pool = app.flags().add("pool", 16, "Redis connections at most");
  if (std::optional<int> exit = app.parse()) return *exit;
  goro::redis::Client redis({.address = redis_address, .pool_size = pool, .max_idle = pool});

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
  r.handle("GET /healthz", [](http::Request&, http::ResponseWriter& w) { w.text("ok\n"); });
  return app.run(r);
}
