// goro-json-users: an in-memory users API whose bodies are JSON, read and written with
// goro::json (nlohmann/json): structs in, structs out, and the Go-style 400/415/413
// replies for bad bodies without a line of parsing in the handlers.
//
//   $ ./goro-json-users --addr 127.0.0.1:8080
//   $ curl --json '{"name":"Ann","email":"ann@example.com"}' localhost:8080/users
//       201, Location: /users/1       {"email":"ann@example.com","id":1,"name":"Ann"}
//   $ curl localhost:8080/users/1       {"email":"ann@example.com","id":1,"name":"Ann"}
//   $ curl -X PUT --json '{"name":"Ann B","email":"ann@example.com"}' localhost:8080/users/1
//   $ curl localhost:8080/users         [{"email":"ann@example.com","id":1,"name":"Ann B"}]
//   $ curl -X DELETE localhost:8080/users/1                                     (204)
//   $ curl --json '{"name":' localhost:8080/users
//       400  {"error":"malformed JSON at byte 9: syntax error while parsing value - ..."}
//   $ curl -d '{}' localhost:8080/users      (curl -d says x-www-form-urlencoded)
//       415  {"error":"Content-Type application/x-www-form-urlencoded is not JSON ..."}
//
// curl's --json sends Content-Type: application/json; a body without a Content-Type is
// read as JSON too, one with another type is refused.
// Keys come out in alphabetical order: nlohmann::json keeps an object's members sorted.
// Handlers run on many goroutines at once, so the map is guarded by a goro::Mutex.
#include <goro/app.hpp>
#include <goro/goro.hpp>
#include <goro/http/json.hpp>

#include <charconv>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace http = goro::http;

namespace {

struct User {
  std::int64_t id = 0;
  std::string name;
  std::string email;
};

// nlohmann's convention: to_json / from_json beside the type, found by argument-dependent
// lookup. A body names name and email; the id is the server's (from the path or assigned).
// Member by member, as the NLOHMANN_DEFINE_TYPE_* macros write it: an initializer list
// (j = {{"id", u.id}, ...}) builds temporary values and takes twice as long.
void to_json(nlohmann::json& j, const User& u) {
  j["id"] = u.id;
  j["name"] = u.name;
  j["email"] = u.email;
}
void from_json(const nlohmann::json& j, User& u) {
  j.at("name").get_to(u.name);
  j.at("email").get_to(u.email);
}

// The {id} of the path: a positive decimal integer.
std::optional<std::int64_t> user_id(http::Request& req) {
  std::string_view text = req.path_value("id");
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc{} || end != text.data() + text.size() || id <= 0) return std::nullopt;
  return id;
}

// Reads a User from the body, answering a bad one (decode_or_400) or an incomplete one.
bool read_user(http::Request& req, http::ResponseWriter& w, User& u) {
  if (!http::decode_or_400(req, w, u)) return false;
  if (u.name.empty() || u.email.empty()) {
    http::write_json_error(w, 400, "name and email must not be empty");
    return false;
  }
  return true;
}

class Users {
 public:
  void routes(http::Router& r) {
    r.handle("GET /users", [this](http::Request&, http::ResponseWriter& w) {
      std::vector<User> all;
      {
        std::lock_guard lock(mu_);
        for (const auto& [id, u] : users_) all.push_back(u);
      }
      http::write_json(w, all);
    });
    r.handle("POST /users", [this](http::Request& req, http::ResponseWriter& w) {
      User u;
      if (!read_user(req, w, u)) return;
      {
        std::lock_guard lock(mu_);
        u.id = next_id_++;
        users_[u.id] = u;
      }
      w.header().set("Location", "/users/" + std::to_string(u.id));
      http::write_json(w, u, 201);
    });
    r.handle("GET /users/{id}", [this](http::Request& req, http::ResponseWriter& w) {
      std::optional<std::int64_t> id = user_id(req);
      if (!id) return bad_id(w);
      std::optional<User> u = find(*id);
      if (!u) return no_user(w, *id);
      http::write_json(w, *u);
    });
    r.handle("PUT /users/{id}", [this](http::Request& req, http::ResponseWriter& w) {
      std::optional<std::int64_t> id = user_id(req);
      if (!id) return bad_id(w);
      User u;
      if (!read_user(req, w, u)) return;
      u.id = *id;
      bool created;
      {
        std::lock_guard lock(mu_);
        created = users_.insert_or_assign(u.id, u).second;
        if (u.id >= next_id_) next_id_ = u.id + 1;
      }
      http::write_json(w, u, created ? 201 : 200);
    });
    r.handle("DELETE /users/{id}", [this](http::Request& req, http::ResponseWriter& w) {
      std::optional<std::int64_t> id = user_id(req);
      if (!id) return bad_id(w);
      bool erased;
      {
        std::lock_guard lock(mu_);
        erased = users_.erase(*id) > 0;
      }
      if (!erased) return no_user(w, *id);
      w.set_status(204);
    });
  }

 private:
  std::optional<User> find(std::int64_t id) {
    std::lock_guard lock(mu_);
    auto it = users_.find(id);
    if (it == users_.end()) return std::nullopt;
    return it->second;
  }
  static void bad_id(http::ResponseWriter& w) {
    http::write_json_error(w, 400, "the user id must be a positive integer");
  }
  static void no_user(http::ResponseWriter& w, std::int64_t id) {
    http::write_json_error(w, 404, "no user " + std::to_string(id));
  }

  goro::Mutex mu_;
  std::map<std::int64_t, User> users_;  // guarded by mu_
  std::int64_t next_id_ = 1;            // guarded by mu_
};

}  // namespace

int main(int argc, char** argv) {
  Users users;
  http::Router r;
  users.routes(r);
  goro::App app(argc, argv, {.name = "goro-json-users"});
  return app.run(http::chain(r, {http::recover()}));
}
