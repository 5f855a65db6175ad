// The parsing engine on byte buffers: framing, limits, pipelining, in-place chunk
// decoding, with every input split into pieces of every size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "h1/message_parser.hpp"

namespace goro::http::detail {
namespace {

using Mode = MessageParser::Mode;

// Feeds input to p in pieces of at most step bytes until the head is parsed or fails.
ParseStatus feed_head(MessageParser& p, std::string_view& input, std::size_t step) {
  for (;;) {
    ParseStatus st = p.parse_head();
    if (st != ParseStatus::need_more || input.empty()) return st;
    std::span<char> space = p.read_space();
    std::size_t n = std::min({space.size(), step, input.size()});
    std::memcpy(space.data(), input.data(), n);
    p.commit(n);
    input.remove_prefix(n);
  }
}

// Reads the whole body, feeding input in pieces of at most step bytes, taking at most
// take_step bytes at a time. Returns false on a parse error or missing input.
bool read_body(MessageParser& p, std::string_view& input, std::size_t step, std::string& out,
               std::size_t take_step = 7) {
  for (;;) {
    if (p.available() > 0) {
      char buf[64];
      std::size_t n = p.take(buf, std::min(take_step, sizeof buf));
      out.append(buf, n);
      continue;
    }
    if (p.message_complete()) return true;
    ParseStatus st = p.parse_body();
    if (st == ParseStatus::error) return false;
    if (st == ParseStatus::complete || p.available() > 0) continue;
    if (input.empty()) return false;
    std::span<char> space = p.read_space();
    EXPECT_FALSE(space.empty());
    std::size_t n = std::min({space.size(), step, input.size()});
    std::memcpy(space.data(), input.data(), n);
    p.commit(n);
    input.remove_prefix(n);
  }
}

struct Outcome {
  ParseStatus status;
  int error_status = 0;
  std::string error;
};

Outcome parse_one(std::string_view input, ParserLimits limits = {}) {
  MessageParser p(Mode::request, limits, 256);
  ParseStatus st = feed_head(p, input, input.size() + 1);
  if (st == ParseStatus::complete) {
    std::string body;
    if (!read_body(p, input, 1024, body))
      st = p.error().status ? ParseStatus::error : ParseStatus::need_more;
  }
  return {st, p.error().status, p.error().message};
}

int status_of(std::string_view input, ParserLimits limits = {}) {
  Outcome o = parse_one(input, limits);
  return o.status == ParseStatus::error ? o.error_status
                                        : (o.status == ParseStatus::complete ? 200 : 0);
}

TEST(Parser, SimpleGetEverySplit) {
  const std::string req =
      "GET /a%20b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nX-Empty:\r\n"
      "X-Spaces:   v  w  \r\nAccept: */*\r\n\r\n";
  for (std::size_t step = 1; step <= req.size(); ++step) {
    MessageParser p(Mode::request, {}, 16);
    std::string_view in = req;
    ASSERT_EQ(feed_head(p, in, step), ParseStatus::complete) << "step " << step;
    EXPECT_EQ(p.method(), "GET");
    EXPECT_EQ(p.target(), "/a%20b?x=1&y=2");
    EXPECT_EQ(p.version_major(), 1);
    EXPECT_EQ(p.version_minor(), 1);
    ASSERT_EQ(p.headers().size(), 4u);
    EXPECT_EQ(p.header("host"), "example.com");
    EXPECT_EQ(p.header("X-EMPTY"), "");
    EXPECT_EQ(p.header("x-spaces"), "v  w");
    EXPECT_EQ(p.headers()[3].name, "Accept");
    EXPECT_TRUE(p.keep_alive());
    EXPECT_TRUE(p.message_complete());
    EXPECT_EQ(p.content_length(), 0);
  }
}

TEST(Parser, PipelinedRequestsInOrderEverySplit) {
  const std::string reqs =
      "POST /one HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
      "POST /two HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n"
      "GET /three HTTP/1.1\r\nHost: h\r\n\r\n";
  for (std::size_t step = 1; step <= reqs.size(); step += (step < 40 ? 1 : 13)) {
    MessageParser p(Mode::request, {}, 32);
    std::string_view in = reqs;
    std::string body;
    ASSERT_EQ(feed_head(p, in, step), ParseStatus::complete);
    EXPECT_EQ(p.target(), "/one");
    EXPECT_EQ(p.content_length(), 5);
    ASSERT_TRUE(read_body(p, in, step, body));
    EXPECT_EQ(body, "hello");
    p.next_message();
    ASSERT_EQ(feed_head(p, in, step), ParseStatus::complete);
    EXPECT_EQ(p.target(), "/two");
    EXPECT_TRUE(p.chunked());
    EXPECT_EQ(p.content_length(), -1);
    body.clear();
    ASSERT_TRUE(read_body(p, in, step, body)) << p.error().message;
    EXPECT_EQ(body, "abc0123456789abcdef");
    p.next_message();
    ASSERT_EQ(feed_head(p, in, step), ParseStatus::complete);
    EXPECT_EQ(p.target(), "/three");
    EXPECT_TRUE(p.message_complete());
    EXPECT_TRUE(in.empty());
    p.next_message();
    EXPECT_EQ(p.buffered(), 0u);
  }
}

// Plain heads are read without llhttp when they arrive whole, by llhttp when a read cuts
// them or when they are anything but plain; a connection mixes both. Whatever the reads,
// each request comes out the same as when llhttp reads every head.
TEST(Parser, PlainHeadsAndLlhttpHeadsMixInEverySplit) {
  const std::string reqs =
      "GET /plain HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n"
      "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
      // A plain HTTP/1.0 head between two of llhttp's: llhttp ends the POST only when
      // given the HEAD, and must judge it by the POST's version, not this one's.
      "GET /ten HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
      "HEAD /x#frag HTTP/1.1\r\nHost: h\r\n\r\n"
      "OPTIONS /o?q=%41 HTTP/1.1\r\nhost:h:80\r\nX-V: \"v\" \t\r\n\r\n"
      "GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  const std::string_view targets[] = {"/plain", "/form", "/ten", "/x#frag", "/o?q=%41", "/last"};
  auto describe = [&](bool plain, std::size_t step) {
    MessageParser p(Mode::request, {}, 64);
    p.set_plain_heads(plain);
    std::string_view in = reqs;
    std::string out;
    for (std::string_view target : targets) {
      if (feed_head(p, in, step) != ParseStatus::complete) return out + "refused: " + p.error().message;
      EXPECT_EQ(p.target(), target) << "step " << step << (plain ? " plain" : " llhttp");
      std::string body;
      EXPECT_TRUE(read_body(p, in, step, body));
      out += std::string(p.method()) + " " + std::string(p.target()) + " 1." +
             std::to_string(p.version_minor()) + " keep=" + std::to_string(p.keep_alive()) +
             " head=" + std::to_string(p.is_head_method()) + " body=" + body;
      for (const HeaderField& f : p.headers())
        out += " " + std::string(f.name) + "=" + std::string(f.value);
      out += "\n";
      if (!p.keep_alive()) break;
      p.next_message();
    }
    return out + "left " + std::to_string(p.buffered() + in.size());
  };
  const std::string expected = describe(false, reqs.size());
  EXPECT_NE(expected.find("OPTIONS /o?q=%41 1.1 keep=1 head=0 body= host=h:80 X-V=\"v\""),
            std::string::npos)
      << expected;
  EXPECT_NE(expected.find("GET /last 1.1 keep=0"), std::string::npos) << expected;
  for (std::size_t step = 1; step <= reqs.size(); step += (step < 60 ? 1 : 17)) {
    EXPECT_EQ(describe(true, step), expected) << "step " << step;
    EXPECT_EQ(describe(false, step), expected) << "step " << step;
  }
}

// A message after others in the same bytes stays where it is; its head moves to the
// buffer's start when a read would have less than half the buffer. 300 pipelined
// requests (plain heads and llhttp's, some with bodies) and 300 responses through 128 bytes,
// fed in pieces of 1 to 128 bytes: every head and body as sent, in a buffer that grows
// only for body windows.
TEST(Parser, PipelinedMessagesThroughASmallBufferKeepTheirPlace) {
  for (Mode mode : {Mode::request, Mode::response}) {
    std::string wire;
    std::vector<std::string> expected;
    for (int i = 0; i < 300; ++i) {
      const std::string n = std::to_string(i);
      // Bodies in requests only: the responses show that heads alone never grow it.
      const std::string body = mode == Mode::request && i % 3 == 0 ? "body" + n : "";
      std::string head = mode == Mode::request
                             ? (body.empty() ? "GET /r" : "POST /r") + n + " HTTP/1.1\r\nHost: h\r\n"
                             : "HTTP/1.1 200 OK" + n + "\r\n";
      head += "X-N:  " + n + " \r\n";
      if (!body.empty() || mode == Mode::response)
        head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
      wire += head + "\r\n" + body;
      expected.push_back((mode == Mode::request ? "/r" : "OK") + n + " " + n + " " + body);
    }
    for (std::size_t step : {1, 2, 5, 13, 50, 64, 99, 128}) {
      MessageParser p(mode, {}, 128);
      std::string_view in = wire;
      for (int i = 0; i < 300; ++i) {
        ASSERT_EQ(feed_head(p, in, step), ParseStatus::complete)
            << "message " << i << " step " << step << ": " << p.error().message;
        std::string body;
        ASSERT_TRUE(read_body(p, in, step, body)) << "message " << i << " step " << step;
        const std::string got = std::string(mode == Mode::request ? p.target() : p.status_text()) +
                                " " + std::string(p.header("x-n")) + " " + body;
        ASSERT_EQ(got, expected[static_cast<std::size_t>(i)]) << "step " << step;
        p.next_message();
      }
      // Only body windows (16 KiB after a head, doubling) grew it, to under the 64 KiB
      // past which next_message gives it back.
      if (mode == Mode::response) {
        EXPECT_EQ(p.capacity(), 128u) << "step " << step;
      } else {
        EXPECT_LT(p.capacity(), 64u * 1024) << "step " << step;
      }
      EXPECT_EQ(p.buffered() + in.size(), 0u);
    }
  }
}

TEST(Parser, LargeChunkedBodyThroughSmallBuffer) {
  std::string req = "PUT /big HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string expected;
  for (int i = 0; i < 3000; ++i) {
    std::string piece(static_cast<std::size_t>(i % 97 + 1), static_cast<char>('a' + i % 26));
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    req += size + piece + "\r\n";
    expected += piece;
  }
  req += "0\r\n\r\n";
  MessageParser p(Mode::request, {}, 64);
  std::string_view in = req;
  ASSERT_EQ(feed_head(p, in, 4096), ParseStatus::complete);
  std::string body;
  ASSERT_TRUE(read_body(p, in, 4096, body, 1000));
  EXPECT_EQ(body, expected);
  EXPECT_LT(p.capacity(), 64u * 1024);  // the body window is reused, not grown
}

TEST(Parser, LeadingEmptyLinesIgnored) {
  EXPECT_EQ(status_of("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 200);
}

TEST(Parser, HostRules) {
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n"), 400);
}

// RFC 9112 3.2: an invalid Host value is a 400, as is a field with no name.
TEST(Parser, HostValueAndFieldNameSyntax) {
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: a/b@c\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\\y\r\n\r\n"), 400);
  EXPECT_EQ(parse_one("GET / HTTP/1.1\r\nHost: a b\r\n\r\n").error, "malformed Host header");
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: xn--bcher-kva.example\r\n\r\n"), 200);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 200);  // empty: allowed (RFC 9112 3.2)
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n: v\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n"), 400);
  // Nor in a chunked body's trailers.
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "0\r\n: v\r\n\r\n"),
            400);
}

// Chunk-size lines may carry extensions and leading zeros, and llhttp puts no bound on
// either: without one a client could stream gigabytes inside a single chunk header.
TEST(Parser, ChunkFramingOverheadIsBounded) {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  Outcome ext = parse_one(head + "1;" + std::string(1 << 20, 'e') + "\r\na\r\n0\r\n\r\n");
  EXPECT_EQ(ext.error_status, 400);
  EXPECT_NE(ext.error.find("chunked body framing"), std::string::npos) << ext.error;
  EXPECT_EQ(status_of(head + std::string(1 << 20, '0') + "1\r\na\r\n0\r\n\r\n"), 400);
  // Ordinary use passes: short extensions, and many one-byte chunks.
  EXPECT_EQ(status_of(head + "3;name=value\r\nabc\r\n0\r\n\r\n"), 200);
  std::string small;
  for (int i = 0; i < 20000; ++i) small += "1\r\nx\r\n";
  EXPECT_EQ(status_of(head + small + "0\r\n\r\n"), 200);
}

// RFC 9112 3: request-line = method SP request-target SP HTTP-version CRLF. A line of
// another form is a 400 whatever its first word looks like; 501 is for a well-formed
// line whose method is unknown, 505 for a well-formed one whose version is not 1.x.
// llhttp stops at the first byte it cannot take, so the status must not depend on how
// much of the line had arrived: every case is fed in pieces of every size.
TEST(Parser, RequestLineStatusInEverySplit) {
  struct Case {
    std::string line;
    int status;
  };
  const Case cases[] = {
      {"GET / HTTP/1.1 ", 400},  // a fourth, empty part
      {"GET / HTTP/01.1", 400},  // not DIGIT "." DIGIT
      {"GET / HTTP/1.10", 400},
      {"GET /", 400},                    // HTTP/0.9's simple request
      {"GET / HTTP/1.1\rHost: h", 400},  // CR without LF
      {"GET\t/ HTTP/1.1", 400},
      {"G(T / HTTP/1.1", 400},  // not a token
      {"GET / HTTP/2.0x", 400},
      {"GET / http/1.1", 400},
      {"BREW / HTTP/1.1 extra", 400},  // four parts, whatever the method
      {"BREW /", 400},
      {"BREW  / HTTP/1.1", 400},  // two spaces
      {"BREW / HTTP/2.0x", 400},
      {"BREW /a\x01b HTTP/1.1", 400},  // a control in the target
      {"eam HTTP/1.1", 400},           // two parts
      {"BREW", 400},
      {"BREW / HTTP/1.1", 501},
      {"get / HTTP/1.1", 501},       // methods are case-sensitive
      {"DESCRIBE / HTTP/1.1", 501},  // RTSP's, not HTTP's
      {"FOO * HTTP/1.0", 501},
      {"GET / HTTP/2.0", 505},
      {"GET / HTTP/1.2", 505},
      {"GET / HTTP/0.9", 505},
      {"BREW / HTTP/3.0", 505},  // the version first: nothing else can be read
  };
  for (const Case& c : cases) {
    const std::string request = c.line + "\r\nHost: h\r\n\r\n";
    for (std::size_t step = 1; step <= request.size(); ++step) {
      MessageParser p(Mode::request, {}, 16);
      std::string_view in = request;
      ASSERT_EQ(feed_head(p, in, step), ParseStatus::error) << c.line << " in pieces of " << step;
      ASSERT_EQ(p.error().status, c.status) << c.line << " in pieces of " << step;
    }
  }
  // A bare LF ends no request line, whatever the method (RFC 9112 2.2 lets a server
  // accept one; goro does not, nowhere in a head).
  EXPECT_EQ(status_of("GET / HTTP/1.1\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("BREW / HTTP/1.1\nHost: h\r\n\r\n"), 400);
}

// An unknown method waits for the end of its line; a line that never ends is refused
// at the request-line limit, not read without bound.
TEST(Parser, RefusedRequestLineIsBounded) {
  ParserLimits limits{100, 200, 50};
  MessageParser p(Mode::request, limits, 64);
  std::string_view in = "BREW /";
  EXPECT_EQ(feed_head(p, in, 64), ParseStatus::need_more);
  const std::string endless(4096, 'a');
  ParseStatus st = ParseStatus::need_more;
  for (int i = 0; i < 64 && st == ParseStatus::need_more; ++i) {
    std::string_view more = endless;
    st = feed_head(p, more, 4096);
  }
  EXPECT_EQ(st, ParseStatus::error);
  EXPECT_EQ(p.error().status, 400);
  EXPECT_LT(p.capacity(), 8u * 1024);
}

// What an error reply hook sees of a refused head (expose_partial_head): the fields
// complete before the error, the same however the head was split into reads; a field
// name the error cut is not one of them.
TEST(Parser, PartialHeadHoldsWholeFieldsInEverySplit) {
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Enc\x01oding: chunked\r\n\r\n";
  for (std::size_t step = 1; step <= head.size(); ++step) {
    MessageParser p(Mode::request, {}, 16);
    std::string_view in = head;
    ASSERT_EQ(feed_head(p, in, step), ParseStatus::error) << "step " << step;
    ASSERT_TRUE(p.expose_partial_head());
    EXPECT_EQ(p.method(), "POST");
    EXPECT_EQ(p.target(), "/echo");
    ASSERT_EQ(p.headers().size(), 1u) << "step " << step;
    EXPECT_EQ(p.headers()[0].name, "Host");
    EXPECT_EQ(p.headers()[0].value, "x");
  }
}

TEST(Parser, SmugglingAttempts) {
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                      "Content-Length: 3\r\n\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(
      status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"),
      400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"), 400);  // obs-fold
  EXPECT_EQ(status_of("GET / HTTP/1.1\nHost: h\n\n"), 400);                      // bare LF
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\x01\r\n\r\n"), 400);
}

// RFC 9112 2.2 lets a recipient take a bare LF for a line end; goro takes it nowhere,
// so that no line ends where a stricter parser on the path (a proxy) sees none. llhttp
// 8 itself takes one at the end of the request line, of the head and of a chunked
// body's trailer section; those are checked by goro. Every split of each.
TEST(Parser, BareLineFeedEndsNoLineInEverySplit) {
  const std::string chunked = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string cases[] = {
      "GET / HTTP/1.1\nHost: h\r\n\r\n",    // the request line
      "GET / HTTP/1.1\r\nHost: h\n\r\n",    // a field line
      "GET / HTTP/1.1\r\nHost: h\r\n\n",    // the head
      chunked + "3\nabc\r\n0\r\n\r\n",      // a chunk-size line
      chunked + "3\r\nabc\n0\r\n\r\n",      // after chunk data
      chunked + "3;x=y\nabc\r\n0\r\n\r\n",  // after an extension
      chunked + "0\n\r\n",                  // the last chunk
      chunked + "0\r\nT: v\n\r\n",          // a trailer line
      chunked + "0\r\n\n",                  // the trailer section
      chunked + "0\r\nT: v\r\n\n",
  };
  for (const std::string& request : cases) {
    for (std::size_t step = 1; step <= request.size(); ++step) {
      MessageParser p(Mode::request, {}, 16);
      std::string_view in = request;
      ParseStatus st = feed_head(p, in, step);
      std::string body;
      if (st == ParseStatus::complete) st = read_body(p, in, step, body) ? st : ParseStatus::error;
      EXPECT_EQ(st, ParseStatus::error) << request << " in pieces of " << step;
      EXPECT_EQ(p.error().status, 400) << request << " in pieces of " << step;
    }
  }
  // The same requests with CRLF are fine.
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), 200);
  EXPECT_EQ(status_of(chunked + "3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n"), 200);
}

// RFC 9112 5.2: a server rejects an obs-fold in a request with 400 (or unfolds it). A
// fold after an empty first line reaches goro as one piece of value, as if unfolded;
// in a trailer llhttp takes it too. Both are refused, in every split, so that a
// "Content-Length:" folded onto the next line is not a length a proxy never saw.
TEST(Parser, ObsFoldRefusedInEverySplit) {
  const std::string chunked = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string cases[] = {
      "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX:\r\n b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX: \r\n\tb\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX:\r\n \r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n 5\r\n\r\nhello",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
      chunked + "0\r\nT: a\r\n b\r\n\r\n",
      chunked + "0\r\nT:\r\n\tb\r\n\r\n",
      chunked + "3\r\nabc\r\n0;e=1\r\nT: v\r\nU:\r\n w\r\n\r\n",
  };
  for (const std::string& request : cases) {
    for (std::size_t step = 1; step <= request.size(); ++step) {
      MessageParser p(Mode::request, {}, 16);
      std::string_view in = request;
      ParseStatus st = feed_head(p, in, step);
      std::string body;
      if (st == ParseStatus::complete) st = read_body(p, in, step, body) ? st : ParseStatus::error;
      EXPECT_EQ(st, ParseStatus::error) << request << " in pieces of " << step;
      EXPECT_EQ(p.error().status, 400) << request << " in pieces of " << step;
    }
  }
  // Whitespace inside a value, a chunk's data and a trailer's value is no fold.
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: h\r\nX: a \t b\r\n\r\n"), 200);
  EXPECT_EQ(status_of(chunked + "3\r\n\n \t\r\n0\r\nT: a b\r\n\r\n"), 200);
}

// RFC 9112 6.1: a request whose Transfer-Encoding does not end in chunked (once) has no
// knowable length: 400, a MUST. A coding goro does not implement before a final
// chunked: 501.
TEST(Parser, TransferEncodingRules) {
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            400);
  EXPECT_EQ(
      status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
      501);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n"),
            200);
}

TEST(Parser, BadChunks) {
  const char* head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(status_of(std::string(head) + "3x\r\nabc\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(status_of(std::string(head) + "-1\r\n"), 400);
  EXPECT_EQ(status_of(std::string(head) + "ffffffffffffffffff\r\n"), 400);
  EXPECT_EQ(status_of(std::string(head) + "3\r\nabcX\r\n0\r\n\r\n"), 400);
  EXPECT_EQ(status_of(std::string(head) + "3\nabc\n0\n\n"), 400);
  EXPECT_EQ(status_of(std::string(head) + " 3\r\nabc\r\n0\r\n\r\n"), 400);
}

TEST(Parser, Versions) {
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/0.9\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET / HTTP/3.0\r\nHost: h\r\n\r\n"), 505);
}

TEST(Parser, Methods) {
  EXPECT_EQ(status_of("FOO / HTTP/1.1\r\nHost: h\r\n\r\n"), 501);
  EXPECT_EQ(status_of("DESCRIBE / HTTP/1.1\r\nHost: h\r\n\r\n"), 501);
  EXPECT_EQ(status_of("PATCH / HTTP/1.1\r\nHost: h\r\n\r\n"), 200);
  EXPECT_EQ(status_of("get / HTTP/1.1\r\nHost: h\r\n\r\n"), 501);
}

TEST(Parser, Limits) {
  ParserLimits limits{100, 200, 50};
  EXPECT_EQ(status_of("GET /" + std::string(99, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", limits),
            200);
  EXPECT_EQ(status_of("GET /" + std::string(100, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", limits),
            414);
  EXPECT_EQ(
      status_of("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(200, 'a') + "\r\n\r\n", limits),
      431);
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 100; ++i) many += "A:\r\n";
  EXPECT_EQ(status_of(many + "\r\n", limits), 431);
  EXPECT_EQ(
      status_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n\r\n" + std::string(50, 'x'),
                limits),
      200);
  // Content-Length over the limit fails at the head, before any body byte.
  Outcome o = parse_one("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 51\r\n\r\n", limits);
  EXPECT_EQ(o.status, ParseStatus::error);
  EXPECT_EQ(o.error_status, 413);
  // A chunked body fails as soon as it grows past the limit.
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "20\r\n" +
                          std::string(32, 'x') + "\r\n20\r\n" + std::string(32, 'x') + "\r\n",
                      limits),
            413);
  // Trailers count against the header limit.
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " +
                          std::string(300, 't') + "\r\n\r\n",
                      limits),
            431);
}

TEST(Parser, LimitsHoldAgainstEndlessInput) {
  ParserLimits limits{100, 200, 50};
  MessageParser p(Mode::request, limits, 64);
  std::string junk(1 << 20, '\n');
  std::string_view in = junk;
  // Only empty lines: llhttp skips them without a callback; the size guard stops it.
  for (int i = 0; i < 1000 && p.parse_head() == ParseStatus::need_more && !in.empty(); ++i) {
    std::span<char> s = p.read_space();
    std::size_t n = std::min(s.size(), in.size());
    std::memcpy(s.data(), in.data(), n);
    p.commit(n);
    in.remove_prefix(n);
  }
  EXPECT_EQ(p.parse_head(), ParseStatus::error);
  EXPECT_LT(p.capacity(), 4096u);
}

TEST(Parser, ExpectAndConnection) {
  MessageParser p(Mode::request, {}, 256);
  std::string req =
      "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  std::string_view in = req;
  ASSERT_EQ(feed_head(p, in, 1000), ParseStatus::complete);
  EXPECT_TRUE(p.expect_continue());
  EXPECT_FALSE(p.message_complete());
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\n\r\n"), 417);

  MessageParser q(Mode::request, {}, 256);
  std::string r10 = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
  in = r10;
  ASSERT_EQ(feed_head(q, in, 1000), ParseStatus::complete);
  EXPECT_TRUE(q.keep_alive());
  MessageParser r(Mode::request, {}, 256);
  std::string r10c = "GET / HTTP/1.0\r\n\r\n";
  in = r10c;
  ASSERT_EQ(feed_head(r, in, 1000), ParseStatus::complete);
  EXPECT_FALSE(r.keep_alive());
  MessageParser s(Mode::request, {}, 256);
  std::string r11c = "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  in = r11c;
  ASSERT_EQ(feed_head(s, in, 1000), ParseStatus::complete);
  EXPECT_FALSE(s.keep_alive());
  // Both on HTTP/1.0: close wins (RFC 9112 9.3), in one field or in two.
  for (std::string both :
       {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"}) {
    MessageParser t(Mode::request, {}, 256);
    in = both;
    ASSERT_EQ(feed_head(t, in, 1000), ParseStatus::complete);
    EXPECT_FALSE(t.keep_alive()) << both;
  }
}

TEST(Parser, ResponseMode) {
  std::string resp =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
  MessageParser p(Mode::response, {}, 64);
  std::string_view in = resp;
  ASSERT_EQ(feed_head(p, in, 5), ParseStatus::complete);
  EXPECT_EQ(p.status_code(), 100);
  EXPECT_TRUE(p.message_complete());
  p.next_message();
  ASSERT_EQ(feed_head(p, in, 5), ParseStatus::complete);
  EXPECT_EQ(p.status_code(), 200);
  EXPECT_EQ(p.status_text(), "OK");
  std::string body;
  ASSERT_TRUE(read_body(p, in, 5, body));
  EXPECT_EQ(body, "abc");
  p.next_message();
  ASSERT_EQ(feed_head(p, in, 5), ParseStatus::complete);
  body.clear();
  ASSERT_TRUE(read_body(p, in, 5, body));
  EXPECT_EQ(body, "hi");

  // A body delimited by the end of the connection.
  MessageParser q(Mode::response, {}, 64);
  std::string eof = "HTTP/1.0 200 OK\r\n\r\nuntil close";
  in = eof;
  ASSERT_EQ(feed_head(q, in, 100), ParseStatus::complete);
  EXPECT_EQ(q.content_length(), -1);
  body.clear();
  EXPECT_FALSE(read_body(q, in, 100, body));  // input ran out: the caller sees EOF
  EXPECT_EQ(q.finish_on_eof(), ParseStatus::complete);
  body.append(q.peek_body());
  EXPECT_EQ(body, "until close");

  // A response to HEAD has no body, whatever Content-Length says.
  MessageParser h(Mode::response, {}, 64);
  h.set_response_to_head(true);
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
  in = head;
  ASSERT_EQ(feed_head(h, in, 100), ParseStatus::complete);
  EXPECT_TRUE(h.message_complete());
  h.next_message();
  h.set_response_to_head(false);
  ASSERT_EQ(feed_head(h, in, 100), ParseStatus::complete);
  EXPECT_EQ(h.status_code(), 204);
}

TEST(Parser, BufferReturnsToSmallAfterBigHead) {
  MessageParser p(Mode::request, {}, 1024);
  std::string req = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(60000, 'a') + "\r\n\r\n";
  std::string_view in = req;
  ASSERT_EQ(feed_head(p, in, 100000), ParseStatus::complete);
  EXPECT_GT(p.capacity(), 60000u);
  p.next_message();
  EXPECT_EQ(p.capacity(), 1024u);
}

}  // namespace
}  // namespace goro::http::detail
