// The server writer's optional powers, found by ResponseController through writers that
// wrap it: 1xx informational responses, trailers, taking the connection over, deadlines,
// dropping or completing a response early; and the request body a middleware may put
// its own reader in front of. Over HTTP/1.1 (httptest::record: the real server code on an
// in-memory connection, and raw sockets) and over HTTP/2 (nghttp2's client).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <goro/http/errors.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/net/errors.hpp>

#include "h2_test_util.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

namespace ht = httptest;
using namespace std::chrono_literals;

// A middleware's writer that passes everything on and says what it wraps.
class Wrapping final : public ResponseWriter {
 public:
  explicit Wrapping(ResponseWriter& inner, bool say_what = true)
      : inner_(inner), say_what_(say_what) {}
  using ResponseWriter::write;
  Headers& header() override { return inner_.header(); }
  void set_status(int code) override { inner_.set_status(code); }
  int status() const override { return inner_.status(); }
  std::error_code write(std::string_view data) override { return inner_.write(data); }
  std::error_code flush() override { return inner_.flush(); }
  bool headers_sent() const override { return inner_.headers_sent(); }
  std::uint64_t bytes_written() const override { return inner_.bytes_written(); }
  ResponseWriter* unwrap() noexcept override { return say_what_ ? &inner_ : nullptr; }

 private:
  ResponseWriter& inner_;
  bool say_what_;
};

Handler hints_then_answer() {
  return [](Request&, ResponseWriter& w) {
    Wrapping outer(w);
    ResponseController rc(outer);
    Headers hints;
    hints.add("Link", "</style.css>; rel=preload; as=style");
    EXPECT_FALSE(rc.write_informational(103, hints));
    EXPECT_EQ(rc.write_informational(200, hints), errc::invalid_status);
    outer.text("page\n");
  };
}

TEST(ResponseController, EarlyHintsGoBeforeTheAnswer) {
  ht::Recorded r = ht::record(hints_then_answer(), ht::new_request("GET", "/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "page\n");
  EXPECT_EQ(r.raw.rfind("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
                        "HTTP/1.1 200 OK\r\n",
                        0),
            0u)
      << r.raw;
  // Not to an HTTP/1.0 client, which does not expect them.
  ht::Recorded old = ht::record(hints_then_answer(), ht::new_request("GET", "/").version(1, 0));
  EXPECT_EQ(old.raw.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << old.raw;
}

Handler with_trailer() {
  return [](Request&, ResponseWriter& w) {
    ResponseController rc(w);
    Headers* trailer = rc.trailer();
    ASSERT_NE(trailer, nullptr);
    w.write("body bytes");
    trailer->set("X-Checksum", "c0ffee");
  };
}

TEST(ResponseController, TrailersFollowAChunkedBody) {
  ht::Recorded r = ht::record(with_trailer(), ht::new_request("GET", "/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.body, "body bytes");
  EXPECT_NE(r.raw.find("\r\n0\r\nX-Checksum: c0ffee\r\n\r\n"), std::string::npos) << r.raw;
  // HTTP/1.0 has no chunked framing, so no trailer section: the body ends with the close.
  ht::Recorded old = ht::record(with_trailer(), ht::new_request("GET", "/").version(1, 0));
  EXPECT_EQ(old.body, "body bytes");
  EXPECT_EQ(old.raw.find("c0ffee"), std::string::npos) << old.raw;
}

TEST(ResponseController, AWrapperThatHidesWhatItWrapsHidesThePowers) {
  ht::Recorded r = ht::record(
      [](Request&, ResponseWriter& w) {
        Wrapping opaque(w, false);
        ResponseController rc(opaque);
        EXPECT_EQ(rc.trailer(), nullptr);
        EXPECT_EQ(rc.write_informational(103, {}), errc::not_supported);
        EXPECT_EQ(rc.set_read_deadline(net::deadline_after(1s)), errc::not_supported);
        EXPECT_EQ(rc.take_over().error(), errc::not_supported);
        EXPECT_FALSE(rc.discard_response());
        opaque.text("still answers\n");
      },
      ht::new_request("GET", "/"));
  EXPECT_EQ(r.body, "still answers\n");
}

TEST(ResponseController, DiscardDropsWhatIsBufferedAndFinishAnswersNow) {
  ht::Recorded r = ht::record(
      [](Request&, ResponseWriter& w) {
        Wrapping outer(w);
        outer.header().set("X-Kept", "1");
        outer.header().set("Content-Type", "application/json");
        outer.write("{\"partial\":");
        ResponseController rc(outer);
        EXPECT_TRUE(rc.discard_response());
        outer.text("replaced\n", 502);
        EXPECT_FALSE(rc.finish_response());
        EXPECT_EQ(outer.write("late"), errc::response_finished);
        EXPECT_FALSE(rc.discard_response()) << "the head has gone";
      },
      ht::new_request("GET", "/"));
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.header("x-kept"), "1");
  EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.body, "replaced\n");
  EXPECT_TRUE(r.complete);
}

// A handler's read deadline ends a body read waiting for a client that sends nothing;
// the connection is answered and closed, the server goes on.
TEST(ResponseController, AReadDeadlineEndsAWaitingBodyRead) {
  TestServer server(
      [](Request& req, ResponseWriter& w) {
        ResponseController rc(w);
        ASSERT_FALSE(rc.set_read_deadline(net::deadline_after(50ms)));
        char buf[16];
        const auto start = std::chrono::steady_clock::now();
        Result<std::size_t> n = req.read(buf, sizeof buf);  // "abc", which came with the head
        while (n && *n > 0) n = req.read(buf, sizeof buf);
        const auto waited = std::chrono::steady_clock::now() - start;
        EXPECT_FALSE(n);
        if (!n) {
          EXPECT_TRUE(net::is_timeout(n.error())) << n.error().message();
        }
        EXPECT_LT(waited, 2s);
        w.text("gave up\n", 400);
      },
      ServerOptions{}, 2);
  RawConn c(server.port());
  ASSERT_TRUE(c.send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, "gave up\n");
}

// take_over through a wrapper: the handler speaks its own protocol on the connection,
// starting with the bytes the client sent past the request.
TEST(ResponseController, TakingTheConnectionOver) {
  TestServer server(
      [](Request&, ResponseWriter& w) {
        Wrapping outer(w);
        Result<TakenConnection> taken = ResponseController(outer).take_over();
        ASSERT_TRUE(taken) << taken.error().message();
        EXPECT_EQ(ResponseController(outer).take_over().error(), errc::cannot_take_over);
        std::string said = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n\r\n" + taken->early;
        char buf[64];
        Result<std::size_t> n = taken->stream->read(buf, sizeof buf);
        if (n) said.append(buf, *n);
        EXPECT_TRUE(taken->stream->write(said.data(), said.size()));
        EXPECT_EQ(outer.write("x"), errc::response_finished);
      },
      ServerOptions{}, 2);
  RawConn c(server.port());
  ASSERT_TRUE(c.send("GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nearly"));
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(c.send("-later"));
  std::string got;
  while (got.find("later") == std::string::npos) {
    char buf[256];
    ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_EQ(got, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n\r\nearly-later");
}

// A middleware's own body reader: a limit in front of the server's.
class Capped final : public BodyReader {
 public:
  Capped(BodyReader* real, std::size_t cap) : real_(real), left_(cap) {}
  BodyReader* real() const noexcept { return real_; }
  Result<std::size_t> read(void* buf, std::size_t len) override {
    if (left_ == 0) return make_error_code(errc::body_too_large);
    Result<std::size_t> n = real_->read(buf, std::min(len, left_));
    if (n) left_ -= *n;
    return n;
  }

 private:
  BodyReader* real_;
  std::size_t left_;
};

TEST(RequestBody, MiddlewareMayStandItsOwnReaderInFront) {
  Handler capped = [](Request& req, ResponseWriter& w) {
    Capped cap(req.body_reader(), 4);
    req.set_body_reader(&cap);
    Result<std::string> body = req.body();
    req.set_body_reader(cap.real());
    w.text(body ? *body : body.error().message());
  };
  EXPECT_EQ(ht::record(capped, ht::new_request("POST", "/", "abc")).body, "abc");
  EXPECT_EQ(ht::record(capped, ht::new_request("POST", "/", "abcdefgh")).body,
            make_error_code(errc::body_too_large).message());
}

// Over HTTP/2: early hints and trailers are frames of their own; the connection cannot be
// taken over.
TEST(ResponseController, OverHttp2) {
  H2Server server([](Request&, ResponseWriter& w) {
    ResponseController rc(w);
    EXPECT_EQ(rc.take_over().error(), errc::not_supported);
    Headers hints;
    hints.add("Link", "</app.js>; rel=preload");
    EXPECT_FALSE(rc.write_informational(103, hints));
    w.write("h2 body");
    rc.trailer()->set("X-Checksum", "beef");
  });
  H2Client client(server.port());
  const std::int32_t id = client.submit("GET", "/");
  ASSERT_TRUE(client.run());
  const H2Response& r = client.responses[id];
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.reset, 0u);
  EXPECT_EQ(r.body, "h2 body");
  EXPECT_EQ(r.headers.at("link"), "</app.js>; rel=preload");
  EXPECT_EQ(r.headers.at("x-checksum"), "beef");
}

}  // namespace
}  // namespace goro::http::test
