// compress(): a ResponseWriter around the handler's that codes the body (compress.hpp).
//
// The writer is in one of five states. undecided: it holds the body's first bytes
// (below min_size) while it cannot yet tell whether to compress. plain: the body passes
// through. coding: the body goes through an encoder taken from the coding's pool, its
// output written to the writer below as it comes. withheld: a HEAD's body that a GET
// would have coded: the head says so (Content-Encoding, no Content-Length), the bytes
// go nowhere, and no encoder is taken. finished: the body has ended.
#include <goro/http/compress.hpp>

#include <charconv>
#include <memory>
#include <string_view>
#include <vector>

#include <goro/http/content_coding.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>

#include "access.hpp"
#include "compress/codec.hpp"

namespace goro::http {
namespace {

using detail::Coding;
using detail::EncodeMode;
using detail::EncoderPool;

std::string_view trim(std::string_view s) noexcept {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

bool ends_with_nocase(std::string_view s, std::string_view suffix) noexcept {
  return s.size() >= suffix.size() && iequals(s.substr(s.size() - suffix.size()), suffix);
}

// What every request of one compress() shares: the options, read-only, and the pools.
struct Settings {
  CompressOptions options;
  std::vector<std::string_view> offered;  // views of options.encodings
  std::vector<std::unique_ptr<EncoderPool>> pools;  // parallel to offered

  explicit Settings(CompressOptions o) : options(std::move(o)) {
    for (const std::string& name : options.encodings) {
      Coding c;
      if (!detail::coding_from_name(name, c)) continue;
      const int level = c == Coding::br     ? options.brotli_level
                        : c == Coding::zstd ? options.zstd_level
                                            : options.gzip_level;
      offered.push_back(name);
      pools.push_back(std::make_unique<EncoderPool>(c, level, options.pool_size));
    }
  }

  bool compressible(std::string_view content_type) const noexcept {
    const std::string_view type = trim(content_type.substr(0, content_type.find(';')));
    if (type.empty()) return false;
    for (const std::string& t : options.types) {
      const std::string_view entry(t);
      if (entry.size() > 2 && entry.ends_with("/*")) {
        if (type.size() > entry.size() - 1 && iequals(type.substr(0, entry.size() - 1),
                                                      entry.substr(0, entry.size() - 1)))
          return true;
      } else if (entry.starts_with('+')) {
        if (ends_with_nocase(type, entry)) return true;
      } else if (iequals(type, entry)) {
        return true;
      }
    }
    return false;
  }
};

class CompressWriter final : public ResponseWriter,
                             public ResponseDiscarder,
                             public ResponseFinisher,
                             public ConnectionTaker {
 public:
  // pool: the negotiated coding's, nullptr when the client accepts none. head: the
  // request is a HEAD, answered as a GET would be, without the body.
  CompressWriter(const Settings& settings, EncoderPool* pool, ResponseWriter& inner, bool head)
      : settings_(settings), pool_(pool), inner_(inner), head_(head) {}
  ~CompressWriter() override {
    if (pool_ != nullptr) pool_->give_back(std::move(encoder_));
  }

  using ResponseWriter::write;
  Headers& header() override { return inner_.header(); }
  void set_status(int code) override { inner_.set_status(code); }
  int status() const override { return inner_.status(); }
  bool headers_sent() const override { return inner_.headers_sent(); }
  std::uint64_t bytes_written() const override { return accepted_; }
  ResponseWriter* unwrap() noexcept override { return &inner_; }

  std::error_code write(std::string_view data) override {
    accepted_ += data.size();
    switch (state_) {
      case State::undecided:
        held_.append(data);
        if (!decide(Moment::write)) return {};
        return pass_held();
      case State::plain: return inner_.write(data);
      case State::coding: return encode(data, EncodeMode::more);
      case State::withheld: return {};
      case State::finished: return make_error_code(errc::response_finished);
    }
    return {};
  }

  std::error_code flush() override {
    if (state_ == State::undecided) {
      decide(Moment::flush);
      if (std::error_code ec = pass_held()) return ec;
    }
    if (state_ == State::coding) {
      if (std::error_code ec = encode({}, EncodeMode::flush)) return ec;
    }
    return inner_.flush();
  }

  // The handler returned: the held bytes go out, or the coded stream ends.
  std::error_code finish() {
    if (state_ == State::undecided) {
      decide(Moment::finish);
      if (std::error_code ec = pass_held()) return ec;
    }
    std::error_code ec;
    if (state_ == State::coding) ec = encode({}, EncodeMode::finish);
    // The head goes now, as a streamed one: a GET's coded length is not known here.
    if (state_ == State::withheld) ec = inner_.flush();
    state_ = State::finished;
    if (pool_ != nullptr) pool_->give_back(std::move(encoder_));
    return ec;
  }

  bool discard_response() override {
    if (!ResponseController(inner_).discard_response()) return false;
    held_.clear();
    if (pool_ != nullptr) pool_->give_back(std::move(encoder_));
    state_ = State::undecided;
    accepted_ = 0;
    return true;
  }

  std::error_code finish_response() override {
    if (std::error_code ec = finish()) return ec;
    return ResponseController(inner_).finish_response();
  }

  // A body that has not begun (a WebSocket's 101) may hand the connection over; once
  // bytes went into the coding, raw bytes after them would corrupt it.
  Result<TakenConnection> take_over() override {
    if (state_ != State::undecided || !held_.empty()) return make_error_code(errc::cannot_take_over);
    state_ = State::plain;
    return ResponseController(inner_).take_over();
  }

 private:
  enum class State { undecided, plain, coding, withheld, finished };
  enum class Moment { write, flush, finish };

  // Settles the state when it can be; false while the body's size must still be seen.
  bool decide(Moment moment) {
    Headers& h = inner_.header();
    const int code = inner_.status();
    if (code < 200 || code == status::no_content || code == status::partial_content ||
        code == status::not_modified || h.has("content-encoding") || h.has("content-range") ||
        !settings_.compressible(h.get("content-type"))) {
      state_ = State::plain;
      return true;
    }
    std::uint64_t length = 0;
    const std::string_view declared = h.get("content-length");
    const bool has_length =
        !declared.empty() &&
        std::from_chars(declared.data(), declared.data() + declared.size(), length).ec == std::errc{};
    const std::size_t min = settings_.options.min_size;
    if (!has_length && moment == Moment::write && held_.size() < min) return false;
    detail::add_vary(h, "Accept-Encoding");
    const bool small = has_length ? length < min : moment == Moment::finish && held_.size() < min;
    if (pool_ == nullptr || small) {
      state_ = State::plain;
      return true;
    }
    if (!head_) {
      encoder_ = pool_->take(has_length ? length : moment == Moment::finish ? held_.size() : 0);
      if (encoder_ == nullptr) {
        state_ = State::plain;
        return true;
      }
    }
    h.set("Content-Encoding", detail::coding_name(pool_->coding()));
    h.remove("Content-Length");
    const std::string_view etag = h.get("etag");
    if (etag.starts_with('"')) h.set("ETag", "W/" + std::string(etag));
    state_ = head_ ? State::withheld : State::coding;
    return true;
  }

  // After decide(): the held bytes into the chosen path.
  std::error_code pass_held() {
    if (held_.empty()) return {};
    std::string held = std::move(held_);
    held_.clear();
    if (state_ == State::withheld) return {};
    if (state_ == State::coding) return encode(held, EncodeMode::more);
    return inner_.write(held);
  }

  std::error_code encode(std::string_view data, EncodeMode mode) {
    out_.clear();
    if (!encoder_->encode(data, mode, out_)) {
      state_ = State::finished;
      return std::make_error_code(std::errc::not_enough_memory);
    }
    if (out_.empty()) return {};
    return inner_.write(out_);
  }

  const Settings& settings_;
  EncoderPool* pool_;
  ResponseWriter& inner_;
  const bool head_;
  State state_ = State::undecided;
  std::string held_;
  std::string out_;
  std::unique_ptr<detail::Encoder> encoder_;
  std::uint64_t accepted_ = 0;
};

}  // namespace

Middleware compress(CompressOptions options) {
  auto settings = std::make_shared<const Settings>(std::move(options));
  return [settings](Handler next) -> Handler {
    return [settings, next = std::move(next)](Request& req, ResponseWriter& w) {
      // A range names bytes of the uncoded body.
      if (req.has_header("range")) {
        next(req, w);
        return;
      }
      EncoderPool* pool = nullptr;
      const std::string_view chosen =
          negotiate_encoding(req.header("accept-encoding"), settings->offered);
      for (std::size_t i = 0; i < settings->offered.size(); ++i) {
        if (!chosen.empty() && settings->offered[i].data() == chosen.data()) pool = settings->pools[i].get();
      }
      CompressWriter writer(*settings, pool, w, req.method() == "HEAD");
      next(req, writer);
      writer.finish();
    };
  };
}

}  // namespace goro::http
