// RFC 9113 server requirements, checked with frames written by hand (h2c, prior
// knowledge), and the protections against floods: each test names the rule it checks.
#include <gtest/gtest.h>

#include <string>

#include "h2_test_util.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

Handler hello() {
  return [](Request& req, ResponseWriter& w) {
    if (req.path() == "/sleep") goro::sleep(std::chrono::milliseconds(500));
    if (req.path() == "/big") {
      std::string chunk(64 * 1024, 'x');
      for (int i = 0; i < 32; ++i) w.write(chunk);
      return;
    }
    w.text("hello");
  };
}

ServerOptions quiet() {
  ServerOptions o;
  o.error_log = [](std::string_view) {};
  return o;
}

std::string u32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::uint32_t be32(std::string_view p) {
  auto b = [&](std::size_t i) { return static_cast<std::uint8_t>(p[i]); };
  return std::uint32_t{b(0)} << 24 | std::uint32_t{b(1)} << 16 | std::uint32_t{b(2)} << 8 | b(3);
}

// The error code of the GOAWAY that ends the connection; -1 when it ends without one.
long goaway_code(RawH2& c) {
  std::optional<Frame> f = c.wait_for(NGHTTP2_GOAWAY);
  return f ? static_cast<long>(f->error_code()) : -1;
}

// The error code of the RST_STREAM for stream; -1 when none came (or a GOAWAY did).
long reset_code(RawH2& c, std::int32_t stream) {
  for (;;) {
    std::optional<Frame> f = c.read_frame();
    if (!f || f->type == NGHTTP2_GOAWAY) return -1;
    if (f->type == NGHTTP2_RST_STREAM && f->stream == stream) return f->error_code();
  }
}

class Http2Conformance : public ::testing::Test {
 protected:
  H2Server server{hello(), quiet()};
};

// 3.4: the server's preface is a SETTINGS frame; 6.5.3: the client's SETTINGS is acked.
TEST_F(Http2Conformance, ServerSendsSettingsAndAcksTheClients) {
  RawH2 c(server.port());
  std::optional<Frame> first = c.read_frame();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->type, NGHTTP2_SETTINGS);
  EXPECT_EQ(first->flags & NGHTTP2_FLAG_ACK, 0);
  std::optional<Frame> ack = c.wait_for(NGHTTP2_SETTINGS);
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->flags, NGHTTP2_FLAG_ACK);
}

// 3.4: the client preface must be followed by SETTINGS.
TEST_F(Http2Conformance, PrefaceWithoutSettingsIsConnectionError) {
  RawH2 c(server.port(), false);
  c.send_raw(RawH2::kPreface);
  c.send_frame(NGHTTP2_PING, 0, 0, std::string(8, 'p'));
  EXPECT_EQ(goaway_code(c), NGHTTP2_PROTOCOL_ERROR);
}

// 6.7: PING is answered with the same payload and the ACK flag.
TEST_F(Http2Conformance, PingIsAnswered) {
  RawH2 c(server.port());
  c.send_frame(NGHTTP2_PING, 0, 0, "12345678");
  std::optional<Frame> f = c.wait_for(NGHTTP2_PING);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->flags, NGHTTP2_FLAG_ACK);
  EXPECT_EQ(f->payload, "12345678");
}

// 4.1, 5.5: frames of unknown types are ignored.
TEST_F(Http2Conformance, UnknownFrameTypesAreIgnored) {
  RawH2 c(server.port());
  c.send_frame(0xfa, 0, 0, "whatever");
  c.send_frame(0xfb, 0xff, 1, "x");
  c.send_headers(1, RawH2::get());
  std::optional<Frame> f = c.wait_for(NGHTTP2_HEADERS, 1);
  ASSERT_TRUE(f);
}

// 5.1.1: a client stream id is odd.
TEST_F(Http2Conformance, EvenStreamIdIsProtocolError) {
  RawH2 c(server.port());
  c.send_headers(2, RawH2::get());
  EXPECT_EQ(goaway_code(c), NGHTTP2_PROTOCOL_ERROR);
}

// 5.1.1: stream ids increase.
TEST_F(Http2Conformance, DecreasingStreamIdIsProtocolError) {
  RawH2 c(server.port());
  c.send_headers(5, RawH2::get());
  c.send_headers(3, RawH2::get());
  EXPECT_EQ(goaway_code(c), NGHTTP2_PROTOCOL_ERROR);
}

// 5.1: DATA on an idle stream is a connection error.
TEST_F(Http2Conformance, DataOnIdleStreamIsProtocolError) {
  RawH2 c(server.port());
  c.send_frame(NGHTTP2_DATA, 0, 7, "data");
  EXPECT_EQ(goaway_code(c), NGHTTP2_PROTOCOL_ERROR);
}

// 5.1: DATA after the client ended its side is STREAM_CLOSED.
TEST_F(Http2Conformance, DataOnClosedStreamIsStreamClosed) {
  RawH2 c(server.port());
  c.send_headers(1, RawH2::get());
  for (;;) {  // the whole response
    std::optional<Frame> f = c.read_frame();
    ASSERT_TRUE(f);
    if (f->stream == 1 && (f->flags & NGHTTP2_FLAG_END_STREAM)) break;
  }
  c.send_frame(NGHTTP2_DATA, 0, 1, "late");
  long code = -1;
  for (std::optional<Frame> f; (f = c.read_frame());) {
    if (f->type == NGHTTP2_RST_STREAM || f->type == NGHTTP2_GOAWAY) {
      code = f->error_code();
      break;
    }
  }
  EXPECT_EQ(code, NGHTTP2_STREAM_CLOSED);
}

// 6.9.1: a window may not pass 2^31-1.
TEST_F(Http2Conformance, WindowOverflowIsFlowControlError) {
  RawH2 c(server.port());
  c.send_frame(NGHTTP2_WINDOW_UPDATE, 0, 0, u32(0x7fffffff));
  EXPECT_EQ(goaway_code(c), NGHTTP2_FLOW_CONTROL_ERROR);
}

// 6.9: an increment of 0 on the connection is a connection error.
TEST_F(Http2Conformance, ZeroWindowIncrementIsProtocolError) {
  RawH2 c(server.port());
  c.send_frame(NGHTTP2_WINDOW_UPDATE, 0, 0, u32(0));
  EXPECT_EQ(goaway_code(c), NGHTTP2_PROTOCOL_ERROR);
}

// 6.9.1: DATA past the window the server advertised is a flow-control error.
TEST_F(Http2Conformance, DataPastTheWindowIsFlowControlError) {
  RawH2 c(server.port());
  Fields post = {
      {":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/sleep"}};
  c.send_headers(1, post, false);
  std::string chunk(16384, 'd');
  for (int i = 0; i < 17; ++i) c.send_frame(NGHTTP2_DATA, 0, 1, chunk);  // 272 KiB > 256 KiB
  long code = -1;
  for (std::optional<Frame> f; (f = c.read_frame());) {
    if (f->type == NGHTTP2_RST_STREAM || f->type == NGHTTP2_GOAWAY) {
      code = f->error_code();
      break;
    }
  }
  EXPECT_EQ(code, NGHTTP2_FLOW_CONTROL_ERROR);
}

// 8.1.1, 8.2, 8.3: malformed requests are stream errors of type PROTOCOL_ERROR; the
// connection goes on.
TEST_F(Http2Conformance, MalformedRequestsAreStreamErrors) {
  const std::pair<const char*, Fields> cases[] = {
      {"no :method", {{":scheme", "http"}, {":authority", "x"}, {":path", "/"}}},
      {"no :path", {{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}}},
      {"no :scheme", {{":method", "GET"}, {":authority", "x"}, {":path", "/"}}},
      {"empty :path",
       {{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", ""}}},
      {"unknown pseudo", {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":foo", "1"}}},
      {"pseudo after regular",
       {{":method", "GET"}, {":scheme", "http"}, {"x-a", "1"}, {":path", "/"}}},
      {"duplicate :path",
       {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":path", "/b"}}},
      {"upper-case name", {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"X-Up", "1"}}},
      {"connection",
       {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"connection", "close"}}},
      {"keep-alive",
       {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"keep-alive", "5"}}},
      {"transfer-encoding",
       {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"transfer-encoding", "chunked"}}},
      {"upgrade", {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"upgrade", "h2c"}}},
      {"te other than trailers",
       {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"te", "gzip"}}},
      {"response pseudo",
       {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":status", "200"}}},
  };
  RawH2 c(server.port());
  std::int32_t id = 1;
  for (const auto& [name, fields] : cases) {
    c.send_headers(id, fields);
    EXPECT_EQ(reset_code(c, id), NGHTTP2_PROTOCOL_ERROR) << name;
    id += 2;
  }
  c.send_headers(id, RawH2::get());  // still served
  EXPECT_TRUE(c.wait_for(NGHTTP2_HEADERS, id)) << "after the malformed requests";
}

// 8.1.1: DATA that does not add up to Content-Length makes the request malformed. (The
// handler is slow: one that answered first would end the stream before the DATA came.)
TEST_F(Http2Conformance, ContentLengthMismatchIsStreamError) {
  RawH2 c(server.port());
  Fields post = {{":method", "POST"},
                 {":scheme", "http"},
                 {":authority", "x"},
                 {":path", "/sleep"},
                 {"content-length", "10"}};
  c.send_headers(1, post, false);
  c.send_frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, "short");
  EXPECT_EQ(reset_code(c, 1), NGHTTP2_PROTOCOL_ERROR);
}

// 5.1.2: streams past SETTINGS_MAX_CONCURRENT_STREAMS are refused.
// RFC 9113 3.4: a connection that began as HTTP/2 (the preface's request line) but whose
// preface then goes wrong is a connection error, PROTOCOL_ERROR: GOAWAY and close, not
// an HTTP/1.1 400 to a client that speaks HTTP/2.
TEST(Http2Preface, ABadPrefaceAfterItsRequestLineGetsGoAwayProtocolError) {
  H2Server server([](Request&, ResponseWriter& w) { w.text("no\n"); });
  for (std::string_view bad :
       {"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\nGET / HTTP/1.1\r\n\r\n"}) {
    RawH2 c(server.port(), false);
    ASSERT_TRUE(c.send_raw(bad));
    std::optional<Frame> goaway = c.wait_for(NGHTTP2_GOAWAY, 0);
    ASSERT_TRUE(goaway) << "no GOAWAY for " << bad;
    ASSERT_GE(goaway->payload.size(), 8u);
    const std::uint32_t code = static_cast<std::uint8_t>(goaway->payload[4]) << 24 |
                               static_cast<std::uint8_t>(goaway->payload[5]) << 16 |
                               static_cast<std::uint8_t>(goaway->payload[6]) << 8 |
                               static_cast<std::uint8_t>(goaway->payload[7]);
    EXPECT_EQ(code, static_cast<std::uint32_t>(NGHTTP2_PROTOCOL_ERROR));
    EXPECT_FALSE(c.read_frame(std::chrono::milliseconds(2000))) << "the connection stays open";
    EXPECT_TRUE(c.closed);
  }
  // Not HTTP/2 from its first line: HTTP/1.1, answered as such.
  auto r = round_trip(server.port(), "PRI * HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

TEST(Http2Limits, StreamsPastTheLimitAreRefused) {
  ServerOptions o = quiet();
  o.http2_max_concurrent_streams = 2;
  H2Server server(hello(), o);
  RawH2 c(server.port());
  for (std::int32_t id : {1, 3, 5}) c.send_headers(id, RawH2::get("/sleep"));
  EXPECT_EQ(reset_code(c, 5), NGHTTP2_REFUSED_STREAM);
  EXPECT_TRUE(c.wait_for(NGHTTP2_HEADERS, 1));
}

// CVE-2023-44487: streams opened and reset in a loop end the connection (nghttp2's
// reset rate limit: a GOAWAY with an error) long before the burst is served; the server
// goes on serving others.
TEST(Http2Limits, RapidResetEndsTheConnection) {
  H2Server server(hello(), quiet());
  {
    RawH2 c(server.port());
    std::string burst;
    for (std::int32_t id = 1; id < 2 * 3000; id += 2) {
      burst += RawH2::frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, id,
                            c.block(RawH2::get()));
      burst += RawH2::frame(NGHTTP2_RST_STREAM, 0, id, u32(NGHTTP2_CANCEL));
    }
    c.send_raw(burst);
    std::optional<Frame> goaway = c.wait_for(NGHTTP2_GOAWAY);
    ASSERT_TRUE(goaway);
    EXPECT_NE(goaway->error_code(), static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));
    EXPECT_LT(be32(goaway->payload), 2u * 3000u);  // the last stream taken
  }
  H2Client client(server.port());
  std::int32_t id = client.submit("GET", "/");
  ASSERT_TRUE(client.run());
  EXPECT_EQ(client.responses[id].body, "hello");
}

// CONTINUATION flood (CVE-2024-27316 and kin): a header block that goes on in many
// CONTINUATION frames ends the connection instead of growing without bound.
TEST(Http2Limits, ContinuationFloodEndsTheConnection) {
  H2Server server(hello(), quiet());
  RawH2 c(server.port());
  c.send_frame(NGHTTP2_HEADERS, 0, 1, c.block(RawH2::get()));
  std::string filler = c.block({{"x-filler", std::string(100, 'f')}});
  std::string flood;
  for (int i = 0; i < 10000; ++i) flood += RawH2::frame(NGHTTP2_CONTINUATION, 0, 1, filler);
  c.send_raw(flood);
  bool goaway = false;
  for (std::optional<Frame> f; !goaway && (f = c.read_frame());) {
    EXPECT_NE(f->type, NGHTTP2_HEADERS) << "stream 1 was answered";
    goaway = f->type == NGHTTP2_GOAWAY;
  }
  EXPECT_TRUE(goaway || c.closed);
}

// A header block left open (HEADERS without END_HEADERS, then nothing) holds the
// connection only for read_header_timeout.
TEST(Http2Limits, OpenHeaderBlockTimesOut) {
  ServerOptions o = quiet();
  o.read_header_timeout = std::chrono::milliseconds(300);
  H2Server server(hello(), o);
  RawH2 c(server.port());
  c.send_frame(NGHTTP2_HEADERS, 0, 1, c.block(RawH2::get()));
  auto start = Clock::now();
  while (c.read_frame(std::chrono::milliseconds(5000))) {
  }
  EXPECT_TRUE(c.closed);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(3000));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(250));
}

// SETTINGS and PING floods: a client that makes the server queue acks it does not read
// is cut off (nghttp2's max_outbound_ack).
class Http2AckFlood : public ::testing::TestWithParam<std::uint8_t> {};

TEST_P(Http2AckFlood, WithoutReadingEndsTheConnection) {
  const std::uint8_t type = GetParam();  // PING or SETTINGS: each must be acked
  H2Server server(hello(), quiet());
  RawH2 c(server.port(), false);
  c.send_raw(RawH2::kPreface);
  // Huge windows, then responses the client does not read: the server's writes block.
  std::string settings = std::string("\x00\x04", 2) + u32(0x7fffffff);  // INITIAL_WINDOW_SIZE
  c.send_frame(NGHTTP2_SETTINGS, 0, 0, settings);
  c.send_frame(NGHTTP2_WINDOW_UPDATE, 0, 0, u32(0x7fffffff - 65535));
  for (std::int32_t id = 1; id < 16; id += 2) c.send_headers(id, RawH2::get("/big"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string flood;
  for (int i = 0; i < 20000; ++i) {
    flood += type == NGHTTP2_PING ? RawH2::frame(NGHTTP2_PING, 0, 0, "pingping")
                                  : RawH2::frame(NGHTTP2_SETTINGS, 0, 0, "");
  }
  c.send_raw(flood);
  std::size_t frames = 0;
  auto start = Clock::now();
  while (c.read_frame()) ++frames;
  EXPECT_TRUE(c.closed);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  // Far fewer than the 20000 acks and 8 * 2 MiB of DATA asked for.
  EXPECT_LT(frames, 20000u);
}
INSTANTIATE_TEST_SUITE_P(PingAndSettings, Http2AckFlood,
                         ::testing::Values(std::uint8_t{NGHTTP2_PING},
                                           std::uint8_t{NGHTTP2_SETTINGS}));

// A SETTINGS frame with more entries than anyone needs (nghttp2's max_settings, 32).
TEST(Http2Limits, OversizedSettingsFrameEndsTheConnection) {
  H2Server server(hello(), quiet());
  RawH2 c(server.port());
  std::string entries;
  for (int i = 0; i < 100; ++i) entries += std::string("\x00\x03", 2) + u32(100);
  c.send_frame(NGHTTP2_SETTINGS, 0, 0, entries);
  EXPECT_EQ(goaway_code(c), NGHTTP2_ENHANCE_YOUR_CALM);
}

}  // namespace
}  // namespace goro::http::test
