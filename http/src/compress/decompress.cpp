// decompress_requests(): request bodies with a Content-Encoding decoded as the handler
// reads them (compress.hpp).
//
// Each coding of the Content-Encoding list is a DecodingBody standing in front of the
// body reader below it, the last coding applied outermost (it is undone first). A
// DecodingBody reads a piece of coded bytes into its buffer and decodes into the
// handler's buffer, never more than the limit allows, so neither the decoded body nor
// a decoder's output is ever held whole.
#include <goro/http/compress.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>

#include "access.hpp"
#include "compress/codec.hpp"

namespace goro::http {
namespace {

using detail::Coding;

constexpr int kUnsupportedMediaType = 415;
constexpr std::size_t kInputBuffer = 16 * 1024;
// More codings than this in one Content-Encoding is no client's doing.
constexpr std::size_t kMaxCodings = 4;
constexpr std::string_view kSupported = "gzip, deflate, br, zstd";
// How much of a refused body is read and dropped before the error reply (Go's server
// reads 256 KiB the same way). A client still sending when the reply comes may take the
// stream's end as a failure and never show the reply: curl 7.88 over HTTP/2 reports
// the RST_STREAM(NO_ERROR) that follows an early response as a stream error.
constexpr std::size_t kDrainLimit = 256 * 1024;

// Reads and drops up to kDrainLimit bytes of body.
void drain(BodyReader* body) {
  if (body == nullptr) return;
  char buf[4096];
  for (std::size_t total = 0; total < kDrainLimit;) {
    Result<std::size_t> n = body->read(buf, sizeof buf);
    if (!n || *n == 0) return;
    total += *n;
  }
}

class DecodingBody final : public BodyReader {
 public:
  // raw: the body as received, drained before an error reply.
  DecodingBody(BodyReader* source, BodyReader* raw, std::unique_ptr<detail::Decoder> decoder,
               Coding coding, std::size_t limit, Request& req, ResponseWriter& w)
      : source_(source),
        raw_(raw),
        decoder_(std::move(decoder)),
        coding_(coding),
        limit_(limit),
        req_(req),
        w_(w),
        input_(std::make_unique<char[]>(kInputBuffer)) {}

  Result<std::size_t> read(void* buf, std::size_t len) override {
    if (failure_) return failure_;
    if (finished_ || len == 0) return std::size_t{0};
    for (;;) {
      if (in_pos_ == in_len_ && !source_ended_) {
        Result<std::size_t> n = source_->read(input_.get(), kInputBuffer);
        if (!n) return n.error();
        in_pos_ = 0;
        in_len_ = *n;
        source_ended_ = *n == 0;
      }
      const std::string_view in(input_.get() + in_pos_, in_len_ - in_pos_);
      // One byte past the limit, to tell a body of exactly the limit from a larger one.
      const std::size_t room = std::min<std::size_t>(len, limit_ + 1 - produced_);
      const detail::Decoder::Step step = decoder_->decode(in, static_cast<char*>(buf), room);
      in_pos_ += step.consumed;
      produced_ += step.produced;
      if (step.error) return fail(status::bad_request, "corrupt " + name() + " data");
      if (produced_ > limit_) {
        return fail(status::payload_too_large,
                    "request body decodes to more than " + std::to_string(limit_) + " bytes");
      }
      if (step.produced > 0) return step.produced;
      const bool input_left = in_pos_ < in_len_;
      if (!input_left && source_ended_) {
        if (!step.done) return fail(status::bad_request, "truncated " + name() + " data");
        finished_ = true;
        return std::size_t{0};
      }
      // A decoder that takes input always makes progress; guard against one that would not.
      if (input_left && step.consumed == 0 && !step.done) {
        return fail(status::bad_request, "corrupt " + name() + " data");
      }
    }
  }

 private:
  std::string name() const { return std::string(detail::coding_name(coding_)); }

  // The read fails; the client hears why at once if the handler has not begun to answer.
  std::error_code fail(int code, const std::string& message) {
    failure_ = make_error_code(code == status::payload_too_large ? errc::body_too_large
                                                                 : errc::malformed_body);
    if (!w_.headers_sent() && w_.bytes_written() == 0) {
      drain(raw_);
      (void)detail::send_builtin_error(req_, w_, code, detail::default_error_body(code, message),
                                       message, "decompress");
      ResponseController(w_).finish_response();
    }
    return failure_;
  }

  BodyReader* source_;
  BodyReader* raw_;
  std::unique_ptr<detail::Decoder> decoder_;
  Coding coding_;
  std::size_t limit_;
  Request& req_;
  ResponseWriter& w_;
  std::unique_ptr<char[]> input_;
  std::size_t in_pos_ = 0, in_len_ = 0;
  std::size_t produced_ = 0;
  bool source_ended_ = false;
  bool finished_ = false;
  std::error_code failure_;
};

void refuse(Request& req, ResponseWriter& w, const std::string& message) {
  drain(req.body_reader());
  w.header().set("Accept-Encoding", kSupported);
  (void)detail::send_builtin_error(req, w, kUnsupportedMediaType,
                                   detail::default_error_body(kUnsupportedMediaType, message),
                                   message, "decompress");
}

}  // namespace

Middleware decompress_requests(DecompressOptions options) {
  return [options](Handler next) -> Handler {
    return [options, next = std::move(next)](Request& req, ResponseWriter& w) {
      // The codings in the order they were applied, from every Content-Encoding field.
      std::vector<Coding> codings;
      for (const HeaderField& f : req.headers()) {
        if (!iequals(f.name, "content-encoding")) continue;
        std::string_view list = f.value;
        while (!list.empty()) {
          const auto comma = list.find(',');
          std::string_view token = list.substr(0, comma);
          list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
          while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
          while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
          if (token.empty() || iequals(token, "identity")) continue;
          Coding c;
          if (!detail::coding_from_name(token, c)) {
            refuse(req, w, "unsupported Content-Encoding \"" + std::string(token.substr(0, 64)) + "\"");
            return;
          }
          codings.push_back(c);
        }
      }
      if (codings.size() > kMaxCodings) {
        refuse(req, w, "more than " + std::to_string(kMaxCodings) + " codings in Content-Encoding");
        return;
      }
      BodyReader* const original = req.body_reader();
      // identity alone, or no body to decode: nothing to undo.
      if (codings.empty() || original == nullptr || req.content_length() == 0) {
        next(req, w);
        return;
      }
      std::vector<std::unique_ptr<DecodingBody>> layers;
      BodyReader* top = original;
      for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
        std::unique_ptr<detail::Decoder> d = detail::make_decoder(*it);
        if (d == nullptr) {
          (void)send_error(req, w, status::service_unavailable, "cannot allocate a decoder");
          return;
        }
        layers.push_back(std::make_unique<DecodingBody>(top, original, std::move(d), *it,
                                                        options.max_decoded_size, req, w));
        top = layers.back().get();
      }
      // The handler sees the body as it is decoded: no coding, no known length.
      const std::span<const HeaderField> fields = req.headers();
      const std::int64_t length = req.content_length();
      std::vector<HeaderField> visible;
      visible.reserve(fields.size());
      for (const HeaderField& f : fields) {
        if (!iequals(f.name, "content-encoding") && !iequals(f.name, "content-length")) visible.push_back(f);
      }
      detail::RequestAccess::set_headers(req, visible, -1);
      req.set_body_reader(top);
      struct Restore {
        Request& req;
        BodyReader* body;
        std::span<const HeaderField> fields;
        std::int64_t length;
        ~Restore() {
          req.set_body_reader(body);
          detail::RequestAccess::set_headers(req, fields, length);
        }
      } restore{req, original, fields, length};
      next(req, w);
    };
  };
}

}  // namespace goro::http
