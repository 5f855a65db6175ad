// forms_peer: the servers forms_browser_test.py drives Chromium against. Two origins on
// two ports of 127.0.0.1: the page's ("page"), which serves a blank page and takes a
// multipart upload, and an API on the other ("api"). Its /item routes are behind a
// cors() that allows only the page's origin, PUT and the X-Token header, without
// credentials; its /creds/ routes behind one that allows credentials (a session cookie
// set by /creds/login and read back). Prints "page URL" and "api URL", then serves until
// killed.
#include <atomic>
#include <cstdio>
#include <string>

#include <goro/http/cookie.hpp>
#include <goro/http/cors.hpp>
#include <goro/http/form.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/runtime.hpp>

namespace http = goro::http;

namespace {

std::atomic<int> preflights{0};
std::atomic<int> api_runs{0};

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

http::Router page_routes() {
  http::Router r;
  r.handle("GET /{$}", [](http::Request&, http::ResponseWriter& w) {
    w.header().set("Content-Type", "text/html; charset=utf-8");
    w.write("<!doctype html><title>forms</title><p>forms peer</p>\n");
  });
  r.handle("POST /upload", [](http::Request& req, http::ResponseWriter& w) {
    http::MultipartForm form;
    if (!http::parse_multipart_form_or_400(req, w, form)) return;
    std::string out = "title=" + std::string(form.values.get("title"));
    for (const http::FormFile& f : form.files) {
      out += ";" + f.field + "=" + f.filename + "," + f.content_type + "," +
             std::to_string(f.size) + "," + hex(fnv1a(f.content));
    }
    w.text(out);
  });
  return r;
}

// The session cookie's value as the request sent it, "none" without one.
std::string session_of(const http::Request& req) {
  std::optional<http::Cookie> sid = http::cookie(req, "sid");
  return sid ? sid->value : "none";
}

// The credentialed API: a login that sets an HttpOnly session cookie, and routes that
// answer with the cookie the browser sent.
http::Handler credentialed(const std::string& page_origin) {
  http::Router r;
  r.handle("POST /creds/login", [](http::Request&, http::ResponseWriter& w) {
    http::set_cookie(w, {.name = "sid", .value = "s3cr3t", .path = "/creds", .http_only = true,
                         .same_site = http::SameSite::lax});
    w.text("logged in");
  });
  r.handle("GET /creds/whoami", [](http::Request& req, http::ResponseWriter& w) {
    w.text("sid=" + session_of(req));
  });
  r.handle("PUT /creds/item", [](http::Request& req, http::ResponseWriter& w) {
    api_runs.fetch_add(1);
    w.text("put " + session_of(req) + " " + std::string(req.header("x-token")));
  });
  return http::chain(r, {http::cors({.allowed_origins = {page_origin},
                                     .allowed_methods = {"GET", "POST", "PUT"},
                                     .allowed_headers = {"X-Token"},
                                     .allow_credentials = true})});
}

http::Handler api(const std::string& page_origin) {
  http::Router r;
  r.handle("PUT /item", [](http::Request& req, http::ResponseWriter& w) {
    api_runs.fetch_add(1);
    auto body = req.body();
    w.header().set("X-Item-Version", "3");
    w.text("put " + std::string(req.header("x-token")) + " " + (body ? *body : "?"));
  });
  r.handle("GET /item", [](http::Request& req, http::ResponseWriter& w) {
    w.text("item sid=" + session_of(req));
  });
  r.handle("GET /stats", [](http::Request&, http::ResponseWriter& w) {
    w.text("preflights=" + std::to_string(preflights.load()) +
           " runs=" + std::to_string(api_runs.load()));
  });
  auto count_preflights = [](http::Handler next) -> http::Handler {
    return [next = std::move(next)](http::Request& req, http::ResponseWriter& w) {
      if (req.method() == "OPTIONS") preflights.fetch_add(1);
      next(req, w);
    };
  };
  http::Handler plain = http::chain(r, {http::cors({.allowed_origins = {page_origin},
                                                    .allowed_methods = {"GET", "PUT"},
                                                    .allowed_headers = {"X-Token"},
                                                    .exposed_headers = {"X-Item-Version"}})});
  http::Handler creds = credentialed(page_origin);
  return http::chain(
      [plain, creds](http::Request& req, http::ResponseWriter& w) {
        (req.path().starts_with("/creds/") ? creds : plain)(req, w);
      },
      {count_preflights});
}

}  // namespace

int main() {
  return goro::run([]() -> int {
    auto page_listener = goro::net::listen("tcp", "127.0.0.1:0");
    auto api_listener = goro::net::listen("tcp", "127.0.0.1:0");
    if (!page_listener || !api_listener) {
      std::fprintf(stderr, "forms_peer: listen failed\n");
      return 1;
    }
    std::string page = "http://127.0.0.1:" + std::to_string(page_listener->addr().port());
    std::string api_url = "http://127.0.0.1:" + std::to_string(api_listener->addr().port());
    std::printf("page %s\napi %s\n", page.c_str(), api_url.c_str());
    std::fflush(stdout);
    http::Server api_server(api(page));
    goro::go([&] { api_server.serve(*api_listener); });
    http::Server page_server(page_routes());
    page_server.serve(*page_listener);
    return 0;
  });
}
