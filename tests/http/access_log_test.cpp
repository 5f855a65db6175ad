// Structured access logs (logfmt, JSON), request ids, and the hook through which the
// server's own error replies (400, 413, ...) reach logging, all through the real server
// code (httptest::record).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <goro/http/httptest.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/server.hpp>

#include "test_util.hpp"

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

// Many goroutines on several threads log at once to the default sink, stderr: each line
// leaves in one write, so none runs into the next. stderr goes to a file for the test.
class AccessLogUnderLoad : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Ps, AccessLogUnderLoad, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Ps"; });

// Serves 8 clients x 800 requests with an access log to sink, then counts the lines of
// the file at path and those that hold exactly one entry.
std::pair<int, int> log_under_load(int procs, LogSink sink, const char* path) {
  constexpr int kClients = 8, kRequests = 800;
  {
    test::TestServer server(chain(hello(), {access_log({AccessLogFormat::logfmt, sink})}),
                            ServerOptions{.request_ids = true}, procs);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&server] {
        test::RawConn c(server.port());
        for (int k = 0; k < kRequests; ++k) {
          if (!c.send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n") || !c.read_response()) return;
        }
      });
    }
    for (std::thread& t : clients) t.join();
    server.stop();
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0, whole = 0;
  while (std::getline(in, line)) {
    ++lines;
    // One entry: it starts with its time and holds one request id, at its end.
    if (line.rfind("time=", 0) == 0 && line.find("time=", 1) == std::string::npos &&
        line.find("request_id=") != std::string::npos &&
        line.find("request_id=") == line.rfind("request_id=")) {
      ++whole;
    }
  }
  EXPECT_EQ(lines, kClients * kRequests);
  return {lines, whole};
}

TEST_P(AccessLogUnderLoad, EveryLineIsWholeAndAlone) {
  char path[] = "/tmp/goro-access-log-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  ::close(file);
  // The default sink: stderr.
  const auto [lines, whole] = log_under_load(GetParam(), {}, path);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::unlink(path);
  EXPECT_EQ(whole, lines) << lines - whole << " lines ran into another";
}

TEST_P(AccessLogUnderLoad, AFileSinkKeepsEveryLineWholeToo) {
  char path[] = "/tmp/goro-access-log-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::close(file);
  Result<LogSink> sink = open_log_file(path);
  ASSERT_TRUE(sink) << sink.error().message();
  const auto [lines, whole] = log_under_load(GetParam(), std::move(*sink), path);
  ::unlink(path);
  EXPECT_EQ(whole, lines) << lines - whole << " lines ran into another";
}

TEST(OpenLogFile, AppendsAndNamesTheProblemWhenItCannotOpen) {
  char path[] = "/tmp/goro-access-log-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::write(file, "before\n", 7), 7);
  ::close(file);
  {
    Result<LogSink> sink = open_log_file(path);
    ASSERT_TRUE(sink);
    (*sink)("one");
    (*sink)("two");
  }
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "before\none\ntwo\n");
  ::unlink(path);
  Result<LogSink> missing = open_log_file("/nonexistent-goro-dir/access.log");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);
}

// ServerOptions::request_ids: every request gets an id without any middleware, the
// server's own replies too.
TEST(ServerRequestIds, OnEveryResponseAndTheContext) {
  ServerOptions options{.request_ids = true};
  auto kept =
      record(hello(), new_request("GET", "/").header("X-Request-Id", "abc.DEF_1-2"), options);
  EXPECT_EQ(kept.header("x-request-id"), "abc.DEF_1-2");
  EXPECT_EQ(kept.body, "id=abc.DEF_1-2");
  auto made = record(hello(), new_request("GET", "/").header("X-Request-Id", "not ok"), options);
  const std::string id(made.header("x-request-id"));
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(made.body, "id=" + id);
  // request_id() in the chain keeps the server's id rather than making a second one.
  auto chained = record(chain(hello(), {request_id()}), new_request("GET", "/"), options);
  EXPECT_EQ(chained.header_values("x-request-id").size(), 1u);
  EXPECT_EQ(chained.body, "id=" + std::string(chained.header("x-request-id")));
  // Off (the default): no id.
  auto off = record(hello(), new_request("GET", "/"));
  EXPECT_TRUE(off.header("x-request-id").empty());
  EXPECT_EQ(off.body, "id=");
}

TEST(ServerRequestIds, TheServersOwnRepliesCarryThem) {
  std::vector<std::string> ids;
  ServerOptions options{.max_body_bytes = 10};
  options.request_ids = true;
  options.on_error_reply = [&](ErrorReply& reply) { ids.emplace_back(reply.request_id); };
  Handler h = [](Request&, ResponseWriter& w) { w.text("no"); };
  auto r = record(h, new_request("POST", "/", std::string(100, 'x')).header("X-Request-Id", "c-1"),
                  options);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.header("x-request-id"), "c-1");
  // Before any field was read there is no client id: the server makes one.
  r = record(h, new_request("G(T", "/x"), options);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.header("x-request-id").size(), 16u);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], "c-1");
  EXPECT_EQ(ids[1], r.header("x-request-id"));
}

}  // namespace
}  // namespace goro::http
