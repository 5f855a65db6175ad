// The content codings behind compress() and decompress_requests() (compress.hpp):
// streaming encoders and decoders over zlib (gzip, deflate), brotli and zstd, and a pool
// that keeps encoders between responses.
//
// An encoder is begun once per response and fed pieces; it never holds more than the
// library's own state, appending what it makes to the caller's string. A decoder writes
// into a bounded buffer of the caller's, so that a small input expanding without end (a
// "bomb") never grows memory: the caller stops at its limit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace goro::http::detail {

enum class Coding { gzip, deflate, br, zstd };

// The coding a Content-Encoding / Accept-Encoding token names ("x-gzip" is gzip); false
// for one goro does not implement.
bool coding_from_name(std::string_view name, Coding& out) noexcept;
std::string_view coding_name(Coding c) noexcept;

enum class EncodeMode {
  more,    // more input follows: output when the library chooses
  flush,   // everything so far decodable by the client now (a handler's flush)
  finish,  // the end of the body
};

class Encoder {
 public:
  virtual ~Encoder() = default;
  // Starts a new body. size_hint: the body's length when known, else 0.
  virtual void begin(std::size_t size_hint) = 0;
  // Compresses in, appending the output to out. False on a library failure (out of
  // memory); the encoder must then be begun again before use.
  virtual bool encode(std::string_view in, EncodeMode mode, std::string& out) = 0;
  // Whether begin() reuses the library's state (zlib, zstd) or makes it anew (brotli).
  virtual bool reusable() const noexcept = 0;
  virtual Coding coding() const noexcept = 0;
};

// level: the library's own scale (gzip 1-9, brotli 0-11, zstd 1-19); out of range is
// clamped. nullptr when the library cannot allocate its state.
std::unique_ptr<Encoder> make_encoder(Coding coding, int level);

class Decoder {
 public:
  virtual ~Decoder() = default;
  struct Step {
    std::size_t consumed = 0;  // bytes of in used
    std::size_t produced = 0;  // bytes written to out
    bool done = false;         // the coded stream ended (bytes after it are not read)
    bool error = false;        // corrupt data, or the library failed
  };
  // Decodes from in into out[0, out_size). Call again with what was not consumed and a
  // fresh out while produced == out_size (output pending) or consumed < in.size().
  virtual Step decode(std::string_view in, char* out, std::size_t out_size) = 0;
};

// nullptr when the library cannot allocate its state. zstd frames that ask for a window
// above 8 MiB (RFC 9659's limit for the content coding) are corrupt to it.
std::unique_ptr<Decoder> make_decoder(Coding coding);

// Encoders kept between responses, per coding and level: taking one costs a mutex and
// a reset instead of the library's allocation of its tables. At most `keep` idle per
// pool; the rest are freed.
class EncoderPool {
 public:
  EncoderPool(Coding coding, int level, std::size_t keep);
  ~EncoderPool();
  EncoderPool(const EncoderPool&) = delete;
  EncoderPool& operator=(const EncoderPool&) = delete;
  // An encoder, begun for size_hint; nullptr when none can be made.
  std::unique_ptr<Encoder> take(std::size_t size_hint);
  void give_back(std::unique_ptr<Encoder> e);
  Coding coding() const noexcept { return coding_; }

 private:
  struct Idle;
  Coding coding_;
  int level_;
  std::size_t keep_;
  std::unique_ptr<Idle> idle_;
};

}  // namespace goro::http::detail
