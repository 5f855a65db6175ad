// Encoders and decoders over zlib, brotli and zstd (codec.hpp).
//
// Each encoder compresses into a scratch buffer of its own and appends what the library
// wrote, so the caller's string grows by the output only, never by zero-filled room.
#include "compress/codec.hpp"

#include <brotli/decode.h>
#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include <goro/http/headers.hpp>

namespace goro::http::detail {
namespace {

constexpr std::size_t kScratch = 16 * 1024;

// zlib's gzip (windowBits 15 + 16) or zlib-wrapped deflate (RFC 9110 §8.4.1.2).
int zlib_window_bits(Coding c) { return c == Coding::gzip ? 15 + 16 : 15; }

class ZlibEncoder final : public Encoder {
 public:
  ZlibEncoder(Coding coding, int level) : coding_(coding) {
    ok_ = deflateInit2(&z_, std::clamp(level, 1, 9), Z_DEFLATED, zlib_window_bits(coding), 8,
                       Z_DEFAULT_STRATEGY) == Z_OK;
  }
  ~ZlibEncoder() override {
    if (ok_) deflateEnd(&z_);
  }
  bool ok() const { return ok_; }

  void begin(std::size_t) override { deflateReset(&z_); }
  bool encode(std::string_view in, EncodeMode mode, std::string& out) override {
    const int flush =
        mode == EncodeMode::more ? Z_NO_FLUSH : mode == EncodeMode::flush ? Z_SYNC_FLUSH : Z_FINISH;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    for (;;) {
      z_.next_out = reinterpret_cast<Bytef*>(scratch_);
      z_.avail_out = kScratch;
      const int rc = deflate(&z_, flush);
      out.append(scratch_, kScratch - z_.avail_out);
      if (rc == Z_STREAM_END) return true;
      if (rc != Z_OK && rc != Z_BUF_ERROR) return false;
      // Done when the input is taken and the library had room to spare (zlib's rule for
      // a flush: a call that filled the output may have more to give).
      if (z_.avail_in == 0 && z_.avail_out != 0 && flush != Z_FINISH) return true;
    }
  }
  bool reusable() const noexcept override { return true; }
  Coding coding() const noexcept override { return coding_; }

 private:
  Coding coding_;
  z_stream z_{};
  bool ok_ = false;
  char scratch_[kScratch];
};

class BrotliEncoder final : public Encoder {
 public:
  explicit BrotliEncoder(int level) : level_(std::clamp(level, 0, 11)) {}
  ~BrotliEncoder() override { drop(); }

  // Brotli has no reset: each body gets a new state.
  void begin(std::size_t size_hint) override {
    drop();
    s_ = BrotliEncoderCreateInstance(nullptr, nullptr, nullptr);
    if (s_ == nullptr) return;
    BrotliEncoderSetParameter(s_, BROTLI_PARAM_QUALITY, static_cast<std::uint32_t>(level_));
    // A 512 KiB window (nginx's brotli module's default) rather than 4 MiB: dynamic
    // responses are small, and the window is memory held per response.
    BrotliEncoderSetParameter(s_, BROTLI_PARAM_LGWIN, 19);
    if (size_hint > 0 && size_hint < (1u << 30)) {
      BrotliEncoderSetParameter(s_, BROTLI_PARAM_SIZE_HINT, static_cast<std::uint32_t>(size_hint));
    }
  }
  bool encode(std::string_view in, EncodeMode mode, std::string& out) override {
    if (s_ == nullptr) return false;
    const BrotliEncoderOperation op = mode == EncodeMode::more    ? BROTLI_OPERATION_PROCESS
                                      : mode == EncodeMode::flush ? BROTLI_OPERATION_FLUSH
                                                                  : BROTLI_OPERATION_FINISH;
    std::size_t avail_in = in.size();
    const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    for (;;) {
      std::size_t avail_out = 0;  // output is taken with BrotliEncoderTakeOutput
      if (!BrotliEncoderCompressStream(s_, op, &avail_in, &next_in, &avail_out, nullptr, nullptr))
        return false;
      std::size_t n = 0;
      const std::uint8_t* p = BrotliEncoderTakeOutput(s_, &n);
      out.append(reinterpret_cast<const char*>(p), n);
      if (avail_in > 0 || BrotliEncoderHasMoreOutput(s_)) continue;
      if (op == BROTLI_OPERATION_FINISH && !BrotliEncoderIsFinished(s_)) continue;
      return true;
    }
  }
  bool reusable() const noexcept override { return false; }
  Coding coding() const noexcept override { return Coding::br; }

 private:
  void drop() {
    if (s_ != nullptr) BrotliEncoderDestroyInstance(s_);
    s_ = nullptr;
  }
  int level_;
  BrotliEncoderState* s_ = nullptr;
};

class ZstdEncoder final : public Encoder {
 public:
  explicit ZstdEncoder(int level) : c_(ZSTD_createCCtx()) {
    if (c_ != nullptr) {
      ZSTD_CCtx_setParameter(c_, ZSTD_c_compressionLevel, std::clamp(level, 1, 19));
    }
  }
  ~ZstdEncoder() override { ZSTD_freeCCtx(c_); }
  bool ok() const { return c_ != nullptr; }

  // Keeps the level; drops the previous body's session.
  void begin(std::size_t) override { ZSTD_CCtx_reset(c_, ZSTD_reset_session_only); }
  bool encode(std::string_view in, EncodeMode mode, std::string& out) override {
    const ZSTD_EndDirective op = mode == EncodeMode::more    ? ZSTD_e_continue
                                 : mode == EncodeMode::flush ? ZSTD_e_flush
                                                             : ZSTD_e_end;
    ZSTD_inBuffer input{in.data(), in.size(), 0};
    for (;;) {
      ZSTD_outBuffer output{scratch_, kScratch, 0};
      const std::size_t left = ZSTD_compressStream2(c_, &output, &input, op);
      if (ZSTD_isError(left)) return false;
      out.append(scratch_, output.pos);
      if (op == ZSTD_e_continue ? input.pos == input.size : left == 0) return true;
    }
  }
  bool reusable() const noexcept override { return true; }
  Coding coding() const noexcept override { return Coding::zstd; }

 private:
  ZSTD_CCtx* c_;
  char scratch_[kScratch];
};

class ZlibDecoder final : public Decoder {
 public:
  explicit ZlibDecoder(Coding coding) : coding_(coding) {
    ok_ = inflateInit2(&z_, zlib_window_bits(coding)) == Z_OK;
  }
  ~ZlibDecoder() override {
    if (ok_) inflateEnd(&z_);
  }
  bool ok() const { return ok_; }

  Step decode(std::string_view in, char* out, std::size_t out_size) override {
    Step step;
    if (ended_ && !in.empty()) {
      // gzip allows members one after another (RFC 1952 §2.2); deflate one stream.
      if (coding_ != Coding::gzip || inflateReset(&z_) != Z_OK) {
        step.error = true;
        return step;
      }
      ended_ = false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(out_size);
    const int rc = ended_ ? Z_STREAM_END : inflate(&z_, Z_NO_FLUSH);
    step.consumed = in.size() - z_.avail_in;
    step.produced = out_size - z_.avail_out;
    if (rc == Z_STREAM_END) {
      ended_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      step.error = true;
    }
    step.done = ended_;
    return step;
  }

 private:
  Coding coding_;
  z_stream z_{};
  bool ok_ = false;
  bool ended_ = false;
};

class BrotliDecoder final : public Decoder {
 public:
  BrotliDecoder() : s_(BrotliDecoderCreateInstance(nullptr, nullptr, nullptr)) {}
  ~BrotliDecoder() override {
    if (s_ != nullptr) BrotliDecoderDestroyInstance(s_);
  }
  bool ok() const { return s_ != nullptr; }

  Step decode(std::string_view in, char* out, std::size_t out_size) override {
    Step step;
    if (ended_) {
      step.done = true;
      step.error = !in.empty();  // a brotli stream is one stream: bytes after it are wrong
      return step;
    }
    std::size_t avail_in = in.size();
    const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    std::size_t avail_out = out_size;
    auto* next_out = reinterpret_cast<std::uint8_t*>(out);
    const BrotliDecoderResult r =
        BrotliDecoderDecompressStream(s_, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    step.consumed = in.size() - avail_in;
    step.produced = out_size - avail_out;
    if (r == BROTLI_DECODER_RESULT_ERROR) step.error = true;
    if (r == BROTLI_DECODER_RESULT_SUCCESS) ended_ = step.done = true;
    return step;
  }

 private:
  BrotliDecoderState* s_;
  bool ended_ = false;
};

class ZstdDecoder final : public Decoder {
 public:
  ZstdDecoder() : d_(ZSTD_createDCtx()) {
    // RFC 9659 §3: a decoder of the zstd content coding needs at most an 8 MiB window.
    if (d_ != nullptr) ZSTD_DCtx_setParameter(d_, ZSTD_d_windowLogMax, 23);
  }
  ~ZstdDecoder() override { ZSTD_freeDCtx(d_); }
  bool ok() const { return d_ != nullptr; }

  Step decode(std::string_view in, char* out, std::size_t out_size) override {
    Step step;
    ZSTD_inBuffer input{in.data(), in.size(), 0};
    ZSTD_outBuffer output{out, out_size, 0};
    // Frames may follow one another (RFC 8878 §3); between them the stream is whole.
    const std::size_t r = in.empty() && at_frame_end_ ? 0 : ZSTD_decompressStream(d_, &output, &input);
    step.consumed = input.pos;
    step.produced = output.pos;
    if (ZSTD_isError(r)) {
      step.error = true;
      return step;
    }
    at_frame_end_ = r == 0;  // the frame decoded and all its output given
    step.done = at_frame_end_;
    return step;
  }

 private:
  ZSTD_DCtx* d_;
  bool at_frame_end_ = false;
};

}  // namespace

bool coding_from_name(std::string_view name, Coding& out) noexcept {
  if (iequals(name, "gzip") || iequals(name, "x-gzip")) {
    out = Coding::gzip;
  } else if (iequals(name, "deflate")) {
    out = Coding::deflate;
  } else if (iequals(name, "br")) {
    out = Coding::br;
  } else if (iequals(name, "zstd")) {
    out = Coding::zstd;
  } else {
    return false;
  }
  return true;
}

std::string_view coding_name(Coding c) noexcept {
  switch (c) {
    case Coding::gzip: return "gzip";
    case Coding::deflate: return "deflate";
    case Coding::br: return "br";
    case Coding::zstd: return "zstd";
  }
  return "";
}

std::unique_ptr<Encoder> make_encoder(Coding coding, int level) {
  switch (coding) {
    case Coding::gzip:
    case Coding::deflate: {
      auto e = std::make_unique<ZlibEncoder>(coding, level);
      if (!e->ok()) return nullptr;
      return e;
    }
    case Coding::br: return std::make_unique<BrotliEncoder>(level);
    case Coding::zstd: {
      auto e = std::make_unique<ZstdEncoder>(level);
      if (!e->ok()) return nullptr;
      return e;
    }
  }
  return nullptr;
}

std::unique_ptr<Decoder> make_decoder(Coding coding) {
  switch (coding) {
    case Coding::gzip:
    case Coding::deflate: {
      auto d = std::make_unique<ZlibDecoder>(coding);
      if (!d->ok()) return nullptr;
      return d;
    }
    case Coding::br: {
      auto d = std::make_unique<BrotliDecoder>();
      if (!d->ok()) return nullptr;
      return d;
    }
    case Coding::zstd: {
      auto d = std::make_unique<ZstdDecoder>();
      if (!d->ok()) return nullptr;
      return d;
    }
  }
  return nullptr;
}

// mu guards list; it is held only to push or pop, never across a library call.
struct EncoderPool::Idle {
  std::mutex mu;
  std::vector<std::unique_ptr<Encoder>> list;
};

EncoderPool::EncoderPool(Coding coding, int level, std::size_t keep)
    : coding_(coding), level_(level), keep_(keep), idle_(std::make_unique<Idle>()) {}

EncoderPool::~EncoderPool() = default;

std::unique_ptr<Encoder> EncoderPool::take(std::size_t size_hint) {
  std::unique_ptr<Encoder> e;
  {
    std::lock_guard lock(idle_->mu);
    if (!idle_->list.empty()) {
      e = std::move(idle_->list.back());
      idle_->list.pop_back();
    }
  }
  if (e == nullptr) e = make_encoder(coding_, level_);
  if (e != nullptr) e->begin(size_hint);
  return e;
}

void EncoderPool::give_back(std::unique_ptr<Encoder> e) {
  if (e == nullptr || !e->reusable()) return;
  std::lock_guard lock(idle_->mu);
  if (idle_->list.size() < keep_) idle_->list.push_back(std::move(e));
}

}  // namespace goro::http::detail
