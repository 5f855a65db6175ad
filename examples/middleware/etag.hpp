// etag.hpp — ETags and conditional GET as ordinary middleware, on goro's public headers
// only: a ResponseWriter that holds the handler's response, names its body with an ETag,
// and answers 304 Not Modified when the client has that body already.
//
//   http::Handler app = http::chain(router, {example::etag()});
//
// For GET and HEAD answered 200: the body is held (up to max_size), its ETag computed
// (a 64-bit FNV-1a hash of the bytes, strong), unless the handler set one itself; then
// a request whose If-None-Match names it gets 304 with the ETag and the caching fields
// (Cache-Control, Expires, Vary, Content-Location, Date) and no body, every other one the
// response as the handler made it. A handler that flushes streams its response: it is
// passed on as it goes, without an ETag. So is a body past max_size.
//
// A client that saves bandwidth this way still costs the handler's work: this is the
// shape of a response cache's conditional half; the other half (keeping the response)
// would hold the same writer's output.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <goro/http/middleware.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>

namespace example {

struct EtagOptions {
  std::size_t max_size = 1 << 20;  // larger bodies go out as they come, without an ETag
};

namespace etag_detail {

namespace http = goro::http;

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether If-None-Match names etag ("*", or the tag in its list; weak comparison, as
// RFC 9110 13.1.2 asks of If-None-Match).
inline bool none_match_hits(std::string_view header, std::string_view etag) {
  auto opaque = [](std::string_view t) { return t.substr(0, 2) == "W/" ? t.substr(2) : t; };
  while (!header.empty()) {
    std::size_t comma = header.find(',');
    std::string_view item = trim(header.substr(0, comma));
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    if (item == "*" || (!item.empty() && opaque(item) == opaque(etag))) return true;
  }
  return false;
}

inline std::string etag_of(std::string_view body) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : body) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char text[24];
  std::snprintf(text, sizeof text, "\"%016llx\"", static_cast<unsigned long long>(h));
  return text;
}

class EtagWriter final : public http::ResponseWriter, public http::ResponseDiscarder {
 public:
  EtagWriter(http::ResponseWriter& inner, const EtagOptions& options)
      : inner_(inner), options_(options) {}

  using http::ResponseWriter::write;
  http::Headers& header() override { return inner_.header(); }
  void set_status(int code) override { inner_.set_status(code); }
  int status() const override { return inner_.status(); }
  bool headers_sent() const override { return inner_.headers_sent(); }
  std::uint64_t bytes_written() const override { return held_.size() + passed_; }
  http::ResponseWriter* unwrap() noexcept override { return &inner_; }

  std::error_code write(std::string_view data) override {
    if (streaming_) {
      passed_ += data.size();
      return inner_.write(data);
    }
    held_.append(data);
    if (held_.size() > options_.max_size) return stream();
    return {};
  }

  std::error_code flush() override {
    if (std::error_code ec = stream()) return ec;
    return inner_.flush();
  }

  bool discard_response() override {
    if (streaming_ || !http::ResponseController(inner_).discard_response()) return false;
    held_.clear();
    return true;
  }

  // The handler returned with its response held: 304 or the response itself.
  std::error_code close(std::string_view if_none_match) {
    if (streaming_) return {};
    http::Headers& h = inner_.header();
    if (inner_.status() == http::status::ok && !inner_.headers_sent()) {
      if (!h.has("etag")) h.set("ETag", etag_of(held_));
      if (!if_none_match.empty() && none_match_hits(if_none_match, h.get("etag"))) {
        // RFC 9110 15.4.5: only the fields a cache needs to update its copy.
        for (std::string_view name :
             {"Content-Type", "Content-Length", "Content-Encoding", "Content-Language",
              "Content-Range", "Last-Modified"}) {
          h.remove(name);
        }
        inner_.set_status(http::status::not_modified);
        return {};
      }
    }
    return stream();
  }

 private:
  // From now on the response passes as it comes: what is held goes first.
  std::error_code stream() {
    if (streaming_) return {};
    streaming_ = true;
    passed_ = held_.size();
    std::string held = std::move(held_);
    held_.clear();
    return held.empty() ? std::error_code() : inner_.write(held);
  }

  http::ResponseWriter& inner_;
  const EtagOptions options_;
  std::string held_;
  std::uint64_t passed_ = 0;  // bytes passed on while streaming
  bool streaming_ = false;
};

}  // namespace etag_detail

inline goro::http::Middleware etag(EtagOptions options = {}) {
  namespace http = goro::http;
  return [options](http::Handler next) -> http::Handler {
    return [options, next = std::move(next)](http::Request& req, http::ResponseWriter& w) {
      if (req.method() != "GET" && req.method() != "HEAD") {
        next(req, w);
        return;
      }
      etag_detail::EtagWriter tagged(w, options);
      next(req, tagged);
      tagged.close(req.header("if-none-match"));
    };
  };
}

}  // namespace example
