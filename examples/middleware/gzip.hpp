// gzip.hpp — response compression as ordinary middleware, on goro's public headers
// only: a ResponseWriter that wraps the server's and compresses what the handler writes.
//
//   http::Handler app = http::chain(router, {example::gzip()});
//
// A response is compressed when the client accepts gzip (Accept-Encoding, q > 0), the
// request is not HEAD and asks for no range, the status allows a body, the handler set
// no Content-Encoding of its own, its Content-Type is not one that is compressed already
// (images, video, archives), and the body reaches min_size before the handler returns
// or flushes. Then Content-Length goes (the length changes), Content-Encoding: gzip and
// Vary: Accept-Encoding are set, and a strong ETag becomes weak (the bytes differ from
// those it names). A smaller body goes out as it was. A flush sends what is compressed
// so far at once (Z_SYNC_FLUSH), so a stream of events stays a stream.
//
// The writer implements one power itself, ResponseDiscarder: bytes it holds back must be
// dropped with the response (recover() answering 500), not only those below it. The
// others (deadlines, trailers, 1xx) it leaves to the server's writer, found through
// unwrap(). goro's own compression middleware is http::compress() (<goro/http/compress.hpp>,
// with brotli and zstd, pooled encoders and request decoding); this one shows that
// middleware of that kind needs nothing but public API.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include <goro/http/middleware.hpp>
#include <goro/http/response_controller.hpp>

namespace example {

struct GzipOptions {
  std::size_t min_size = 256;  // smaller bodies are sent as they are
  int level = Z_DEFAULT_COMPRESSION;
};

namespace gzip_detail {

namespace http = goro::http;

inline bool ascii_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y + 32);
    if (x != y) return false;
  }
  return true;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether Accept-Encoding accepts gzip: listed (or "*") with a q-value above zero.
inline bool accepts_gzip(std::string_view header) {
  bool star = false, gzip = false, gzip_listed = false;
  while (!header.empty()) {
    std::size_t comma = header.find(',');
    std::string_view item = trim(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    std::string_view coding = trim(item.substr(0, item.find(';')));
    bool zero = false;
    if (std::size_t q = item.find("q="); q != std::string_view::npos) {
      std::string_view v = trim(item.substr(q + 2));
      zero = !v.empty() && v[0] == '0' && v.find_first_not_of("0.", 0) == std::string_view::npos;
    }
    if (ascii_iequals(coding, "gzip") || ascii_iequals(coding, "x-gzip")) {
      gzip_listed = true;
      gzip = !zero;
    } else if (coding == "*") {
      star = !zero;
    }
  }
  return gzip || (!gzip_listed && star);
}

// Types whose bodies are compressed already.
inline bool compressed_type(std::string_view type) {
  type = trim(type.substr(0, type.find(';')));
  auto starts = [&](std::string_view p) { return type.substr(0, p.size()) == p; };
  if (type == "image/svg+xml") return false;
  return starts("image/") || starts("video/") || starts("audio/") || type == "application/zip" ||
         type == "application/gzip" || type == "application/x-gzip" ||
         type == "application/zstd" || type == "font/woff2";
}

class GzipWriter final : public http::ResponseWriter, public http::ResponseDiscarder {
 public:
  GzipWriter(http::ResponseWriter& inner, const GzipOptions& options)
      : inner_(inner), options_(options) {}
  ~GzipWriter() override {
    if (started_) deflateEnd(&z_);
  }

  using http::ResponseWriter::write;
  http::Headers& header() override { return inner_.header(); }
  void set_status(int code) override { inner_.set_status(code); }
  int status() const override { return inner_.status(); }
  bool headers_sent() const override { return inner_.headers_sent(); }
  std::uint64_t bytes_written() const override { return written_; }
  http::ResponseWriter* unwrap() noexcept override { return &inner_; }

  std::error_code write(std::string_view data) override {
    written_ += data.size();
    if (passthrough_) return inner_.write(data);
    if (!started_) {
      held_.append(data);
      if (held_.size() < options_.min_size) return {};
      if (!start()) return release_held();
      const std::string held = std::exchange(held_, std::string());
      return deflate_out(held, Z_NO_FLUSH);
    }
    return deflate_out(data, Z_NO_FLUSH);
  }

  std::error_code flush() override {
    if (!passthrough_ && !started_) {
      // The handler wants its bytes out: decide with what there is.
      if (held_.empty() || !start()) {
        if (std::error_code ec = release_held()) return ec;
        return inner_.flush();
      }
      std::string data = std::exchange(held_, std::string());
      if (std::error_code ec = deflate_out(data, Z_SYNC_FLUSH)) return ec;
      return inner_.flush();
    }
    if (started_) {
      if (std::error_code ec = deflate_out({}, Z_SYNC_FLUSH)) return ec;
    }
    return inner_.flush();
  }

  bool discard_response() override {
    if (!http::ResponseController(inner_).discard_response()) return false;
    held_.clear();
    written_ = 0;
    if (started_) deflateEnd(&z_);
    started_ = passthrough_ = false;
    return true;
  }

  // The handler returned: the last compressed bytes, or the small body as it was.
  std::error_code close() {
    if (started_) return deflate_out({}, Z_FINISH);
    if (!passthrough_) return release_held();
    return {};
  }

  // Whether this request may get a compressed answer at all.
  static bool wanted(const http::Request& req) {
    return req.method() != "HEAD" && !req.has_header("range") &&
           accepts_gzip(req.header("accept-encoding"));
  }

 private:
  // Decides to compress (true: headers set, stream ready) or not.
  bool start() {
    http::Headers& h = inner_.header();
    const int status = inner_.status();
    if (inner_.headers_sent() || status < 200 || status == 204 || status == 304 || status == 206 ||
        h.has("content-encoding") || compressed_type(h.get("content-type"))) {
      return false;
    }
    if (deflateInit2(&z_, options_.level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      return false;
    }
    started_ = true;
    h.remove("Content-Length");
    h.set("Content-Encoding", "gzip");
    h.add("Vary", "Accept-Encoding");
    if (std::string_view etag = h.get("etag"); !etag.empty() && etag.substr(0, 2) != "W/") {
      h.set("ETag", "W/" + std::string(etag));
    }
    return true;
  }

  std::error_code release_held() {
    passthrough_ = true;
    std::string data = std::exchange(held_, std::string());
    return data.empty() ? std::error_code() : inner_.write(data);
  }

  std::error_code deflate_out(std::string_view data, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z_.avail_in = static_cast<uInt>(data.size());
    char out[16 * 1024];
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out);
      z_.avail_out = sizeof out;
      deflate(&z_, flush);
      const std::size_t n = sizeof out - z_.avail_out;
      if (n > 0) {
        if (std::error_code ec = inner_.write(std::string_view(out, n))) return ec;
      }
    } while (z_.avail_out == 0);
    return {};
  }

  http::ResponseWriter& inner_;
  const GzipOptions options_;
  z_stream z_{};
  std::string held_;  // written, not yet compressed or sent (below min_size)
  std::uint64_t written_ = 0;
  bool started_ = false;
  bool passthrough_ = false;
};

}  // namespace gzip_detail

inline goro::http::Middleware gzip(GzipOptions options = {}) {
  namespace http = goro::http;
  return [options](http::Handler next) -> http::Handler {
    return [options, next = std::move(next)](http::Request& req, http::ResponseWriter& w) {
      if (!gzip_detail::GzipWriter::wanted(req)) {
        // Whether the answer varies by encoding does not depend on this request.
        w.header().add("Vary", "Accept-Encoding");
        next(req, w);
        return;
      }
      gzip_detail::GzipWriter gz(w, options);
      next(req, gz);
      gz.close();
    };
  };
}

}  // namespace example
