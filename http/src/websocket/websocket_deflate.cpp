#include "websocket_deflate.hpp"

#include <zlib.h>

#include <algorithm>
#include <charconv>

#include <goro/http/headers.hpp>

namespace goro::http::websocket::detail {
namespace {

constexpr std::string_view kName = "permessage-deflate";
// What every flush ends with; a sender removes it from a message's end (RFC 7692 7.2.1).
constexpr char kFlushTail[] = {0x00, 0x00, static_cast<char>(0xFF), static_cast<char>(0xFF)};

bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void skip_space(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

std::string_view token_at(std::string_view s, std::size_t& i) {
  const std::size_t start = i;
  while (i < s.size() && is_tchar(s[i])) ++i;
  return s.substr(start, i - start);
}

// A window size parameter's value: 8 to 15, digits only.
std::optional<int> window_bits(const std::optional<std::string>& value) {
  if (!value || value->empty() || value->size() > 2) return std::nullopt;
  int bits = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), bits);
  if (ec != std::errc() || end != value->data() + value->size() || bits < 8 || bits > 15)
    return std::nullopt;
  return bits;
}

int clamp_bits(int bits) { return std::clamp(bits, 9, 15); }

// zlib's memory level for a window: 8 (its default) for the full window, less with a
// smaller one, as the hash table need not be larger than the window.
int memory_level(int window_bits) { return std::clamp(window_bits - 7, 1, 8); }

}  // namespace

bool parse_extensions(std::string_view s, std::vector<Extension>& out) {
  std::size_t i = 0;
  for (;;) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == ',')) ++i;
    if (i == s.size()) return true;
    Extension ext;
    std::string_view name = token_at(s, i);
    if (name.empty()) return false;
    ext.name = std::string(name);
    skip_space(s, i);
    while (i < s.size() && s[i] == ';') {
      ++i;
      skip_space(s, i);
      Extension::Param param;
      std::string_view param_name = token_at(s, i);
      if (param_name.empty()) return false;
      param.name = std::string(param_name);
      skip_space(s, i);
      if (i < s.size() && s[i] == '=') {
        ++i;
        skip_space(s, i);
        std::string value;
        if (i < s.size() && s[i] == '"') {
          ++i;
          bool closed = false;
          while (i < s.size()) {
            char c = s[i++];
            if (c == '"') {
              closed = true;
              break;
            }
            if (c == '\\') {
              if (i == s.size()) return false;
              c = s[i++];
            }
            value.push_back(c);
          }
          if (!closed) return false;
        } else {
          std::string_view token = token_at(s, i);
          if (token.empty()) return false;
          value = std::string(token);
        }
        param.value = std::move(value);
        skip_space(s, i);
      }
      ext.params.push_back(std::move(param));
    }
    if (i < s.size() && s[i] != ',') return false;
    out.push_back(std::move(ext));
  }
}

std::optional<ServerAgreement> negotiate_deflate(const std::vector<Extension>& offers,
                                                 const Compression& settings) {
  for (const Extension& offer : offers) {
    if (!iequals(offer.name, kName)) continue;
    bool server_no_context = false, client_no_context = false;
    std::optional<int> server_bits;
    bool client_bits_offered = false;
    std::optional<int> client_bits;
    bool acceptable = true;
    bool seen[4] = {false, false, false, false};
    for (const Extension::Param& p : offer.params) {
      int which = iequals(p.name, "server_no_context_takeover")   ? 0
                  : iequals(p.name, "client_no_context_takeover") ? 1
                  : iequals(p.name, "server_max_window_bits")     ? 2
                  : iequals(p.name, "client_max_window_bits")     ? 3
                                                                  : -1;
      if (which < 0 || seen[which]) {
        acceptable = false;
        break;
      }
      seen[which] = true;
      if (which == 0 || which == 1) {
        if (p.value) acceptable = false;
        (which == 0 ? server_no_context : client_no_context) = true;
      } else if (which == 2) {
        server_bits = window_bits(p.value);
        if (!server_bits) acceptable = false;
      } else {
        client_bits_offered = true;
        if (p.value) {
          client_bits = window_bits(p.value);
          if (!client_bits) acceptable = false;
        }
      }
      if (!acceptable) break;
    }
    if (!acceptable) continue;
    ServerAgreement agreed;
    DeflateParams& params = agreed.params;
    params.own_window_bits = clamp_bits(settings.max_window_bits);
    if (server_bits) {
      if (*server_bits < 9) continue;  // zlib makes no raw deflate with a 256-byte window
      params.own_window_bits = std::min(params.own_window_bits, *server_bits);
    }
    params.own_no_context_takeover = settings.no_context_takeover || server_no_context;
    params.peer_no_context_takeover = settings.peer_no_context_takeover || client_no_context;
    std::string& r = agreed.response;
    r = kName;
    if (params.own_no_context_takeover) r += "; server_no_context_takeover";
    if (params.peer_no_context_takeover) r += "; client_no_context_takeover";
    if (server_bits) r += "; server_max_window_bits=" + std::to_string(params.own_window_bits);
    if (client_bits_offered) {
      int bits = std::min(clamp_bits(settings.peer_max_window_bits), client_bits.value_or(15));
      if (bits < 15) {
        params.peer_window_bits = bits;
        r += "; client_max_window_bits=" + std::to_string(bits);
      }
    }
    return agreed;
  }
  return std::nullopt;
}

std::string deflate_offer(const Compression& settings) {
  std::string offer(kName);
  const int own_bits = clamp_bits(settings.max_window_bits);
  const int peer_bits = clamp_bits(settings.peer_max_window_bits);
  if (settings.no_context_takeover) offer += "; client_no_context_takeover";
  if (settings.peer_no_context_takeover) offer += "; server_no_context_takeover";
  if (peer_bits < 15) offer += "; server_max_window_bits=" + std::to_string(peer_bits);
  offer += "; client_max_window_bits";
  if (own_bits < 15) offer += "=" + std::to_string(own_bits);
  return offer;
}

const char* accept_deflate_answer(const std::vector<Extension>& answer,
                                  const Compression& settings, DeflateParams& params) {
  if (answer.size() != 1 || !iequals(answer[0].name, kName))
    return "the server agreed to an extension that was not offered";
  params = {};
  params.own_window_bits = clamp_bits(settings.max_window_bits);
  params.own_no_context_takeover = settings.no_context_takeover;
  const int asked_peer_bits = clamp_bits(settings.peer_max_window_bits);
  bool seen[4] = {false, false, false, false};
  for (const Extension::Param& p : answer[0].params) {
    int which = iequals(p.name, "server_no_context_takeover")   ? 0
                : iequals(p.name, "client_no_context_takeover") ? 1
                : iequals(p.name, "server_max_window_bits")     ? 2
                : iequals(p.name, "client_max_window_bits")     ? 3
                                                                : -1;
    if (which < 0) return "an unknown permessage-deflate parameter in the answer";
    if (seen[which]) return "a repeated permessage-deflate parameter in the answer";
    seen[which] = true;
    if (which == 0 || which == 1) {
      if (p.value) return "a no_context_takeover parameter with a value";
      (which == 0 ? params.peer_no_context_takeover : params.own_no_context_takeover) = true;
      continue;
    }
    std::optional<int> bits = window_bits(p.value);
    if (!bits) return "a max_window_bits parameter without a value from 8 to 15";
    if (which == 2) {
      if (asked_peer_bits < 15 && *bits > asked_peer_bits)
        return "server_max_window_bits larger than asked";
      params.peer_window_bits = *bits;
    } else {
      if (*bits < 9) return "client_max_window_bits=8, which zlib cannot compress with";
      params.own_window_bits = std::min(params.own_window_bits, *bits);
    }
  }
  if (settings.peer_no_context_takeover && !params.peer_no_context_takeover)
    return "the server ignored server_no_context_takeover";
  if (asked_peer_bits < 15 && !seen[2]) return "the server ignored server_max_window_bits";
  return nullptr;
}

Deflater::~Deflater() {
  if (stream_ != nullptr) {
    deflateEnd(stream_);
    delete stream_;
  }
}

bool Deflater::compress(std::string_view piece, bool final, std::string& out) {
  if (stream_ == nullptr) {
    auto* s = new z_stream{};
    if (deflateInit2(s, level_, Z_DEFLATED, -window_bits_, memory_level(window_bits_),
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      delete s;
      return false;
    }
    stream_ = s;
  }
  out.clear();
  stream_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
  stream_->avail_in = static_cast<uInt>(piece.size());
  const std::size_t chunk = std::max<std::size_t>(piece.size() / 2 + 64, 1024);
  do {
    const std::size_t old = out.size();
    out.resize(old + chunk);
    stream_->next_out = reinterpret_cast<Bytef*>(out.data() + old);
    stream_->avail_out = static_cast<uInt>(chunk);
    const int r = deflate(stream_, Z_SYNC_FLUSH);
    out.resize(old + chunk - stream_->avail_out);
    // Z_BUF_ERROR: nothing left to do (no input after a flush).
    if (r != Z_OK && r != Z_BUF_ERROR) return false;
  } while (stream_->avail_out == 0);
  if (final) {
    if (out.size() >= 4 && std::string_view(out).substr(out.size() - 4) ==
                               std::string_view(kFlushTail, sizeof kFlushTail)) {
      out.resize(out.size() - 4);
    } else if (out.empty()) {
      // No input since the last flush, and zlib writes nothing for a flush that has no
      // new input. The receiver adds 00 00 FF FF to whatever arrives, which must then
      // make a block: one zero byte before it is an empty stored block (the stream is at
      // a byte boundary after every flush).
      out.push_back('\0');
    }
    if (no_context_takeover_) deflateReset(stream_);
  }
  return true;
}

Inflater::~Inflater() {
  if (stream_ != nullptr) {
    inflateEnd(stream_);
    delete stream_;
  }
}

Inflater::Result Inflater::decompress(std::string_view message, std::size_t limit,
                                      std::string& out) {
  if (stream_ == nullptr) {
    auto* s = new z_stream{};
    if (inflateInit2(s, -window_bits_) != Z_OK) {
      delete s;
      return Result::corrupt;
    }
    stream_ = s;
  }
  const std::size_t start = out.size();
  Result result = Result::ok;
  const std::string_view inputs[2] = {message, std::string_view(kFlushTail, sizeof kFlushTail)};
  for (std::string_view input : inputs) {
    stream_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    stream_->avail_in = static_cast<uInt>(input.size());
    for (;;) {
      const std::size_t produced = out.size() - start;
      if (produced > limit) break;
      // One byte past the limit tells a message that is too big from one that fits.
      const std::size_t chunk = std::min<std::size_t>(limit - produced + 1, 64 * 1024);
      const std::size_t old = out.size();
      out.resize(old + chunk);
      stream_->next_out = reinterpret_cast<Bytef*>(out.data() + old);
      stream_->avail_out = static_cast<uInt>(chunk);
      const int r = inflate(stream_, Z_SYNC_FLUSH);
      out.resize(old + chunk - stream_->avail_out);
      if (r == Z_STREAM_END) {
        // The sender ended its stream with a final block; what follows is a new one.
        inflateReset(stream_);
        break;
      }
      if (r != Z_OK && r != Z_BUF_ERROR) {
        result = Result::corrupt;
        break;
      }
      // Done with this input once it is used up and the output had room to spare (no
      // output is left inside zlib); Z_BUF_ERROR: no progress was possible.
      if ((stream_->avail_in == 0 && stream_->avail_out != 0) || r == Z_BUF_ERROR) break;
    }
    if (result != Result::ok || out.size() - start > limit) break;
  }
  if (result == Result::ok && out.size() - start > limit) result = Result::too_big;
  if (result != Result::ok || no_context_takeover_) inflateReset(stream_);
  return result;
}

}  // namespace goro::http::websocket::detail
