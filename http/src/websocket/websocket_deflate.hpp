// permessage-deflate (RFC 7692): the Sec-WebSocket-Extensions negotiation and the zlib
// streams that compress and decompress messages.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/websocket.hpp>

typedef struct z_stream_s z_stream;

namespace goro::http::websocket::detail {

// One extension of a Sec-WebSocket-Extensions list: "name; a; b=1; c=\"x\"".
struct Extension {
  struct Param {
    std::string name;
    std::optional<std::string> value;  // unquoted
  };
  std::string name;
  std::vector<Param> params;
};

// Appends the extensions of one Sec-WebSocket-Extensions value (RFC 6455 9.1) to out;
// false when its syntax is broken.
bool parse_extensions(std::string_view value, std::vector<Extension>& out);

// What was agreed for one connection, from this side's point of view.
struct DeflateParams {
  bool own_no_context_takeover = false;   // this side resets its compressor per message
  bool peer_no_context_takeover = false;  // the peer does: reset the decompressor too
  int own_window_bits = 15;               // this side compresses with at most this window
  int peer_window_bits = 15;              // the peer compresses with at most this window
};

// Server: the first permessage-deflate offer it can accept, the parameters and the
// value of the response's Sec-WebSocket-Extensions; nullopt when there is none (the
// connection goes on uncompressed). Offers with unknown or repeated parameters, or
// asking for a window of 8 (which zlib cannot make), are passed over.
struct ServerAgreement {
  DeflateParams params;
  std::string response;
};
std::optional<ServerAgreement> negotiate_deflate(const std::vector<Extension>& offers,
                                                 const Compression& settings);

// Client: the Sec-WebSocket-Extensions value that offers permessage-deflate.
std::string deflate_offer(const Compression& settings);
// Client: checks the server's answer to that offer. Returns the reason it is not
// acceptable, or nullptr (params set).
const char* accept_deflate_answer(const std::vector<Extension>& answer,
                                  const Compression& settings, DeflateParams& params);

// A message compressor: one zlib raw deflate stream, made on first use.
class Deflater {
 public:
  Deflater(int level, int window_bits, bool no_context_takeover) noexcept
      : level_(level), window_bits_(window_bits), no_context_takeover_(no_context_takeover) {}
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  // Compresses the next piece of a message into out (replacing its contents). The
  // last piece of a message (final) loses the 00 00 FF FF that ends every flush, as
  // RFC 7692 7.2.1 says. False when zlib fails (out of memory).
  bool compress(std::string_view piece, bool final, std::string& out);

 private:
  z_stream* stream_ = nullptr;
  int level_, window_bits_;
  bool no_context_takeover_;
};

// A message decompressor: one zlib raw inflate stream, made on first use.
class Inflater {
 public:
  Inflater(int window_bits, bool no_context_takeover) noexcept
      : window_bits_(window_bits), no_context_takeover_(no_context_takeover) {}
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  enum class Result { ok, too_big, corrupt };
  // Decompresses a whole message's payload (the 00 00 FF FF its sender removed is
  // added back here), appending to out, which may hold at most limit bytes.
  Result decompress(std::string_view message, std::size_t limit, std::string& out);

 private:
  z_stream* stream_ = nullptr;
  int window_bits_;
  bool no_context_takeover_;
};

}  // namespace goro::http::websocket::detail
