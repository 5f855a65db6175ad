// ServerOptions::shape_reply: one hook shapes every reply goro writes by itself, the
// server's own and those of the router, middleware and built-in handlers, through the
// real server code (httptest::record).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <goro/http/error_reply.hpp>
#include <goro/http/file_server.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/http/websocket.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::http {
namespace {

using httptest::new_request;
using httptest::record;
using httptest::Recorded;

// A problem document of the reply's status, origin, message and request id.
ServerOptions problem_json_options() {
  ServerOptions options;
  options.request_ids = true;
  options.shape_reply = [](FrameworkReply& r) {
    r.content_type = "application/problem+json";
    r.body = "{\"status\":" + std::to_string(r.status) + ",\"origin\":\"" + std::string(r.origin) +
             "\",\"detail\":\"" + std::string(r.message) + "\",\"id\":\"" +
             std::string(r.request_id) + "\"}";
  };
  return options;
}

Handler app() {
  Router r;
  r.handle("GET /a", [](Request&, ResponseWriter& w) { w.text("a"); });
  r.handle("GET /throw", [](Request&, ResponseWriter&) -> void { throw std::runtime_error("x"); });
  r.handle("GET /recover", [](Request&, ResponseWriter&) -> void {
    throw std::runtime_error("caught by recover()");
  });
  r.handle("GET /slow", [](Request& req, ResponseWriter& w) {
    (void)goro::sleep(std::chrono::seconds(5), req.context());
    w.text("late");
  });
  r.handle("GET /files/{path...}", file_server("/"));
  r.handle("GET /ws", [](Request& req, ResponseWriter& w) { (void)websocket::accept(req, w); });
  r.handle("GET /teapot", [](Request& req, ResponseWriter& w) {
    (void)send_error(req, w, 418, "no coffee here");
  });
  Handler recovered = chain(r, {recover([](std::string_view) {})});
  // Only /recover goes through recover(); only /slow through timeout().
  Handler timed = chain(r, {timeout(std::chrono::milliseconds(50))});
  return [r, recovered, timed](Request& req, ResponseWriter& w) {
    if (req.path() == "/recover") return recovered(req, w);
    if (req.path() == "/slow") return timed(req, w);
    r(req, w);
  };
}

void expect_problem(const Recorded& r, int status, std::string_view origin,
                    std::string_view detail_part = "") {
  EXPECT_EQ(r.status, status) << r.raw;
  EXPECT_EQ(r.header("content-type"), "application/problem+json") << r.raw;
  EXPECT_NE(r.body.find("\"status\":" + std::to_string(status)), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"origin\":\"" + std::string(origin) + "\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(detail_part), std::string::npos) << r.body;
  // The id the client got is the one the hook saw.
  const std::string id(r.header("x-request-id"));
  EXPECT_FALSE(id.empty()) << r.raw;
  EXPECT_NE(r.body.find("\"id\":\"" + id + "\""), std::string::npos) << r.body;
  EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size())) << r.raw;
}

TEST(ShapeReply, EveryReplyGoroWritesHasTheOneShape) {
  const ServerOptions options = problem_json_options();
  const Handler h = app();
  expect_problem(record(h, new_request("GET", "/nope"), options), 404, "router", "page not found");
  Recorded not_allowed = record(h, new_request("DELETE", "/a"), options);
  expect_problem(not_allowed, 405, "router", "method not allowed");
  EXPECT_EQ(not_allowed.header("allow"), "GET, HEAD");
  expect_problem(record(h, new_request("GET", "/throw"), options), 500, "server",
                 "the handler threw");
  expect_problem(record(h, new_request("GET", "/recover"), options), 500, "recover");
  expect_problem(record(h, new_request("GET", "/slow"), options), 503, "timeout");
  expect_problem(record(h, new_request("GET", "/files/goro-no-such-file.txt"), options), 404,
                 "file_server");
  expect_problem(record(h, new_request("GET", "/ws"), options), 426, "websocket");
  expect_problem(record(h, new_request("GET", "/teapot"), options), 418, "handler",
                 "no coffee here");
  // The server's own replies, which no handler sees: a body past the limit, a
  // malformed request.
  ServerOptions small = options;
  small.max_body_bytes = 4;
  Recorded too_large =
      record(h, new_request("POST", "/a", "0123456789").header("X-Request-Id", "client-7"), small);
  expect_problem(too_large, 413, "server");
  EXPECT_EQ(too_large.header("x-request-id"), "client-7");
  EXPECT_EQ(too_large.header("connection"), "close");
  expect_problem(record(h, new_request("G(T", "/a"), options), 400, "server");
}

TEST(ShapeReply, WithoutAHookGorosTextRepliesStay) {
  const Handler h = app();
  Recorded r = record(h, new_request("GET", "/nope"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.body, "404 page not found\n");
  r = record(h, new_request("GET", "/teapot"));
  EXPECT_EQ(r.status, 418);
  EXPECT_EQ(r.body, "418 I'm a teapot: no coffee here\n");
}

TEST(ShapeReply, MayChangeTheStatusAndAddFieldsButNotTheFraming) {
  ServerOptions options;
  options.shape_reply = [](FrameworkReply& r) {
    if (r.status == 405) r.status = 404;  // hide which methods exist
    if (r.status == 413) r.status = 200;  // not an error status: ignored
    r.headers.set("X-Problem", std::string(r.origin));
    r.headers.set("Content-Length", "1");
    r.headers.set("Connection", "keep-alive");
    r.body = "shaped\n";
  };
  options.max_body_bytes = 4;
  const Handler h = app();
  Recorded hidden = record(h, new_request("DELETE", "/a"), options);
  EXPECT_EQ(hidden.status, 404);
  EXPECT_EQ(hidden.body, "shaped\n");
  EXPECT_EQ(hidden.header("x-problem"), "router");
  EXPECT_EQ(hidden.header("content-length"), "7");
  Recorded own = record(h, new_request("POST", "/a", "0123456789"), options);
  EXPECT_EQ(own.status, 413);
  EXPECT_EQ(own.body, "shaped\n");
  EXPECT_EQ(own.header("x-problem"), "server");
  EXPECT_EQ(own.header("content-length"), "7");
  EXPECT_EQ(own.header("connection"), "close");
  EXPECT_TRUE(own.complete);
}

TEST(ShapeReply, AHookThatThrowsLeavesGorosReplyAndIsReported) {
  std::vector<std::string> errors;
  ServerOptions options;
  options.error_log = [&](std::string_view m) { errors.emplace_back(m); };
  options.shape_reply = [](FrameworkReply&) { throw std::runtime_error("shaper broke"); };
  Recorded r = record(app(), new_request("GET", "/nope"), options);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "404 page not found\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("shaper broke"), std::string::npos);
}

TEST(ShapeReply, AContentTypeThatWouldSplitTheHeadIsNotSent) {
  ServerOptions options;
  options.shape_reply = [](FrameworkReply& r) { r.content_type = "text/html\r\nInjected: yes"; };
  Recorded r = record(app(), new_request("GET", "/nope"), options);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
  EXPECT_TRUE(r.header("injected").empty());
}

TEST(RouterMethodNotAllowed, CanBeReplacedWhole) {
  Router r;
  r.handle("GET /a", [](Request&, ResponseWriter& w) { w.text("a"); });
  r.method_not_allowed([](Request& req, ResponseWriter& w) {
    w.json("{\"allowed\":\"" + std::string(w.header().get("allow")) + "\",\"method\":\"" +
               std::string(req.method()) + "\"}",
           405);
  });
  Recorded got = record(r, new_request("PUT", "/a"));
  EXPECT_EQ(got.status, 405);
  EXPECT_EQ(got.header("allow"), "GET, HEAD");
  EXPECT_EQ(got.body, R"({"allowed":"GET, HEAD","method":"PUT"})");
}

}  // namespace
}  // namespace goro::http
