// cors(): preflights answered without the handler, allowed origins echoed or "*",
// others left without any CORS field.
#include <gtest/gtest.h>

#include <atomic>

#include <goro/http/cors.hpp>
#include <goro/http/httptest.hpp>

namespace goro::http::test {
namespace {

using httptest::new_request;
using httptest::record;

std::atomic<int> handler_runs{0};

Handler app(CorsOptions options) {
  return chain(
      [](Request&, ResponseWriter& w) {
        handler_runs.fetch_add(1);
        w.header().set("X-Total", "7");
        w.text("data\n");
      },
      {cors(std::move(options))});
}

CorsOptions site() {
  return {.allowed_origins = {"https://app.example"},
          .allowed_methods = {"GET", "PUT"},
          .allowed_headers = {"X-Token", "Content-Type"},
          .exposed_headers = {"X-Total"},
          .max_age = std::chrono::seconds(600)};
}

TEST(Cors, PreflightAnsweredWithoutTheHandler) {
  handler_runs = 0;
  auto r = record(app(site()), new_request("OPTIONS", "/items/1")
                                   .header("Origin", "https://app.example")
                                   .header("Access-Control-Request-Method", "PUT")
                                   .header("Access-Control-Request-Headers", "x-token, content-type"));
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(handler_runs.load(), 0);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(r.header("Access-Control-Allow-Methods"), "PUT");
  EXPECT_EQ(r.header("Access-Control-Allow-Headers"), "x-token, content-type");
  EXPECT_EQ(r.header("Access-Control-Max-Age"), "600");
  EXPECT_EQ(r.header("Access-Control-Allow-Credentials"), "");
  EXPECT_EQ(r.header_values("Vary"),
            (std::vector<std::string_view>{"Origin", "Access-Control-Request-Method",
                                           "Access-Control-Request-Headers"}));
}

TEST(Cors, PreflightRefusedGetsNoCorsFields) {
  handler_runs = 0;
  struct Case {
    const char *origin, *method, *headers;
  } cases[] = {
      {"https://evil.example", "PUT", ""},
      {"https://app.example", "DELETE", ""},
      {"https://app.example", "put", ""},
      {"https://app.example", "PUT", "X-Token, X-Other"},
  };
  for (const Case& c : cases) {
    auto r = record(app(site()), new_request("OPTIONS", "/")
                                     .header("Origin", c.origin)
                                     .header("Access-Control-Request-Method", c.method)
                                     .header("Access-Control-Request-Headers", c.headers));
    EXPECT_EQ(r.status, 204);
    EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "") << c.origin << " " << c.method;
    EXPECT_EQ(r.header("Access-Control-Allow-Methods"), "");
  }
  EXPECT_EQ(handler_runs.load(), 0);
}

TEST(Cors, ActualRequests) {
  handler_runs = 0;
  auto r = record(app(site()), new_request("GET", "/").header("Origin", "https://app.example"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(r.header("Access-Control-Expose-Headers"), "X-Total");
  EXPECT_EQ(r.header("Vary"), "Origin");
  EXPECT_EQ(r.body, "data\n");

  // Another origin: served (CORS is the browser's to enforce) but without CORS fields.
  r = record(app(site()), new_request("GET", "/").header("Origin", "https://evil.example"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(r.header("Access-Control-Expose-Headers"), "");
  EXPECT_EQ(r.header("Vary"), "Origin");

  // No Origin: same-origin or not a browser.
  r = record(app(site()), new_request("GET", "/"));
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(r.header("Vary"), "Origin");
  // An OPTIONS without Access-Control-Request-Method is no preflight: the handler runs.
  r = record(app(site()), new_request("OPTIONS", "/").header("Origin", "https://app.example"));
  EXPECT_EQ(r.body, "data\n");
  EXPECT_EQ(handler_runs.load(), 4);
}

TEST(Cors, StarAndCredentials) {
  auto r = record(app({.allowed_origins = {"*"}}),
                  new_request("GET", "/").header("Origin", "https://any.example"));
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "*");
  // Never "*" with credentials: the origin is echoed.
  r = record(app({.allowed_origins = {"*"}, .allow_credentials = true}),
             new_request("GET", "/").header("Origin", "https://any.example"));
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://any.example");
  EXPECT_EQ(r.header("Access-Control-Allow-Credentials"), "true");
  // "*" in allowed_headers: whatever the preflight asks is allowed, listed by name.
  r = record(app({.allowed_origins = {"*"}, .allowed_headers = {"*"}}),
             new_request("OPTIONS", "/")
                 .header("Origin", "https://any.example")
                 .header("Access-Control-Request-Method", "POST")
                 .header("Access-Control-Request-Headers", "x-anything"));
  EXPECT_EQ(r.header("Access-Control-Allow-Headers"), "x-anything");
  EXPECT_EQ(r.header("Access-Control-Max-Age"), "");
}

TEST(Cors, OriginPredicate) {
  CorsOptions options{.allow_origin = [](std::string_view origin) {
    return origin.ends_with(".trusted.example");
  }};
  auto r = record(app(options), new_request("GET", "/").header("Origin", "https://a.trusted.example"));
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://a.trusted.example");
  r = record(app(options), new_request("GET", "/").header("Origin", "https://trusted.example.evil"));
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
}

}  // namespace
}  // namespace goro::http::test
