// Structured access logs (logfmt, JSON), request ids, and the hook through which the
// server's own error replies (400, 413, ...) reach logging, all through the real server
// code (httptest::record).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <goro/http/httptest.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/server.hpp>

namespace goro::http {
namespace {

using httptest::new_request;
using httptest::record;

struct Lines {
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};

Handler hello() {
  return [](Request& req, ResponseWriter& w) {
    w.text("id=" + std::string(request_id_of(req)));
  };
}

TEST(AccessLog, LogfmtCarriesEveryField) {
  Lines log;
  Handler h = chain(hello(), {access_log({AccessLogFormat::logfmt, log.sink()}), request_id()});
  auto r = record(h, new_request("GET", "/users/7?x=1").header("X-Request-Id", "req-42"));
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(log.lines.size(), 1u);
  const std::string& l = log.lines[0];
  EXPECT_EQ(l.rfind("time=20", 0), 0u) << l;
  for (const char* field : {" method=GET ", " path=\"/users/7?x=1\" ", " status=200 ",
                            " bytes=9 ", " duration_ms=", " remote=192.0.2.1:1234 ",
                            " request_id=req-42"})
    EXPECT_NE(l.find(field), std::string::npos) << field << " in " << l;
  EXPECT_EQ(r.body, "id=req-42");
}

TEST(AccessLog, JsonIsOneObjectWithEscapedStrings) {
  Lines log;
  Handler h = chain([](Request&, ResponseWriter& w) { w.set_status(204); },
                    {access_log({AccessLogFormat::json, log.sink()})});
  auto r = record(h, new_request("DELETE", "/a%22b/\"q\""));
  ASSERT_EQ(r.status, 204);
  ASSERT_EQ(log.lines.size(), 1u);
  const std::string& l = log.lines[0];
  EXPECT_EQ(l.front(), '{');
  EXPECT_EQ(l.back(), '}');
  EXPECT_NE(l.find(R"("method":"DELETE")"), std::string::npos) << l;
  EXPECT_NE(l.find(R"("path":"/a%22b/\"q\"")"), std::string::npos) << l;
  EXPECT_NE(l.find(R"("status":204,"bytes":0,"duration_ms":)"), std::string::npos) << l;
  EXPECT_NE(l.find(R"("request_id":null)"), std::string::npos) << l;
}

TEST(RequestId, KeepsAGoodIdAndReplacesABadOne) {
  Handler h = chain(hello(), {request_id()});
  auto kept = record(h, new_request("GET", "/").header("X-Request-Id", "abc.DEF_1-2"));
  EXPECT_EQ(kept.header("x-request-id"), "abc.DEF_1-2");
  EXPECT_EQ(kept.body, "id=abc.DEF_1-2");
  for (std::string bad : {std::string("has space"), std::string(129, 'a'), std::string("x\"y")}) {
    auto r = record(h, new_request("GET", "/").header("X-Request-Id", bad));
    std::string id(r.header("x-request-id"));
    EXPECT_EQ(id.size(), 16u) << bad;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_EQ(r.body, "id=" + id);
  }
  auto a = record(h, new_request("GET", "/"));
  auto b = record(h, new_request("GET", "/"));
  EXPECT_NE(a.header("x-request-id"), b.header("x-request-id"));
}

TEST(ErrorReplyHook, SeesABodyTooLargeWithItsRequestAndAddsHeaders) {
  Lines log;
  std::vector<ErrorReply> seen;
  ServerOptions options;
  options.max_body_bytes = 10;
  ErrorReplyHook logger = log_error_replies({AccessLogFormat::logfmt, log.sink()});
  options.on_error_reply = [&](ErrorReply& reply) {
    seen.push_back({reply.status, {}, {}, {}, {}, {}, {}});
    seen.back().method = reply.method.empty() ? "" : "known";
    reply.headers.set("X-Request-Id", "err-7");
    reply.headers.set("X-Bad", "a\r\nInjected: yes");  // not sent: it would split the reply
    logger(reply);
  };
  bool handler_ran = false;
  Handler h = [&](Request&, ResponseWriter& w) {
    handler_ran = true;
    w.text("no");
  };
  auto r = record(h, new_request("POST", "/upload", std::string(100, 'x')), options);
  EXPECT_EQ(r.status, 413);
  EXPECT_FALSE(handler_ran);
  EXPECT_EQ(r.header("x-request-id"), "err-7");
  EXPECT_TRUE(r.header("injected").empty());
  EXPECT_TRUE(r.header("x-bad").empty());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].status, 413);
  EXPECT_EQ(seen[0].method, "known");
  ASSERT_EQ(log.lines.size(), 1u);
  const std::string& l = log.lines[0];
  for (const char* field : {" method=POST ", " path=/upload ", " status=413 ", " request_id=err-7"})
    EXPECT_NE(l.find(field), std::string::npos) << field << " in " << l;
  EXPECT_EQ(l.find("duration_ms"), std::string::npos) << l;
}

TEST(ErrorReplyHook, SeesAMalformedRequestLineWithoutARequest) {
  Lines log;
  ServerOptions options;
  options.on_error_reply = log_error_replies({AccessLogFormat::logfmt, log.sink()});
  Handler h = [](Request&, ResponseWriter& w) { w.text("no"); };
  auto r = record(h, new_request("G(T", "/x"), options);
  EXPECT_EQ(r.status, 400);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find(" method=- path=- status=400 "), std::string::npos) << log.lines[0];
  // Past the target, what was read is reported.
  r = record(h, new_request("GET", "/ bad target"), options);
  EXPECT_EQ(r.status, 400);
  ASSERT_EQ(log.lines.size(), 2u);
  EXPECT_NE(log.lines[1].find(" method=GET path=/ status=400 "), std::string::npos) << log.lines[1];
}

TEST(ErrorReplyHook, AThrowingHookDoesNotStopTheReply) {
  ServerOptions options;
  std::vector<std::string> errors;
  options.error_log = [&](std::string_view m) { errors.emplace_back(m); };
  options.on_error_reply = [](ErrorReply&) { throw std::runtime_error("hook broke"); };
  options.max_body_bytes = 1;
  auto r = record([](Request&, ResponseWriter& w) { w.text("no"); },
                  new_request("POST", "/", "too long"), options);
  EXPECT_EQ(r.status, 413);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("hook broke"), std::string::npos);
}

}  // namespace
}  // namespace goro::http
