// The gRPC wire format (wire.hpp): framing, grpc-timeout, percent-encoding, base64,
// gzip and the HTTP status mapping, as PROTOCOL-HTTP2.md states them.
#include "wire/wire.hpp"

#include <google/protobuf/message_lite.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>

namespace goro::grpc::wire {

void MessageDecoder::append(std::string_view bytes) {
  std::memcpy(prepare(bytes.size()), bytes.data(), bytes.size());
  commit(bytes.size());
}

char* MessageDecoder::prepare(std::size_t n) {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (begin_ > 0 && buf_.size() - end_ < n) {
    // Slide the unread bytes down before growing: a stream of messages reuses one buffer.
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buf_.size() - end_ < n) buf_.resize(std::max(end_ + n, buf_.size() * 2));
  return buf_.data() + end_;
}

MessageDecoder::Result MessageDecoder::next(Message& out) {
  if (!error_.ok()) return Result::error;
  const std::size_t have = end_ - begin_;
  if (have < kMessageHeaderSize) return Result::need_more;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + begin_);
  if (p[0] > 1) {
    error_ = Status(StatusCode::internal,
                    "grpc: invalid message flags " + std::to_string(static_cast<int>(p[0])));
    return Result::error;
  }
  const std::uint32_t length = (std::uint32_t{p[1]} << 24) | (std::uint32_t{p[2]} << 16) |
                               (std::uint32_t{p[3]} << 8) | std::uint32_t{p[4]};
  if (length > max_) {
    error_ = Status(StatusCode::resource_exhausted, "grpc: received message larger than max (" +
                                                        std::to_string(length) + " vs. " +
                                                        std::to_string(max_) + ")");
    return Result::error;
  }
  if (have - kMessageHeaderSize < length) return Result::need_more;
  out.compressed = p[0] == 1;
  out.payload = std::string_view(buf_.data() + begin_ + kMessageHeaderSize, length);
  begin_ += kMessageHeaderSize + length;
  return Result::message;
}

std::size_t MessageDecoder::wanted() const noexcept {
  const std::size_t have = end_ - begin_;
  if (have < kMessageHeaderSize) return kMessageHeaderSize - have;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + begin_);
  const std::size_t length = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) |
                             (std::size_t{p[3]} << 8) | std::size_t{p[4]};
  const std::size_t total = kMessageHeaderSize + length;
  return total > have ? total - have : 0;
}

Status MessageDecoder::finish() const {
  if (!error_.ok()) return error_;
  if (end_ != begin_) {
    return Status(StatusCode::internal, "grpc: stream ended inside a message (" +
                                            std::to_string(end_ - begin_) + " bytes left)");
  }
  return {};
}

Status parse_message(const MessageDecoder::Message& message, std::string_view grpc_encoding,
                     std::size_t max_message_size, std::string& scratch,
                     google::protobuf::MessageLite& msg) {
  std::string_view payload = message.payload;
  if (message.compressed) {
    if (grpc_encoding.empty() || grpc_encoding == "identity") {
      return Status(StatusCode::internal,
                    "grpc: compressed flag set on a message without grpc-encoding");
    }
    const std::optional<Compression> algorithm = parse_encoding(grpc_encoding);
    if (!algorithm) {
      return Status(StatusCode::unimplemented,
                    "grpc: unsupported message encoding " + std::string(grpc_encoding));
    }
    if (Status s = decompress(*algorithm, payload, scratch, max_message_size); !s.ok()) return s;
    payload = scratch;
  }
  if (payload.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
      !msg.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Status(StatusCode::internal, "grpc: failed to parse the message");
  }
  return {};
}

std::optional<Compression> parse_encoding(std::string_view name) noexcept {
  if (name.empty() || name == "identity") return Compression::identity;
  if (name == "gzip") return Compression::gzip;
  return std::nullopt;
}

std::string_view encoding_name(Compression algorithm) noexcept {
  return algorithm == Compression::gzip ? "gzip" : "identity";
}

bool accepts_encoding(std::string_view list, Compression algorithm) noexcept {
  const std::string_view want = encoding_name(algorithm);
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item == want) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return algorithm == Compression::identity;
}

void compress(Compression algorithm, std::string_view in, std::string& out) {
  if (algorithm == Compression::identity) {
    out.append(in);
    return;
  }
  z_stream z{};
  // 15 + 16: a gzip wrapper, as grpc-encoding "gzip" means.
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  const std::size_t start = out.size();
  out.resize(start + deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data() + start);
  z.avail_out = static_cast<uInt>(out.size() - start);
  deflate(&z, Z_FINISH);  // deflateBound leaves room for the whole stream in one call
  out.resize(start + z.total_out);
  deflateEnd(&z);
}

Status decompress(Compression algorithm, std::string_view in, std::string& out,
                  std::size_t max_size) {
  out.clear();
  if (algorithm == Compression::identity) {
    if (in.size() > max_size)
      return Status(StatusCode::resource_exhausted, "grpc: message too large");
    out.assign(in);
    return {};
  }
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK)
    return Status(StatusCode::internal, "grpc: inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  Status status;
  for (;;) {
    if (out.size() - z.total_out < 4096) {
      // One byte past the limit tells an oversized result from an exact fit.
      const std::size_t cap = max_size < SIZE_MAX - 1 ? max_size + 1 : max_size;
      if (out.size() >= cap) {
        status =
            Status(StatusCode::resource_exhausted,
                   "grpc: decompressed message larger than max (" + std::to_string(max_size) + ")");
        break;
      }
      out.resize(std::min(cap, std::max<std::size_t>(out.size() * 2, in.size() * 2 + 4096)));
    }
    z.next_out = reinterpret_cast<Bytef*>(out.data() + z.total_out);
    z.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - z.total_out, 1u << 30));
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (z.total_out > max_size) {
      status =
          Status(StatusCode::resource_exhausted,
                 "grpc: decompressed message larger than max (" + std::to_string(max_size) + ")");
      break;
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in != 0)
        status = Status(StatusCode::internal, "grpc: bytes after the gzip stream");
      break;
    }
    // All input taken and room left for output, yet no end: the stream is cut short.
    if ((rc == Z_OK || rc == Z_BUF_ERROR) && z.avail_in == 0 && z.avail_out > 0) {
      status = Status(StatusCode::internal, "grpc: truncated gzip stream");
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status = Status(StatusCode::internal, "grpc: invalid gzip stream");
      break;
    }
  }
  out.resize(status.ok() ? z.total_out : 0);
  inflateEnd(&z);
  return status;
}

std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view value) noexcept {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  std::int64_t n = 0;
  const std::string_view digits = value.substr(0, value.size() - 1);
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  using namespace std::chrono;
  // 99999999 hours is past what nanoseconds hold (292 years): the longest units are
  // capped at 100 years, which no call outlives.
  constexpr std::int64_t kCapSeconds = std::int64_t{100} * 365 * 24 * 3600;
  switch (value.back()) {
    case 'H': return seconds(std::min<std::int64_t>(n, kCapSeconds / 3600) * 3600);
    case 'M': return seconds(std::min<std::int64_t>(n, kCapSeconds / 60) * 60);
    case 'S': return duration_cast<nanoseconds>(seconds(n));
    case 'm': return duration_cast<nanoseconds>(milliseconds(n));
    case 'u': return duration_cast<nanoseconds>(microseconds(n));
    case 'n': return nanoseconds(n);
    default: return std::nullopt;
  }
}

std::string format_timeout(std::chrono::nanoseconds timeout) {
  constexpr std::int64_t kMax = 99'999'999;
  std::int64_t n = std::max<std::int64_t>(timeout.count(), 1);
  // Each unit is the previous one times this; rounding up keeps the timeout >= asked.
  static constexpr std::array<std::pair<std::int64_t, char>, 6> units{
      {{1, 'n'}, {1000, 'u'}, {1000, 'm'}, {1000, 'S'}, {60, 'M'}, {60, 'H'}}};
  for (std::size_t i = 0; i < units.size(); ++i) {
    if (i > 0) n = (n + units[i].first - 1) / units[i].first;
    if (n <= kMax || i + 1 == units.size()) {
      return std::to_string(std::min(n, kMax)) + units[i].second;
    }
  }
  return "99999999H";
}

std::string percent_encode(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

namespace {
int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string percent_decode(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] == '%' && i + 2 < encoded.size()) {
      const int hi = hex_value(encoded[i + 1]), lo = hex_value(encoded[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(encoded[i]);
  }
  return out;
}

std::string base64_encode(std::string_view bytes, bool pad) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = std::uint32_t{p[i]} << 16;
    if (rest == 2) v |= std::uint32_t{p[i + 1]} << 8;
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
    if (pad) out.append(rest == 1 ? "==" : "=");
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+' || c == '-')
      v = 62;  // '-' and '_': the URL-safe alphabet, as grpc-go accepts
    else if (c == '/' || c == '_')
      v = 63;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool is_reserved_header(std::string_view name) noexcept {
  if (name.empty() || name[0] == ':') return true;
  if (name.size() >= 5 && name.substr(0, 5) == "grpc-") return true;
  for (std::string_view r :
       {"content-type", "te", "user-agent", "content-length", "host", "connection", "keep-alive",
        "transfer-encoding", "upgrade", "proxy-connection", "date", "server"}) {
    if (name == r) return true;
  }
  return false;
}

std::optional<StatusCode> parse_status_code(std::string_view value) noexcept {
  int n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0 || value.empty())
    return std::nullopt;
  return static_cast<StatusCode>(n);
}

StatusCode status_from_http(int http_status) noexcept {
  switch (http_status) {
    case 400: return StatusCode::internal;
    case 401: return StatusCode::unauthenticated;
    case 403: return StatusCode::permission_denied;
    case 404: return StatusCode::unimplemented;
    case 429:
    case 502:
    case 503:
    case 504: return StatusCode::unavailable;
    default: return StatusCode::unknown;
  }
}

bool is_grpc_content_type(std::string_view ct) noexcept {
  constexpr std::string_view kBase = "application/grpc";
  if (ct.size() < kBase.size()) return false;
  for (std::size_t i = 0; i < kBase.size(); ++i) {
    char c = ct[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (c != kBase[i]) return false;
  }
  return ct.size() == kBase.size() || ct[kBase.size()] == '+' || ct[kBase.size()] == ';';
}

}  // namespace goro::grpc::wire
