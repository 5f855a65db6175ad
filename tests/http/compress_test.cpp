// compress() and decompress_requests() against a real client, curl (which decodes gzip,
// br and zstd: curl -V lists them), over HTTP/1.1 and h2c, on 1 and 4 Ps; and the
// encoders and decoders themselves: a round trip through each, and a bomb.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include <goro/http/compress.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/router.hpp>
#include <goro/scheduler/runtime.hpp>

#include "compress/codec.hpp"
#include "curl_util.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using detail::Coding;

// A text that compresses as JSON does: repeated structure, varying values.
std::string text_body(std::size_t size) {
  std::string s;
  for (int i = 0; s.size() < size; ++i) {
    s += "{\"id\":" + std::to_string(i) + ",\"name\":\"user" + std::to_string(i * 7919 % 1000) +
         "\",\"active\":" + (i % 3 ? "true" : "false") + "},\n";
  }
  s.resize(size);
  return s;
}

const std::string kText = text_body(16 * 1024);

std::atomic<bool> g_second_event{false};

std::string encode(Coding c, const std::string& data, int level = 3) {
  auto e = detail::make_encoder(c, level);
  e->begin(data.size());
  std::string out;
  EXPECT_TRUE(e->encode(data, detail::EncodeMode::finish, out));
  return out;
}

const std::string& gzipped() {
  static const std::string coded = encode(Coding::gzip, kText);
  return coded;
}

Handler app() {
  Router r;
  r.handle("GET /text", [](Request&, ResponseWriter& w) {
    w.header().set("Content-Type", "text/plain; charset=utf-8");
    w.header().set("ETag", "\"v1\"");
    w.header().set("Content-Length", std::to_string(kText.size()));
    // In pieces, as a template renders.
    for (std::size_t i = 0; i < kText.size(); i += 1000) w.write(std::string_view(kText).substr(i, 1000));
  });
  r.handle("GET /json", [](Request&, ResponseWriter& w) { w.json(kText); });
  r.handle("GET /small", [](Request&, ResponseWriter& w) { w.text(kText.substr(0, 200)); });
  r.handle("GET /image", [](Request&, ResponseWriter& w) {
    w.header().set("Content-Type", "image/png");
    w.write(kText);
  });
  r.handle("GET /encoded", [](Request&, ResponseWriter& w) {
    w.header().set("Content-Type", "text/plain");
    w.header().set("Content-Encoding", "gzip");
    w.write(gzipped());
  });
  // Server-sent events: the second event waits until the client has the first.
  r.handle("GET /events", [](Request& req, ResponseWriter& w) {
    w.header().set("Content-Type", "text/event-stream");
    w.write("data: first\n\n");
    w.flush();
    for (int i = 0; i < 1000 && !g_second_event.load() && !req.client_gone(); ++i) {
      goro::sleep(std::chrono::milliseconds(10));
    }
    w.write("data: second\n\n");
  });
  // The decoded body's length and a checksum of it.
  r.handle("POST /upload", [](Request& req, ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (!body) return;  // decompress_requests answered
    std::uint64_t sum = 0;
    for (unsigned char c : *body) sum = sum * 131 + c;
    w.text(std::to_string(body->size()) + " " + std::to_string(sum) + " " +
           (req.has_header("content-encoding") ? "coded" : "plain"));
  });
  CompressOptions copts;
  DecompressOptions dopts;
  dopts.max_decoded_size = 1 << 20;
  return chain(r, {compress(copts), decompress_requests(dopts)});
}

std::string checksum_line(const std::string& body) {
  std::uint64_t sum = 0;
  for (unsigned char c : body) sum = sum * 131 + c;
  return std::to_string(body.size()) + " " + std::to_string(sum) + " plain";
}

std::string write_temp(const std::string& data) {
  char path[] = "/tmp/goro-compress-body-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  return path;
}

std::string header_of(const std::string& head, const std::string& name) {
  std::size_t at = 0;
  while ((at = head.find('\n', at)) != std::string::npos) {
    ++at;
    if (head.size() > at + name.size() && strncasecmp(head.c_str() + at, name.c_str(), name.size()) == 0 &&
        head[at + name.size()] == ':') {
      std::string v = head.substr(at + name.size() + 1, head.find('\r', at) - at - name.size() - 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      return v;
    }
  }
  return "";
}

// (Ps, HTTP/2)
class Compress : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  static ServerOptions options() {
    ServerOptions o;
    o.enable_h2c = true;
    return o;
  }
  TestServer server{app(), options(), std::get<0>(GetParam())};
  std::string proto() const {
    return std::get<1>(GetParam()) ? "--http2-prior-knowledge " : "--http1.1 ";
  }
  // The response head (-D) and the body as curl decoded it (--compressed).
  CurlOutput get(const std::string& path, const std::string& extra = "") {
    return run_curl(proto() + "--compressed -D /dev/stderr " + extra + " " + server.url(path));
  }
};

TEST_P(Compress, EachCodingRoundTripsThroughCurl) {
  for (const char* coding : {"gzip", "br", "zstd"}) {
    SCOPED_TRACE(coding);
    CurlOutput o = get("/text", std::string("-H 'Accept-Encoding: ") + coding + "'");
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, kText);
    EXPECT_EQ(header_of(o.err, "content-encoding"), coding);
    EXPECT_EQ(header_of(o.err, "vary"), "Accept-Encoding");
    // The handler's length is gone; the server may set the coded one.
    EXPECT_NE(header_of(o.err, "content-length"), std::to_string(kText.size()));
    EXPECT_EQ(header_of(o.err, "etag"), "W/\"v1\"");
  }
}

TEST_P(Compress, CurlsOwnAcceptEncodingGetsZstdFirst) {
  // curl --compressed offers "deflate, gzip, br, zstd", all weighed alike.
  CurlOutput o = get("/json");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, kText);
  EXPECT_EQ(header_of(o.err, "content-encoding"), "zstd");
  // A preference of the client's wins over the server's order.
  o = get("/json", "-H 'Accept-Encoding: gzip;q=1, br;q=0.5, zstd;q=0.2'");
  EXPECT_EQ(header_of(o.err, "content-encoding"), "gzip");
  EXPECT_EQ(o.out, kText);
}

TEST_P(Compress, RefusedCodingsLeaveTheBodyAloneButVary) {
  CurlOutput o = get("/json", "-H 'Accept-Encoding: gzip;q=0, br;q=0, zstd;q=0'");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, kText);
  EXPECT_EQ(header_of(o.err, "content-encoding"), "");
  EXPECT_EQ(header_of(o.err, "vary"), "Accept-Encoding");
  EXPECT_EQ(header_of(o.err, "content-length"), std::to_string(kText.size()));
}

TEST_P(Compress, SmallImagesEncodedAndRangesAreNotCompressed) {
  CurlOutput small = get("/small");
  EXPECT_EQ(small.out, kText.substr(0, 200));
  EXPECT_EQ(header_of(small.err, "content-encoding"), "");
  EXPECT_EQ(header_of(small.err, "content-length"), "200");
  EXPECT_EQ(header_of(small.err, "vary"), "Accept-Encoding");

  CurlOutput image = get("/image");
  EXPECT_EQ(image.out, kText);
  EXPECT_EQ(header_of(image.err, "content-encoding"), "");
  EXPECT_EQ(header_of(image.err, "vary"), "");

  // Coded by the handler already: not coded twice.
  CurlOutput encoded = get("/encoded");
  EXPECT_EQ(header_of(encoded.err, "content-encoding"), "gzip");
  EXPECT_EQ(encoded.out, kText);

  // The handler ignores the range and answers 200 in full: still not coded, since the
  // client asked for bytes of the uncoded body.
  CurlOutput range = get("/text", "-r 0-99");
  EXPECT_EQ(header_of(range.err, "content-encoding"), "");
  EXPECT_EQ(range.out, kText);

}

// A HEAD gets the head the GET would get: the same coding decision, Vary and weak tag;
// no length where the body would be coded, the plain length where it would not.
TEST_P(Compress, HeadAnswersAsGetWouldWithoutTheBody) {
  CurlOutput get_text = get("/text");
  CurlOutput head = run_curl(proto() + "--compressed -I " + server.url("/text"));
  ASSERT_EQ(head.status, 0) << head.err;
  EXPECT_EQ(header_of(head.out, "content-encoding"), "zstd");
  EXPECT_EQ(header_of(head.out, "content-encoding"), header_of(get_text.err, "content-encoding"));
  EXPECT_EQ(header_of(head.out, "vary"), "Accept-Encoding");
  EXPECT_EQ(header_of(head.out, "etag"), "W/\"v1\"");
  EXPECT_EQ(header_of(head.out, "content-length"), "");

  CurlOutput small = run_curl(proto() + "--compressed -I " + server.url("/small"));
  EXPECT_EQ(header_of(small.out, "content-encoding"), "");
  EXPECT_EQ(header_of(small.out, "content-length"), "200");
  EXPECT_EQ(header_of(small.out, "vary"), "Accept-Encoding");

  CurlOutput image = run_curl(proto() + "--compressed -I " + server.url("/image"));
  EXPECT_EQ(header_of(image.out, "content-encoding"), "");
  EXPECT_EQ(header_of(image.out, "vary"), "");

  CurlOutput plain = run_curl(proto() + "-I -H 'Accept-Encoding: identity' " + server.url("/text"));
  EXPECT_EQ(header_of(plain.out, "content-encoding"), "");
  EXPECT_EQ(header_of(plain.out, "content-length"), std::to_string(kText.size()));
  EXPECT_EQ(header_of(plain.out, "vary"), "Accept-Encoding");
}

// The first event reaches the client, coded, before the handler writes the second: the
// handler's flush pushed the encoder's output out.
TEST_P(Compress, FlushedEventsArriveCompressedAtOnce) {
  for (const char* coding : {"gzip", "br", "zstd"}) {
    SCOPED_TRACE(coding);
    g_second_event.store(false);
    const std::string cmd = "curl --silent --no-buffer --max-time 15 --compressed " + proto() +
                            "-D /dev/stdout -H 'Accept-Encoding: " + coding + "' " +
                            server.url("/events");
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    const int fd = fileno(p);
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got.find("data: first") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{fd, POLLIN, 0};
      if (poll(&pfd, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    const bool first_early = got.find("data: first") != std::string::npos;
    EXPECT_TRUE(first_early) << got;
    EXPECT_EQ(got.find("data: second"), std::string::npos);
    g_second_event.store(true);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
    pclose(p);
    EXPECT_EQ(header_of(got, "content-encoding"), coding);
    EXPECT_NE(got.find("data: first\n\ndata: second\n\n"), std::string::npos) << got;
  }
}

TEST_P(Compress, RequestBodiesAreDecodedForTheHandler) {
  for (Coding c : {Coding::gzip, Coding::deflate, Coding::br, Coding::zstd}) {
    const std::string name(detail::coding_name(c));
    SCOPED_TRACE(name);
    const std::string file = write_temp(encode(c, kText));
    CurlOutput o = run_curl(proto() + "--data-binary @" + file + " -H 'Content-Encoding: " + name +
                    "' " + server.url("/upload"));
    std::remove(file.c_str());
    EXPECT_EQ(o.out, checksum_line(kText));
  }
  // Two codings, gzip applied first.
  const std::string file = write_temp(encode(Coding::br, encode(Coding::gzip, kText)));
  CurlOutput o = run_curl(proto() + "--data-binary @" + file + " -H 'Content-Encoding: gzip, br' " +
                  server.url("/upload"));
  std::remove(file.c_str());
  EXPECT_EQ(o.out, checksum_line(kText));
}

TEST_P(Compress, RequestDecodingRefusesBombsCorruptionAndUnknownCodings) {
  // 64 MiB of zeros, a few KiB coded, against a 1 MiB limit.
  const std::string zeros(64 << 20, '\0');
  for (Coding c : {Coding::gzip, Coding::zstd, Coding::br}) {
    const std::string name(detail::coding_name(c));
    SCOPED_TRACE(name);
    const std::string file = write_temp(encode(c, zeros, 1));
    CurlOutput o = run_curl(proto() + "-D /dev/stderr --data-binary @" + file +
                    " -H 'Content-Encoding: " + name + "' " + server.url("/upload"));
    std::remove(file.c_str());
    EXPECT_NE(o.err.find(" 413"), std::string::npos) << o.err;
    EXPECT_NE(o.out.find("1048576"), std::string::npos) << o.out;
  }

  std::string corrupt = encode(Coding::gzip, kText);
  corrupt[corrupt.size() / 2] ^= 0x55;
  std::string file = write_temp(corrupt);
  CurlOutput o = run_curl(proto() + "-D /dev/stderr --data-binary @" + file +
                  " -H 'Content-Encoding: gzip' " + server.url("/upload"));
  std::remove(file.c_str());
  EXPECT_NE(o.err.find(" 400"), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("gzip"), std::string::npos) << o.out;

  std::string truncated = encode(Coding::zstd, kText);
  truncated.resize(truncated.size() - 10);
  file = write_temp(truncated);
  o = run_curl(proto() + "-D /dev/stderr --data-binary @" + file + " -H 'Content-Encoding: zstd' " +
           server.url("/upload"));
  std::remove(file.c_str());
  EXPECT_NE(o.err.find(" 400"), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("truncated"), std::string::npos) << o.out;

  o = run_curl(proto() + "-D /dev/stderr --data-binary hello -H 'Content-Encoding: compress' " +
           server.url("/upload"));
  EXPECT_NE(o.err.find(" 415"), std::string::npos) << o.err;
  EXPECT_EQ(header_of(o.err, "accept-encoding"), "gzip, deflate, br, zstd");
  EXPECT_NE(o.out.find("compress"), std::string::npos) << o.out;
}

INSTANTIATE_TEST_SUITE_P(PsAndProtocols, Compress,
                         ::testing::Combine(::testing::Values(1, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "P_" +
                                  (std::get<1>(info.param) ? "h2c" : "http1");
                         });

// Many clients at once through the pooled encoders, each body whole.
TEST(CompressConcurrent, ParallelCurlsEachGetTheirBody) {
  TestServer server(app(), {}, 8);
  std::vector<std::thread> clients;
  std::atomic<int> good{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      const char* coding = i % 3 == 0 ? "gzip" : i % 3 == 1 ? "br" : "zstd";
      std::string urls;
      for (int k = 0; k < 10; ++k) urls += " " + server.url("/text");
      CurlOutput o = run_curl(std::string("--compressed -H 'Accept-Encoding: ") + coding + "'" + urls);
      std::string all;
      for (int k = 0; k < 10; ++k) all += kText;
      if (o.out == all) good.fetch_add(1);
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), 8);
}

// A handler that throws after its body began to be coded: recover(), inside compress(),
// drops the response through the compressing writer, whose coded stream goes with it,
// and the client gets a plain, readable 500.
TEST(CompressRecover, AnAbandonedCodedBodyGivesWayToAPlain500) {
  Handler failing = [](Request&, ResponseWriter& w) {
    w.header().set("Content-Type", "text/plain");
    w.write(kText.substr(0, 4096));
    throw std::runtime_error("boom");
  };
  Handler app = chain(failing, {compress(), recover([](std::string_view) {})});
  httptest::Recorded r =
      httptest::record(app, httptest::new_request("GET", "/").header("Accept-Encoding", "gzip"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.header("content-encoding"), "");
  EXPECT_NE(r.body.find("500"), std::string::npos) << r.body;
}

// Compressing then decompressing gives back the input, for each coding, fed in pieces
// with flushes between some, and with the encoder reused from the pool.
TEST(Codec, RoundTripInPiecesWithFlushesAndReuse) {
  std::mt19937 rng(7);
  for (Coding c : {Coding::gzip, Coding::deflate, Coding::br, Coding::zstd}) {
    SCOPED_TRACE(detail::coding_name(c));
    detail::EncoderPool pool(c, 5, 4);
    for (int round = 0; round < 6; ++round) {
      std::string input = round == 0 ? std::string() : text_body(rng() % 200000);
      for (std::size_t i = 0; i < input.size(); i += 97) input[i] = static_cast<char>(rng());
      auto e = pool.take(0);
      ASSERT_NE(e, nullptr);
      std::string coded;
      for (std::size_t i = 0; i < input.size();) {
        const std::size_t n = std::min<std::size_t>(rng() % 5000 + 1, input.size() - i);
        ASSERT_TRUE(e->encode(std::string_view(input).substr(i, n),
                              rng() % 4 == 0 ? detail::EncodeMode::flush : detail::EncodeMode::more,
                              coded));
        i += n;
      }
      ASSERT_TRUE(e->encode({}, detail::EncodeMode::finish, coded));
      pool.give_back(std::move(e));

      auto d = detail::make_decoder(c);
      std::string decoded;
      std::string_view in = coded;
      char out[3000];
      bool done = false;
      for (int guard = 0; guard < 1000000 && !(done && in.empty()); ++guard) {
        const auto step = d->decode(in.substr(0, 777), out, sizeof out);
        ASSERT_FALSE(step.error);
        in.remove_prefix(step.consumed);
        decoded.append(out, step.produced);
        done = step.done;
        if (in.empty() && step.produced == 0) break;
      }
      EXPECT_TRUE(done);
      EXPECT_EQ(decoded, input);
    }
  }
}

}  // namespace
}  // namespace goro::http::test
