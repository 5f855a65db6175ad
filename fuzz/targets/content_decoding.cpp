// content_decoding: bytes through each content-coding decoder (http/src/compress) with a
// small output limit, whole and in pieces, and through decompress_requests() as a
// request body; and the same bytes through each encoder and back.
//
// Settings byte: bits 0-1 the coding (gzip, deflate, br, zstd), bits 2-5 the limit
// (64 << n bytes, 64 B to 2 MiB), bits 6-7 the size of the pieces the input is fed in
// (1, 7, 512 or all at once). The rest is the coded body.
//
// Properties: no decoder writes past its limit or fails to finish; a verdict (the output,
// and whether the data was whole, corrupt or over the limit) does not depend on how the
// input was split, except that data both over the limit and corrupt may get either; the
// middleware answers the handler's 200 with exactly that output, or 413 / 400 as the
// verdict says; encoding the input and decoding it gives it back.
#include <algorithm>
#include <string>
#include <string_view>

#include <goro/http/compress.hpp>
#include <goro/http/httptest.hpp>

#include "compress/codec.hpp"
#include "harness.hpp"

namespace goro::fuzz {
namespace {

using http::detail::Coding;

enum class Verdict { whole, corrupt, over_limit, truncated };

struct Decoded {
  std::string out;
  Verdict verdict = Verdict::whole;
  const char* problem = nullptr;  // a broken property of the decoder itself
};

// Feeds input in pieces of `piece` bytes, decoding into an 1000-byte buffer, until the
// limit is passed, the data turns out corrupt, or the input ends.
Decoded decode(Coding coding, std::string_view input, std::size_t piece, std::size_t limit) {
  Decoded d;
  auto decoder = http::detail::make_decoder(coding);
  char out[1000];
  bool done = false;
  std::size_t offered = 0;  // input[0, offered) has been handed over
  std::string_view pending;
  for (int guard = 0; guard < 10'000'000; ++guard) {
    if (pending.empty() && offered < input.size()) {
      pending = input.substr(offered, std::min(piece, input.size() - offered));
      offered += pending.size();
    }
    const std::size_t room = std::min<std::size_t>(sizeof out, limit + 1 - d.out.size());
    const auto step = decoder->decode(pending, out, room);
    if (step.consumed > pending.size() || step.produced > room) {
      d.problem = "a decoder overran its buffers";
      return d;
    }
    pending.remove_prefix(step.consumed);
    d.out.append(out, step.produced);
    if (step.error) {
      d.verdict = Verdict::corrupt;
      return d;
    }
    if (d.out.size() > limit) {
      d.verdict = Verdict::over_limit;
      return d;
    }
    done = step.done;
    if (step.produced > 0) continue;
    if (pending.empty() && offered == input.size()) {
      d.verdict = done ? Verdict::whole : Verdict::truncated;
      return d;
    }
    if (!pending.empty() && step.consumed == 0 && !done) {
      d.verdict = Verdict::corrupt;
      return d;
    }
  }
  d.problem = "a decoder never finished";
  return d;
}

}  // namespace

std::string content_decoding(std::string_view input) {
  if (input.empty()) return "";
  const auto settings = static_cast<unsigned char>(input[0]);
  input.remove_prefix(1);
  const Coding coding = static_cast<Coding>(settings & 3);
  const std::size_t limit = std::size_t{64} << ((settings >> 2) & 15);
  static constexpr std::size_t kPieces[] = {1, 7, 512, ~std::size_t{0} >> 1};
  const std::size_t piece = kPieces[settings >> 6];

  const Decoded whole = decode(coding, input, input.size() + 1, limit);
  const Decoded split = decode(coding, input, piece, limit);
  if (whole.problem != nullptr) return whole.problem;
  if (split.problem != nullptr) return split.problem;
  // Data that turns corrupt only after more than `limit` decoded bytes is both over the
  // limit and corrupt, and which one a decoder finds first depends on how much input it
  // holds at once: brotli, given the input, decodes ahead of the output it hands over.
  // Either verdict is right then, as long as the outputs agree as far as both went.
  const bool either = (whole.verdict == Verdict::corrupt && split.verdict == Verdict::over_limit) ||
                      (whole.verdict == Verdict::over_limit && split.verdict == Verdict::corrupt);
  if (either) {
    const std::size_t common = std::min(whole.out.size(), split.out.size());
    if (whole.out.compare(0, common, split.out, 0, common) != 0)
      return "the output depends on how the input is split";
  } else if (split.verdict != whole.verdict) {
    return "the verdict depends on how the input is split";
  }
  if (whole.verdict != Verdict::over_limit && whole.verdict != Verdict::corrupt &&
      split.out != whole.out)
    return "the output depends on how the input is split";
  if (whole.out.size() > limit + 1) return "a decoder wrote past the limit";

  // Through the middleware: the handler sees the decoded body or the client an error.
  std::string seen;
  http::Handler echo = [&seen](http::Request& req, http::ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (!body) return;
    seen = *body;
    w.text("ok");
  };
  http::Handler app = http::chain(echo, {http::decompress_requests({.max_decoded_size = limit})});
  http::httptest::Recorded r;
  on_goroutine([&] {
    r = http::httptest::record(app, http::httptest::new_request("POST", "/", std::string(input))
                                        .header("Content-Encoding",
                                                http::detail::coding_name(coding)));
  });
  // An empty body is no coded body: the handler gets it as it is.
  if (input.empty()) {
    if (r.status != 200) return "an empty coded body was refused";
  } else if (whole.verdict == Verdict::whole) {
    if (r.status != 200 || seen != whole.out) return "the middleware changed a whole body";
  } else if (either) {
    if (r.status != 413 && r.status != 400)
      return "a body over the limit and corrupt was answered neither 413 nor 400";
  } else if (whole.verdict == Verdict::over_limit) {
    if (r.status != 413) return "a body over the limit was not answered 413";
  } else if (r.status != 400) {
    return "corrupt or truncated data was not answered 400";
  }

  // The input as plain data: encoded, then decoded, it comes back.
  if (coding != Coding::deflate || input.size() < 4096) {
    auto encoder = http::detail::make_encoder(coding, 1 + settings % 5);
    encoder->begin(0);
    std::string coded;
    for (std::size_t at = 0; at < input.size(); at += piece) {
      const std::string_view part = input.substr(at, std::min(piece, input.size() - at));
      if (!encoder->encode(part, at % 3 == 1 ? http::detail::EncodeMode::flush
                                             : http::detail::EncodeMode::more,
                           coded))
        return "an encoder failed";
    }
    if (!encoder->encode({}, http::detail::EncodeMode::finish, coded)) return "an encoder failed";
    const Decoded back = decode(coding, coded, piece, input.size());
    if (back.verdict != Verdict::whole || back.out != input) return "a round trip changed the data";
  }
  return "";
}

}  // namespace goro::fuzz
