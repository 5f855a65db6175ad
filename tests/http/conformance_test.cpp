// Raw-socket conformance suite for goro::http::Server: the bytes a client sends, the
// bytes it gets back, and whether the connection stays open.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <goro/http/errors.hpp>
#include <goro/http/server.hpp>
#include <goro/scheduler/runtime.hpp>

#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;

std::atomic<int> gone_seen{0};

// One handler for the whole suite, dispatching on the path.
void handler(Request& req, ResponseWriter& w) {
  std::string_view path = req.path();
  if (path == "/echo") {
    Result<std::string> body = req.body();
    if (!body) {
      w.text(std::string("body error: ") + body.error().message() + "\n", 400);
      return;
    }
    if (!req.header("content-type").empty())
      w.header().set("Content-Type", req.header("content-type"));
    w.write(*body);
  } else if (path == "/len") {
    Result<std::string> body = req.body();
    w.text(body ? std::to_string(body->size()) : "error");
  } else if (path == "/noread") {
    w.text("not reading");
  } else if (path == "/stream") {
    for (int i = 0; i < 3; ++i) {
      w.write("chunk" + std::to_string(i) + "\n");
      w.flush();
    }
  } else if (path == "/throw") {
    throw std::runtime_error("boom");
  } else if (path == "/throw-after-flush") {
    w.write("partial");
    w.flush();
    throw std::runtime_error("late boom");
  } else if (path == "/sleep") {
    goro::sleep(std::chrono::milliseconds(std::stoi(req.query("ms").value_or("100"))));
    w.text("slept");
  } else if (path == "/gone") {
    for (int i = 0; i < 300; ++i) {
      if (req.client_gone()) {
        gone_seen.fetch_add(1);
        return;
      }
      goro::sleep(10ms);
    }
    w.text("still here");
  } else if (path == "/status") {
    w.set_status(std::stoi(req.query("code").value_or("200")));
    w.write("x");
  } else if (path == "/declared") {
    w.header().set("Content-Length", "10");
    w.write("0123456789");
    w.flush();
  } else {
    std::string out = std::string(req.method()) + " " + std::string(path);
    if (auto q = req.query("q")) out += " q=" + *q;
    if (path == "/host") out += " " + std::string(req.host());
    w.text(out);
  }
}

class Conformance : public ::testing::Test {
 protected:
  static ServerOptions options() {
    ServerOptions o;
    o.error_log = [](std::string_view) {};
    o.max_body_bytes = 1 << 20;
    return o;
  }
  TestServer server{handler, options()};
};

// Expects one error response with status `code`, Connection: close, a text body, and
// the connection closed after it.
void expect_error(std::uint16_t port, const std::string& request, int code,
                  std::string_view body_mentions = {}) {
  RawConn c(port);
  c.send(request);
  auto r = c.read_response();
  ASSERT_TRUE(r) << request;
  EXPECT_EQ(r->status, code) << request << " -> " << r->body;
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_EQ(r->header("content-type"), "text/plain; charset=utf-8");
  EXPECT_NE(r->body.find(std::to_string(code)), std::string::npos);
  if (!body_mentions.empty()) {
    EXPECT_NE(r->body.find(body_mentions), std::string::npos) << r->body;
  }
  EXPECT_TRUE(c.closed_by_peer()) << request;
}

TEST_F(Conformance, SimpleGet) {
  auto r = round_trip(server.port(), "GET /hello?q=a%20b HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r->body, "GET /hello q=a b");
  EXPECT_EQ(r->header("content-length"), std::to_string(r->body.size()));
  EXPECT_EQ(r->header("server"), "goro");
  EXPECT_EQ(r->header("date").size(), 29u);
  EXPECT_EQ(r->header("date").substr(25), " GMT");
  EXPECT_EQ(r->count("connection"), 0u);
}

TEST_F(Conformance, PercentDecodedPath) {
  auto r = round_trip(server.port(), "GET /a%20b/%C3%A9 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /a b/\xC3\xA9");
  expect_error(server.port(), "GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "percent");
  expect_error(server.port(), "GET /a%2 HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

TEST_F(Conformance, HostRules) {
  expect_error(server.port(), "GET / HTTP/1.1\r\n\r\n", 400, "Host");
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host");
  auto r = round_trip(server.port(), "GET / HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(Conformance, SmugglingContentLengthAndTransferEncoding) {
  expect_error(
      server.port(),
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
      400);
  expect_error(
      server.port(),
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
      "0\r\n\r\n",
      400);
}

TEST_F(Conformance, DuplicateContentLength) {
  expect_error(
      server.port(),
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400);
  expect_error(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3,3\r\n\r\nabc",
               400);
  expect_error(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400);
}

// RFC 9112 6.1: Transfer-Encoding not ending in chunked is a 400 (a MUST); a coding goro
// does not implement before the final chunked is a 501.
TEST_F(Conformance, TransferEncodingRules) {
  expect_error(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
               400, "Transfer-Encoding");
  expect_error(server.port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
               400);
  expect_error(
      server.port(),
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501,
      "Transfer-Encoding");
  expect_error(server.port(), "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
               400, "HTTP/1.0");
}

TEST_F(Conformance, ObsFoldAndBadHeaderSyntax) {
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", 400,
               "folding");
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n : v\r\n\r\n", 400);
  expect_error(server.port(), "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

TEST_F(Conformance, BadChunkSizes) {
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  expect_error(server.port(), head + "zz\r\nabc\r\n0\r\n\r\n", 400);
  expect_error(server.port(), head + "-3\r\nabc\r\n0\r\n\r\n", 400);
  expect_error(server.port(), head + "fffffffffffffffffff\r\n", 400);
  expect_error(server.port(), head + "3\r\nabcd\r\n0\r\n\r\n", 400);
}

TEST_F(Conformance, ChunkedUpload) {
  auto r = round_trip(server.port(),
                      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                      "Content-Type: text/x-test\r\n\r\n"
                      "5\r\nhello\r\n1;name=value\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello world");
  EXPECT_EQ(r->header("content-type"), "text/x-test");
}

TEST_F(Conformance, VersionsAndMethods) {
  expect_error(server.port(), "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505);
  expect_error(server.port(), "GET / HTTP/1.7\r\nHost: x\r\n\r\n", 505);
  expect_error(server.port(), "BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method");
  auto r = round_trip(server.port(), "PATCH /p HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "PATCH /p");
}

// RFC 9112 3: request-line = method SP request-target SP HTTP-version. Any other line
// is a 400 whatever its first word; 501 only for a well-formed line whose method is
// unknown, 505 only for a well-formed one whose version is not 1.x.
TEST_F(Conformance, RequestLineForm) {
  for (const char* line : {"eam HTTP/1.1", "BREW /a b HTTP/1.1", "BREW  / HTTP/1.1", "BREW /",
                           "GET /", "GET / HTTP/1.1 ", "GET / HTTP/2.0x", "G(T / HTTP/1.1",
                           "GET / http/1.1", "BREW /\x01 HTTP/1.1"}) {
    expect_error(server.port(), std::string(line) + "\r\nHost: x\r\n\r\n", 400);
  }
  expect_error(server.port(), "BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method");
  expect_error(server.port(), "get / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method");
  expect_error(server.port(), "GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505);
  expect_error(server.port(), "BREW / HTTP/3.0\r\nHost: x\r\n\r\n", 505);
}

// The line is classified once it is whole, however it arrives: an unknown method sent
// a byte at a time is still a 501, and a two-part line still a 400.
TEST_F(Conformance, RequestLineClassifiedWhenWhole) {
  for (auto [request, code] : {std::pair{"BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501},
                               std::pair{"eam HTTP/1.1\r\nHost: x\r\n\r\n", 400}}) {
    RawConn c(server.port());
    for (const char* p = request; *p != '\0'; ++p) {
      c.send(std::string(1, *p));
      std::this_thread::sleep_for(1ms);
    }
    auto r = c.read_response();
    ASSERT_TRUE(r) << request;
    EXPECT_EQ(r->status, code) << request;
  }
}

// RFC 9112 2.2 lets a recipient take a bare LF for a line end; goro takes none, so that
// no request ends where a stricter parser in front of it (a proxy) sees no end.
TEST_F(Conformance, BareLineFeedIsNoLineEnd) {
  expect_error(server.port(), "GET / HTTP/1.1\nHost: x\r\n\r\n", 400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\n\r\n", 400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n\nGET /smuggled HTTP/1.1\r\n\r\n", 400);
  const std::string chunked =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  expect_error(server.port(), chunked + "3\nabc\r\n0\r\n\r\n", 400);
  expect_error(server.port(), chunked + "3\r\nabc\n0\r\n\r\n", 400);
  expect_error(server.port(), chunked + "0\r\n\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  expect_error(server.port(), chunked + "0\r\nT: v\n\r\n", 400);
}

// RFC 9112 5.2: obs-fold in a request is a 400 (or unfolded). A fold after an empty
// first line, which an unfolding parser reads as the value and another as an empty
// field, is the classic case: a Content-Length or Transfer-Encoding only one side sees.
TEST_F(Conformance, ObsFoldAfterEmptyFirstLine) {
  expect_error(server.port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 5\r\n\r\nhello", 400,
               "folding");
  expect_error(server.port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n\tchunked\r\n\r\n0\r\n\r\n",
               400, "folding");
  expect_error(server.port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "0\r\nT: a\r\n b\r\n\r\n",
               400, "folding");
}

// RFC 9112 5.1: no whitespace between a field name and its colon (a server MUST answer
// 400); nor before the first field line (RFC 9112 2.2), the "space before
// Content-Length" of CVE-2024-27982.
TEST_F(Conformance, WhitespaceAroundFieldNames) {
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400);
  expect_error(server.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length\t: 5\r\n\r\nhello",
               400);
  expect_error(server.port(), "POST /echo HTTP/1.1\r\n Content-Length: 5\r\nHost: x\r\n\r\nhello",
               400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n: empty-name\r\n\r\n", 400);
}

// Transfer-Encoding spelled so that one parser sees "chunked" and another does not
// (TE.TE): only a lone, exact "chunked" (any case, OWS around it) frames a body.
TEST_F(Conformance, TransferEncodingObfuscation) {
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\n";
  for (const char* te : {"Transfer-Encoding: xchunked", "Transfer-Encoding: chunked, chunked",
                         "Transfer-Encoding: \"chunked\"", "Transfer-Encoding: chunked;q=1",
                         "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity",
                         "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
                         "Transfer-Encoding: chunked\x0b"}) {
    expect_error(server.port(), head + te + "\r\n\r\n0\r\n\r\n", 400);
  }
  expect_error(server.port(), head + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400);
  expect_error(server.port(),
               head + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n", 400);
  auto r =
      round_trip(server.port(), head + "transfer-encoding:\tCHUNKED \r\n\r\n2\r\nok\r\n0\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok");
}

// Content-Length is 1*DIGIT, once (RFC 9110 8.6; a list of equal values is refused, as
// Go does, rather than taken).
TEST_F(Conformance, ContentLengthForms) {
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\n";
  for (const char* cl :
       {"Content-Length: 0x5", "Content-Length: +5", "Content-Length: 5 5", "Content-Length: 5.0",
        "Content-Length: -5", "Content-Length: 5,5", "Content-Length: 99999999999999999999999"}) {
    expect_error(server.port(), head + cl + "\r\n\r\nhello", 400);
  }
  auto r = round_trip(server.port(), head + "Content-Length: \t005 \r\n\r\nhello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

// Chunk sizes are 1*HEXDIG and nothing else; a last chunk with an extension is fine.
TEST_F(Conformance, ChunkSizeForms) {
  const std::string head = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const char* body :
       {"0x3\r\nabc\r\n0\r\n\r\n", "3 \r\nabc\r\n0\r\n\r\n", "+3\r\nabc\r\n0\r\n\r\n",
        "\r\n3\r\nabc\r\n0\r\n\r\n", "3\r\nabc0\r\n\r\n"}) {
    expect_error(server.port(), head + body, 400);
  }
  auto r = round_trip(server.port(), head + "00A\r\n0123456789\r\n0;last=1\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "0123456789");
}

// RFC 9110 5.5: a field value holds no CR, LF or NUL; a server rejects them (400).
TEST_F(Conformance, ControlCharactersInFields) {
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400);
  expect_error(server.port(), std::string("GET / HTTP/1.1\r\nHost: x\r\nX: a") + '\0' + "b\r\n\r\n",
               400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nX: a\x7f\r\n\r\n", 400);
  expect_error(server.port(), "GET / HTTP/1.1\r\nHost: x\r\nX\x01Y: a\r\n\r\n", 400);
}

// RFC 9112 3.2.2: for an absolute-form target the server uses its authority and
// ignores Host; an authority with userinfo is refused.
TEST_F(Conformance, AbsoluteFormTargetNamesTheHost) {
  auto r = round_trip(server.port(),
                      "GET http://real.example:8080/host?q=1 HTTP/1.1\r\nHost: other\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /host q=1 real.example:8080");
  expect_error(server.port(), "GET http://user@real.example/ HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  expect_error(server.port(), "GET http:///nohost HTTP/1.1\r\nHost: x\r\n\r\n", 400);
  expect_error(server.port(), "GET http://real.example/ HTTP/1.1\r\n\r\n", 400, "Host");
}

TEST_F(Conformance, LeadingEmptyLinesIgnored) {
  auto r = round_trip(server.port(), "\r\n\r\nGET /lead HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /lead");
}

TEST_F(Conformance, ExpectationFailed) {
  expect_error(server.port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\n",
               417);
}

TEST_F(Conformance, RequestLineTooLong) {
  expect_error(server.port(), "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n",
               414);
}

TEST_F(Conformance, HeadersTooLarge) {
  std::string req = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 70; ++i)
    req += "X-Filler-" + std::to_string(i) + ": " + std::string(1000, 'v') + "\r\n";
  expect_error(server.port(), req + "\r\n", 431);
}

TEST_F(Conformance, BodyTooLargeByContentLengthAnsweredAtOnce) {
  // The body is never sent: the 413 must come from the head alone.
  RawConn c(server.port());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(Conformance, ChunkedBodyTooLargeAnsweredWhenItGrows) {
  RawConn c(server.port());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
  for (int i = 0; i < 17 && c.send(chunk); ++i) {
  }
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(Conformance, NothingAfterAFramingErrorIsInterpreted) {
  RawConn c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(c.pending().find("HTTP/1.1"), std::string::npos);
}

TEST_F(Conformance, PipelinedRequestsAnsweredInOrder) {
  RawConn c(server.port());
  c.send(
      "GET /sleep?ms=50 HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirst"
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\n"
      "GET /third HTTP/1.1\r\nHost: x\r\n\r\n");
  auto a = c.read_response();
  auto b = c.read_response();
  auto d = c.read_response();
  auto e = c.read_response();
  ASSERT_TRUE(a && b && d && e);
  EXPECT_EQ(a->body, "slept");
  EXPECT_EQ(b->body, "first");
  EXPECT_EQ(d->body, "second");
  EXPECT_EQ(e->body, "GET /third");
}

TEST_F(Conformance, ContinueSentWhenHandlerReadsBody) {
  RawConn c(server.port());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  auto interim = c.read_response();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status_line, "HTTP/1.1 100 Continue");
  c.send("data");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "data");
  // Still alive.
  c.send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n");
  auto again = c.read_response();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->body, "GET /again");
}

TEST_F(Conformance, NoContinueWhenHandlerAnswersWithoutReading) {
  RawConn c(server.port());
  c.send("POST /noread HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << "a final status, no 100 Continue first";
  EXPECT_EQ(r->body, "not reading");
  // The body's fate is unknown, so the connection ends.
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(Conformance, ContinueIgnoredForHttp10) {
  RawConn c(server.port());
  c.send("POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hi");
}

TEST_F(Conformance, HeadHasHeadersOnly) {
  RawConn c(server.port());
  c.send("HEAD /thing HTTP/1.1\r\nHost: x\r\n\r\nGET /thing HTTP/1.1\r\nHost: x\r\n\r\n");
  auto h = c.read_response(/*head_only=*/true);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->header("content-length"), std::to_string(std::string("HEAD /thing").size()));
  auto g = c.read_response();
  ASSERT_TRUE(g);
  EXPECT_EQ(g->body, "GET /thing") << "no body bytes after the HEAD response";
}

TEST_F(Conformance, HeadOfStreamedResponse) {
  RawConn c(server.port());
  c.send("HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n");
  auto h = c.read_response(true);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->header("transfer-encoding"), "chunked");
  auto g = c.read_response();
  ASSERT_TRUE(g);
  EXPECT_EQ(g->body, "GET /x");
}

TEST_F(Conformance, Http10ClosesByDefault) {
  RawConn c(server.port());
  c.send("GET /one HTTP/1.0\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(Conformance, Http10KeepAliveWhenAsked) {
  RawConn c(server.port());
  c.send("GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("connection"), "keep-alive");
  c.send("GET /two HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  auto r2 = c.read_response();
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->body, "GET /two");
}

TEST_F(Conformance, Http10StreamingIsDelimitedByClose) {
  RawConn c(server.port());
  c.send("GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->chunked);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_EQ(r->body, "chunk0\nchunk1\nchunk2\n");
}

TEST_F(Conformance, KeepAliveAndConnectionClose) {
  RawConn c(server.port());
  for (int i = 0; i < 5; ++i) {
    c.send("GET /k" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /k" + std::to_string(i));
  }
  c.send("GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(Conformance, FlushSwitchesToChunked) {
  auto r = round_trip(server.port(), "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->chunked);
  EXPECT_EQ(r->count("content-length"), 0u);
  EXPECT_EQ(r->body, "chunk0\nchunk1\nchunk2\n");
}

TEST_F(Conformance, DeclaredContentLengthIsStreamed) {
  auto r = round_trip(server.port(), "GET /declared HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->chunked);
  EXPECT_EQ(r->header("content-length"), "10");
  EXPECT_EQ(r->body, "0123456789");
}

TEST_F(Conformance, NoBodyStatuses) {
  RawConn c(server.port());
  c.send(
      "GET /status?code=204 HTTP/1.1\r\nHost: x\r\n\r\nGET /status?code=304 HTTP/1.1\r\nHost: "
      "x\r\n\r\n"
      "GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
  auto a = c.read_response();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 204);
  EXPECT_EQ(a->count("content-length"), 0u);
  auto b = c.read_response();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 304);
  auto d = c.read_response();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->body, "GET /after");
}

TEST_F(Conformance, HandlerThrowsBeforeWriting) {
  RawConn c(server.port());
  c.send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
  // The server keeps serving.
  auto ok = round_trip(server.port(), "GET /fine HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->body, "GET /fine");
}

// The log line is all an operator has: it names the request and the client, as Go's
// "http: panic serving 127.0.0.1:5555: ..." does.
TEST(HandlerErrorLog, NamesTheRequestTheClientAndTheException) {
  auto logged = std::make_shared<std::string>();
  auto mu = std::make_shared<std::mutex>();
  ServerOptions o;
  o.error_log = [logged, mu](std::string_view line) {
    std::lock_guard<std::mutex> guard(*mu);
    logged->append(line);
  };
  TestServer server(handler, o);
  RawConn c(server.port());
  c.send("GET /throw?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  ASSERT_EQ(::getsockname(c.fd(), reinterpret_cast<sockaddr*>(&local), &len), 0);
  const std::string client = "127.0.0.1:" + std::to_string(ntohs(local.sin_port));
  std::lock_guard<std::mutex> guard(*mu);
  EXPECT_NE(logged->find("GET /throw?x=1"), std::string::npos) << *logged;
  EXPECT_NE(logged->find(client), std::string::npos) << *logged;
  EXPECT_NE(logged->find("boom"), std::string::npos) << *logged;
}

TEST_F(Conformance, HandlerThrowsAfterFlushClosesConnection) {
  RawConn c(server.port());
  c.send("GET /throw-after-flush HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(c.closed_by_peer());
  const std::string& wire = c.pending();
  EXPECT_NE(wire.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(wire.find("7\r\npartial\r\n"), std::string::npos);
  EXPECT_EQ(wire.find("0\r\n\r\n"), std::string::npos) << "the chunked body must not be terminated";
}

// Sends `request` (to /noread, whose handler never reads the body) with a pipelined
// GET /next behind it; expects the connection to survive: both answered, no close.
void expect_unread_body_drained(std::uint16_t port, const std::string& request) {
  RawConn c(port);
  c.send(request + "GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "not reading");
  EXPECT_EQ(r->count("connection"), 0u);
  auto next = c.read_response();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, "GET /next");
}

// A chunked POST /noread head and n chunks of 10,000 bytes, with the last chunk.
std::string chunked_noread(int n) {
  std::string s = "POST /noread HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < n; ++i) s += "2710\r\n" + std::string(10000, 'b') + "\r\n";
  return s + "0\r\n\r\n";
}

TEST_F(Conformance, UnreadBodyDrainedWhenSmall) {
  std::string body(100 * 1024, 'b');
  expect_unread_body_drained(server.port(), "POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                                std::to_string(body.size()) + "\r\n\r\n" + body);
}

TEST_F(Conformance, UnreadBodyClosesWhenLarge) {
  RawConn c(server.port());
  std::string body(900 * 1024, 'b');
  c.send("POST /noread HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "not reading");
  c.send(body);
  EXPECT_TRUE(c.closed_by_peer(5000));
}

// A chunked body's size shows only as it is read: the server drains it before the
// head, so the head can tell the truth about the connection (Go does the same).
TEST_F(Conformance, UnreadChunkedBodyDrainedBeforeTheHead) {
  expect_unread_body_drained(server.port(), chunked_noread(10));
}

TEST_F(Conformance, UnreadChunkedBodyTooLargeSaysClose) {
  RawConn c(server.port());
  c.send(chunked_noread(30) + "GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "not reading");
  EXPECT_EQ(r->header("connection"), "close") << "the server closes: the response must say so";
  EXPECT_TRUE(c.closed_by_peer(5000));
}

TEST_F(Conformance, UnreadMalformedChunkedBodySaysClose) {
  RawConn c(server.port());
  c.send(
      "POST /noread HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhelloXX\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer(5000));
  EXPECT_EQ(c.pending().find("GET /next"), std::string::npos)
      << "nothing after bad framing is a request";
}

// A client that ends its side inside a body sent an incomplete request: it gets a 400
// naming that, not the 200 of a handler that gave up on the body.
TEST(TruncatedBody, AnsweredWith400) {
  ServerOptions o;
  o.error_log = [](std::string_view) {};
  TestServer server([](Request& req, ResponseWriter&) { (void)req.body(); }, o);
  for (const char* request :
       {"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"}) {
    RawConn c(server.port());
    c.send(request);
    ::shutdown(c.fd(), SHUT_WR);
    auto r = c.read_response();
    ASSERT_TRUE(r) << request;
    EXPECT_EQ(r->status, 400) << request;
    EXPECT_NE(r->body.find("cut short"), std::string::npos) << r->body;
    EXPECT_EQ(r->header("connection"), "close");
  }
}

TEST(TruncatedBody, SilentHandlerAfterBodyTimeoutGets408) {
  ServerOptions o;
  o.error_log = [](std::string_view) {};
  o.read_body_timeout = 200ms;
  TestServer server([](Request& req, ResponseWriter&) { (void)req.body(); }, o);
  RawConn c(server.port());
  c.send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(r->header("connection"), "close");
}

// A response to HEAD never has a body, an error response included.
TEST_F(Conformance, ErrorResponseToHeadHasNoBody) {
  RawConn c(server.port());
  c.send("HEAD / HTTP/1.1\r\nHost: a b\r\n\r\n");
  auto r = c.read_response(true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->header("content-length"), "0");
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(c.pending(), "") << "body bytes after the head of a HEAD response";
}

// RFC 9112 3.2.4: the asterisk form is for OPTIONS only, and names the server itself.
TEST_F(Conformance, AsteriskFormTarget) {
  RawConn c(server.port());
  c.send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("content-length"), "0");
  c.send("GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
  auto after = c.read_response();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->body, "GET /after");
  expect_error(server.port(), "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, "asterisk");
}

TEST_F(Conformance, ClientGoneIsObserved) {
  int before = gone_seen.load();
  {
    RawConn c(server.port());
    c.send("GET /gone HTTP/1.1\r\nHost: x\r\n\r\n");
    std::this_thread::sleep_for(50ms);
  }
  for (int i = 0; i < 200 && gone_seen.load() == before; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(gone_seen.load(), before + 1);
}

TEST(ConformanceTimeouts, ReadHeaderTimeoutAnswers408) {
  ServerOptions o;
  o.read_header_timeout = 200ms;
  TestServer server(handler, o);
  RawConn c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n");
  auto start = std::chrono::steady_clock::now();
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST(ConformanceTimeouts, IdleConnectionClosedSilently) {
  ServerOptions o;
  o.idle_timeout = 200ms;
  TestServer server(handler, o);
  RawConn c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.read_response());
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(c.pending().empty());
}

// Idle past the moment the connection gives back its buffers and stack pages (1 s):
// the next request, split over two writes, and a pipelined pair after it are served;
// the idle timeout still counts from the start of the wait.
TEST(ConformanceTimeouts, LongIdleConnectionServesItsNextRequestsAndStillTimesOut) {
  ServerOptions o;
  o.idle_timeout = 1800ms;
  TestServer server(handler, o);
  RawConn c(server.port());
  c.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.read_response());
  std::this_thread::sleep_for(1300ms);
  c.send("GET /sec");
  std::this_thread::sleep_for(50ms);
  c.send("ond HTTP/1.1\r\nHost: x\r\n\r\n");
  auto second = c.read_response();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
  std::this_thread::sleep_for(1200ms);
  c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  auto a = c.read_response();
  auto b = c.read_response();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(b->status, 200);
  const auto idle_from = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer(4000));
  const auto idle_for = std::chrono::steady_clock::now() - idle_from;
  EXPECT_GT(idle_for, 1500ms) << "closed before idle_timeout";
  EXPECT_LT(idle_for, 3000ms);
  EXPECT_TRUE(c.pending().empty());
}

// A shutdown finds a connection idle for long (its buffers given back) idle, and closes it.
TEST(GracefulShutdown, ClosesAConnectionIdleForLong) {
  ServerOptions o;
  TestServer server(handler, o);
  RawConn idle(server.port());
  idle.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(idle.read_response());
  std::this_thread::sleep_for(1200ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server.stop(3000ms));
  EXPECT_TRUE(idle.closed_by_peer(1000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);
}

TEST(ConformanceTimeouts, ReadBodyTimeout) {
  ServerOptions o;
  o.read_body_timeout = 200ms;
  TestServer server(handler, o);
  RawConn c(server.port());
  c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("body error"), std::string::npos);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST(GracefulShutdown, FinishesInFlightClosesIdle) {
  ServerOptions o;
  o.error_log = [](std::string_view) {};
  TestServer server(handler, o);
  RawConn idle(server.port());
  idle.send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(idle.read_response());
  RawConn busy(server.port());
  busy.send("GET /sleep?ms=400 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  std::thread stopper([&] { EXPECT_FALSE(server.stop(3000ms)); });
  EXPECT_TRUE(idle.closed_by_peer(1000)) << "idle connection closed at once";
  auto r = busy.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "slept");
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(busy.closed_by_peer());
  stopper.join();
}

TEST(GracefulShutdown, ForceClosesAtDeadline) {
  ServerOptions o;
  TestServer server(handler, o);
  RawConn busy(server.port());
  busy.send("GET /sleep?ms=3000 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(200ms), make_error_code(errc::shutdown_timeout));
  EXPECT_TRUE(busy.closed_by_peer(1000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
}

long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST_F(Conformance, TenThousandRequestsOnOneConnectionWithoutGrowth) {
  RawConn c(server.port());
  const std::string req = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world";
  long warm = 0;
  for (int i = 0; i < 10000; ++i) {
    if (i == 1000) warm = resident_kib();
    ASSERT_TRUE(c.send(req));
    auto r = c.read_response();
    ASSERT_TRUE(r) << "request " << i;
    ASSERT_EQ(r->body, "hello world");
  }
  long growth = resident_kib() - warm;
#if defined(GORO_ASAN) || defined(GORO_TSAN)
  // ASan keeps freed memory in quarantine and TSan grows its shadow and history as the
  // program runs, so resident memory says nothing about leaks there; LeakSanitizer
  // checks those at exit in the ASan build.
  (void)growth;
#else
  EXPECT_LT(growth, 1024) << "resident memory grew by " << growth << " KiB over 9000 requests";
#endif
}

}  // namespace
}  // namespace goro::http::test
