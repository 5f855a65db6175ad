// goro-json-api: a tiny in-memory notes API with path parameters.
//
//   $ ./goro-json-api --addr 127.0.0.1:8080
//   $ curl -X PUT -d 'buy milk' localhost:8080/notes/1
//   $ curl localhost:8080/notes/1        -> {"id":"1","text":"buy milk"}
//   $ curl localhost:8080/notes          -> [{"id":"1","text":"buy milk"}]
//   $ curl -X DELETE localhost:8080/notes/1
//
// Handlers run on many goroutines at once, so the map is guarded by a goro::Mutex
// (a std::mutex would block the whole thread if it were ever held across a park).
#include <goro/app.hpp>
#include <goro/goro.hpp>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace http = goro::http;

namespace {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string note_json(const std::string& id, const std::string& text) {
  return "{\"id\":" + quote(id) + ",\"text\":" + quote(text) + "}";
}

}  // namespace

int main(int argc, char** argv) {
  goro::Mutex mu;
  std::map<std::string, std::string> notes;  // guarded by mu

  http::Router r;
  r.handle("GET /notes", [&](http::Request&, http::ResponseWriter& w) {
    std::lock_guard lock(mu);
    std::string out = "[";
    for (const auto& [id, text] : notes) out += (out.size() > 1 ? "," : "") + note_json(id, text);
    w.json(out + "]");
  });
  r.handle("GET /notes/{id}", [&](http::Request& req, http::ResponseWriter& w) {
    std::string id(req.path_value("id"));
    std::lock_guard lock(mu);
    auto it = notes.find(id);
    if (it == notes.end()) return (void)w.json(R"({"error":"no such note"})", 404);
    w.json(note_json(id, it->second));
  });
  r.handle("PUT /notes/{id}", [&](http::Request& req, http::ResponseWriter& w) {
    goro::Result<std::string> body = req.body();
    if (!body) return;
    std::string id(req.path_value("id"));
    std::lock_guard lock(mu);
    bool created = notes.insert_or_assign(id, *body).second;
    w.json(note_json(id, *body), created ? 201 : 200);
  });
  r.handle("DELETE /notes/{id}", [&](http::Request& req, http::ResponseWriter& w) {
    std::lock_guard lock(mu);
    bool erased = notes.erase(std::string(req.path_value("id"))) > 0;
    w.set_status(erased ? 204 : 404);
  });
  goro::App app(argc, argv, {.name = "goro-json-api"});
  return app.run(http::chain(r, {http::recover(), http::access_log()}));
}
