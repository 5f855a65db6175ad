// The middleware of examples/middleware, written on goro's public headers only: gzip
// compression and ETags with conditional GET, each a ResponseWriter wrapping the
// server's. Served through the real server code (httptest::record: HTTP/1.1 on an
// in-memory connection), and over HTTP/2 for the stream.
#include <gtest/gtest.h>

#include <zlib.h>

#include <chrono>
#include <string>

#include <goro/http/httptest.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/router.hpp>
#include <goro/scheduler/runtime.hpp>

#include "etag.hpp"
#include "gzip.hpp"

namespace {

namespace http = goro::http;
namespace httptest = goro::http::httptest;

std::string gunzip(std::string_view in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return "<inflateInit2 failed>";
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[4096];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  } while (rc == Z_OK);
  inflateEnd(&z);
  return rc == Z_STREAM_END ? out : "<not a whole gzip stream>";
}

std::string report() {
  std::string body;
  for (int i = 0; i < 300; ++i) body += "line " + std::to_string(i) + ": all is well\n";
  return body;
}

http::Handler router() {
  static http::Router* r = [] {
    auto* r = new http::Router;
    r->handle("GET /report", [](http::Request&, http::ResponseWriter& w) {
      w.header().set("ETag", "\"report-v1\"");
      w.text(report());
    });
    r->handle("GET /small", [](http::Request&, http::ResponseWriter& w) { w.text("tiny"); });
    r->handle("GET /png", [](http::Request&, http::ResponseWriter& w) {
      w.header().set("Content-Type", "image/png");
      w.write(report());
    });
    r->handle("GET /already", [](http::Request&, http::ResponseWriter& w) {
      w.header().set("Content-Encoding", "br");
      w.write(report());
    });
    r->handle("GET /stream", [](http::Request&, http::ResponseWriter& w) {
      for (int i = 0; i < 3; ++i) {
        w.write("event " + std::to_string(i) + "\n");
        w.flush();
      }
    });
    r->handle("GET /throws", [](http::Request&, http::ResponseWriter& w) {
      w.write(report());
      throw std::runtime_error("after writing, before any byte left");
    });
    r->handle("GET /page", [](http::Request& req, http::ResponseWriter& w) {
      w.header().set("Cache-Control", "max-age=60");
      w.text("page " + std::string(req.query("v").value_or("1")) + "\n");
    });
    return r;
  }();
  return [](http::Request& req, http::ResponseWriter& w) { (*r)(req, w); };
}

TEST(GzipMiddleware, CompressesForClientsThatAcceptIt) {
  http::Handler h = http::chain(router(), {example::gzip()});
  httptest::Recorded got =
      httptest::record(h, httptest::new_request("GET", "/report").header("Accept-Encoding", "gzip"));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.header("content-encoding"), "gzip");
  EXPECT_EQ(got.header("vary"), "Accept-Encoding");
  EXPECT_EQ(got.header("etag"), "W/\"report-v1\"") << "the bytes differ: the tag is weak";
  EXPECT_LT(got.body.size(), report().size() / 4);
  EXPECT_EQ(gunzip(got.body), report());
  // Content-Length, when the body came whole, is the compressed length.
  if (!got.chunked) {
    EXPECT_EQ(got.header("content-length"), std::to_string(got.body.size()));
  }
}

TEST(GzipMiddleware, LeavesAloneWhatItShouldNotTouch) {
  http::Handler h = http::chain(router(), {example::gzip()});
  // No Accept-Encoding, or gzip refused with q=0.
  for (std::string_view accept : {"", "gzip;q=0, identity", "br"}) {
    auto req = httptest::new_request("GET", "/report");
    if (!accept.empty()) req.header("Accept-Encoding", accept);
    httptest::Recorded got = httptest::record(h, req);
    EXPECT_EQ(got.header("content-encoding"), "") << accept;
    EXPECT_EQ(got.body, report()) << accept;
    EXPECT_EQ(got.header("vary"), "Accept-Encoding") << accept;
  }
  // Small bodies, compressed types, a handler's own encoding, a range request.
  for (std::string_view path : {"/small", "/png", "/already"}) {
    httptest::Recorded got =
        httptest::record(h, httptest::new_request("GET", path).header("Accept-Encoding", "gzip"));
    EXPECT_NE(got.header("content-encoding"), "gzip") << path;
  }
  httptest::Recorded ranged = httptest::record(
      h, httptest::new_request("GET", "/report").header("Accept-Encoding", "*").header("Range",
                                                                                        "bytes=0-9"));
  EXPECT_EQ(ranged.header("content-encoding"), "");
  httptest::Recorded star =
      httptest::record(h, httptest::new_request("GET", "/report").header("Accept-Encoding", "*"));
  EXPECT_EQ(star.header("content-encoding"), "gzip");
}

TEST(GzipMiddleware, AFlushSendsWhatIsCompressedAtOnce) {
  http::Handler h = http::chain(router(), {example::gzip()});
  httptest::Recorded got =
      httptest::record(h, httptest::new_request("GET", "/stream").header("Accept-Encoding", "gzip"));
  EXPECT_TRUE(got.flushed);
  EXPECT_TRUE(got.chunked);
  EXPECT_EQ(got.header("content-encoding"), "gzip");
  EXPECT_EQ(gunzip(got.body), "event 0\nevent 1\nevent 2\n");
}

// recover() drops the response through ResponseController, which finds the gzip writer's
// own discard first: no compressed bytes survive into the 500.
TEST(GzipMiddleware, ARecoveredPanicDropsTheHeldBytes) {
  http::Handler h = http::chain(router(), {http::recover([](std::string_view) {}), example::gzip()});
  httptest::Recorded got =
      httptest::record(h, httptest::new_request("GET", "/throws").header("Accept-Encoding", "gzip"));
  EXPECT_EQ(got.status, 500);
  EXPECT_EQ(got.body, "500 Internal Server Error\n");
}

TEST(EtagMiddleware, AnswersNotModifiedWhenTheClientHasTheBody) {
  http::Handler h = http::chain(router(), {example::etag()});
  httptest::Recorded first = httptest::record(h, httptest::new_request("GET", "/page"));
  ASSERT_EQ(first.status, 200);
  const std::string tag(first.header("etag"));
  ASSERT_EQ(tag.size(), 18u) << tag;  // "\"" + 16 hex digits + "\""
  EXPECT_EQ(first.body, "page 1\n");

  httptest::Recorded again =
      httptest::record(h, httptest::new_request("GET", "/page").header("If-None-Match", tag));
  EXPECT_EQ(again.status, 304);
  EXPECT_EQ(again.body, "");
  EXPECT_EQ(again.header("etag"), tag);
  EXPECT_EQ(again.header("cache-control"), "max-age=60");

  // Another body, another tag: the old one no longer matches.
  httptest::Recorded changed = httptest::record(
      h, httptest::new_request("GET", "/page?v=2").header("If-None-Match", tag));
  EXPECT_EQ(changed.status, 200);
  EXPECT_EQ(changed.body, "page 2\n");
  EXPECT_NE(changed.header("etag"), tag);

  // A list, a weak form, and "*" match too.
  for (std::string inm : {"\"x\", " + tag, "W/" + tag, std::string("*")}) {
    EXPECT_EQ(httptest::record(h, httptest::new_request("GET", "/page").header("If-None-Match", inm))
                  .status,
              304)
        << inm;
  }
}

TEST(EtagMiddleware, KeepsTheHandlersTagAndPassesStreamsAndOtherMethods) {
  http::Handler h = http::chain(router(), {example::etag()});
  httptest::Recorded own = httptest::record(
      h, httptest::new_request("GET", "/report").header("If-None-Match", "\"report-v1\""));
  EXPECT_EQ(own.status, 304);
  httptest::Recorded stream = httptest::record(h, httptest::new_request("GET", "/stream"));
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.flushed);
  EXPECT_EQ(stream.header("etag"), "");
  EXPECT_EQ(stream.body, "event 0\nevent 1\nevent 2\n");
  httptest::Recorded post = httptest::record(h, httptest::new_request("POST", "/page"));
  EXPECT_EQ(post.status, 405);
}

// Both, as goro-middleware chains them: each representation has its own tag, and a
// client gets 304 for the one it holds.
TEST(EtagMiddleware, OverGzipTagsEachRepresentation) {
  http::Handler h = http::chain(router(), {example::etag(), example::gzip()});
  httptest::Recorded zipped = httptest::record(
      h, httptest::new_request("GET", "/report").header("Accept-Encoding", "gzip"));
  httptest::Recorded plain = httptest::record(h, httptest::new_request("GET", "/report"));
  EXPECT_EQ(zipped.header("etag"), "W/\"report-v1\"");
  EXPECT_EQ(plain.header("etag"), "\"report-v1\"");
  EXPECT_EQ(gunzip(zipped.body), plain.body);
  httptest::Recorded again = httptest::record(h, httptest::new_request("GET", "/report")
                                                     .header("Accept-Encoding", "gzip")
                                                     .header("If-None-Match", "W/\"report-v1\""));
  EXPECT_EQ(again.status, 304);
  EXPECT_EQ(again.body, "");
}

}  // namespace
