// Cookies: Set-Cookie as Go writes it, the Cookie header as Go reads it, and a round
// trip through curl's cookie jar.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <goro/http/cookie.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/router.hpp>

#include "form_test_util.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using std::chrono::system_clock;

TEST(SetCookie, EveryAttribute) {
  Cookie c;
  c.name = "session";
  c.value = "abc123";
  c.path = "/app";
  c.domain = ".example.com";
  c.expires = std::chrono::sys_seconds(std::chrono::seconds(1'700'000'000));
  c.max_age = 3600;
  c.secure = true;
  c.http_only = true;
  c.same_site = SameSite::strict;
  c.partitioned = true;
  EXPECT_EQ(format_set_cookie(c),
            "session=abc123; Path=/app; Domain=example.com; Expires=Tue, 14 Nov 2023 22:13:20 GMT; "
            "Max-Age=3600; HttpOnly; Secure; SameSite=Strict; Partitioned");
  EXPECT_EQ(validate_cookie(c), "");

  Cookie del{.name = "gone", .max_age = -1};
  EXPECT_EQ(format_set_cookie(del), "gone=; Max-Age=0");
  Cookie lax{.name = "a", .value = "b", .same_site = SameSite::lax};
  EXPECT_EQ(format_set_cookie(lax), "a=b; SameSite=Lax");
  Cookie none{.name = "a", .value = "b", .secure = true, .same_site = SameSite::none};
  EXPECT_EQ(format_set_cookie(none), "a=b; Secure; SameSite=None");
}

TEST(SetCookie, InvalidPartsDroppedAsGoDoes) {
  EXPECT_EQ(format_set_cookie({.name = "bad name", .value = "v"}), "");
  EXPECT_EQ(format_set_cookie({.name = "", .value = "v"}), "");
  EXPECT_EQ(validate_cookie({.name = "a;b"}), "invalid cookie name \"a;b\"");
  // Value: bad bytes dropped; a space or comma makes it quoted.
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "x\"y;z\\w\x01"}), "a=xyzw");
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "hello world"}), "a=\"hello world\"");
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "1,2"}), "a=\"1,2\"");
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "q", .quoted = true}), "a=\"q\"");
  EXPECT_NE(validate_cookie({.name = "a", .value = "x;y"}).find("invalid byte in the value"),
            std::string::npos);
  // Path: ';' dropped.
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "b", .path = "/x;Domain=evil"}),
            "a=b; Path=/xDomain=evil");
  // Domain: invalid ones left out; an IPv4 address is fine.
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "b", .domain = "exa mple.com"}), "a=b");
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "b", .domain = "-bad.com"}), "a=b");
  EXPECT_EQ(format_set_cookie({.name = "a", .value = "b", .domain = "127.0.0.1"}),
            "a=b; Domain=127.0.0.1");
  EXPECT_EQ(validate_cookie({.name = "a", .domain = "bad..com"}),
            "invalid domain \"bad..com\" of cookie \"a\"");
  // Expires before 1601: left out.
  Cookie old{.name = "a", .value = "b"};
  old.expires = std::chrono::sys_seconds(std::chrono::seconds(-11644473601LL));  // 1600-12-31
  EXPECT_EQ(format_set_cookie(old), "a=b");
  EXPECT_EQ(validate_cookie(old), "cookie \"a\" expires before the year 1601");
  EXPECT_EQ(validate_cookie({.name = "a", .partitioned = true}),
            "partitioned cookie \"a\" must be set with Secure");

  httptest::ResponseRecorder w;
  EXPECT_FALSE(set_cookie(w, {.name = "bad name"}));
  EXPECT_TRUE(set_cookie(w, {.name = "a", .value = "1"}));
  EXPECT_TRUE(set_cookie(w, {.name = "b", .value = "2"}));
  EXPECT_EQ(w.header().values("Set-Cookie"), (std::vector<std::string_view>{"a=1", "b=2"}));
}

TEST(CookieHeader, ParsedAsGoReadsIt) {
  std::vector<Cookie> got =
      parse_cookie_header(" a=1;b=\"two\" ; bad name=x; c=; d ;e=x\"y;f=3=4;;g=\"\"");
  std::vector<std::string> seen;
  for (const Cookie& c : got) seen.push_back(c.name + "=" + c.value + (c.quoted ? "(q)" : ""));
  EXPECT_EQ(seen, (std::vector<std::string>{"a=1", "b=two(q)", "c=", "d=", "f=3=4", "g=(q)"}));
}

Handler app() {
  auto r = std::make_shared<Router>();
  r->handle("GET /login", [](Request&, ResponseWriter& w) {
    set_cookie(w, {.name = "session", .value = "s3cr3t", .path = "/", .max_age = 600,
                   .http_only = true, .same_site = SameSite::lax});
    set_cookie(w, {.name = "theme", .value = "dark mode", .path = "/"});
    w.text("ok\n");
  });
  r->handle("GET /logout", [](Request&, ResponseWriter& w) {
    set_cookie(w, {.name = "session", .path = "/", .max_age = -1});
    w.text("bye\n");
  });
  r->handle("GET /whoami", [](Request& req, ResponseWriter& w) {
    std::string out;
    for (const Cookie& c : cookies(req)) out += c.name + "=" + c.value + ";";
    std::optional<Cookie> session = cookie(req, "session");
    out += session ? " session " + session->value : " no session";
    w.text(out);
  });
  return [r](Request& req, ResponseWriter& w) { (*r)(req, w); };
}

// HTTP/2 clients may send one Cookie field per cookie (RFC 9113 8.2.3): all are read.
TEST(CookieHeader, EveryCookieFieldIsRead) {
  httptest::Recorded r = httptest::record(
      app(), httptest::new_request("GET", "/whoami")
                 .header("Cookie", "theme=light; bad name=1")
                 .header("Cookie", "session=\"q1\""));
  EXPECT_EQ(r.body, "theme=light;session=q1; session q1");
}

TEST(CookieCurl, RoundTripThroughTheCookieJar) {
  TestServer server(app());
  std::string jar = "/tmp/goro-cookie-jar-" + std::to_string(getpid());
  std::remove(jar.c_str());
  CurlOutput o = run_curl("-c " + jar + " " + server.url("/login"));
  ASSERT_EQ(o.status, 0) << o.err;
  o = run_curl("-b " + jar + " " + server.url("/whoami"));
  EXPECT_EQ(o.out, "session=s3cr3t;theme=dark mode; session s3cr3t");
  o = run_curl("-b " + jar + " -c " + jar + " " + server.url("/logout"));
  ASSERT_EQ(o.status, 0) << o.err;
  o = run_curl("-b " + jar + " " + server.url("/whoami"));
  EXPECT_EQ(o.out, "theme=dark mode; no session");
  std::remove(jar.c_str());
}

}  // namespace
}  // namespace goro::http::test
