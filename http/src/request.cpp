#include <goro/http/request.hpp>

#include <bit>
#include <cstdint>
#include <cstring>

#include <goro/http/errors.hpp>

#include "access.hpp"
#include "h1/message_parser.hpp"

namespace goro::http {
namespace detail {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Where the first '?' or '#' of s is (s.size() if none), noting in escaped whether a
// '%' comes before it. Eight bytes at a time where words are little-endian: a byte
// equal to c is a zero byte of w ^ c's, and the lowest flag of the zero-byte test is
// exact (a false flag sits only above a true one).
std::size_t find_query_or_fragment(std::string_view s, bool& escaped) noexcept {
  std::size_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    constexpr std::uint64_t kOnes = 0x0101010101010101ull;
    constexpr std::uint64_t kHighs = 0x8080808080808080ull;
    auto equal_bytes = [](std::uint64_t w, unsigned char c) {
      const std::uint64_t x = w ^ (kOnes * c);
      return (x - kOnes) & ~x & kHighs;
    };
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      const std::uint64_t stop = equal_bytes(w, '?') | equal_bytes(w, '#');
      const std::uint64_t percent = equal_bytes(w, '%');
      if (stop != 0) {
        const int at = std::countr_zero(stop) / 8;
        if ((percent & ((std::uint64_t{1} << (8 * at)) - 1)) != 0) escaped = true;
        return i + static_cast<std::size_t>(at);
      }
      if (percent != 0) escaped = true;
    }
  }
  for (; i < s.size(); ++i) {
    if (s[i] == '?' || s[i] == '#') return i;
    if (s[i] == '%') escaped = true;
  }
  return s.size();
}

// Splits a request-target into its path and query, and tells whether the path has an
// escape ('%'). Origin form "/p?q", absolute form "http://host/p?q" (the path starts at
// the first '/' after the authority), "*", or the authority form of CONNECT (no path).
void split_target(std::string_view target, std::string_view& path, std::string_view& query,
                  bool& escaped) {
  escaped = false;
  const std::size_t end = find_query_or_fragment(target, escaped);
  path = target.substr(0, end);
  query = {};
  if (end < target.size() && target[end] == '?') {
    std::string_view rest = target.substr(end + 1);
    query = rest.substr(0, rest.find('#'));
  }
  if (!path.empty() && path.front() != '/' && path != "*") {
    std::size_t scheme = path.find("://");
    if (scheme == std::string_view::npos) {
      path = {};  // authority form
    } else {
      std::size_t slash = path.find('/', scheme + 3);
      path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
    }
    escaped = path.find('%') != std::string_view::npos;
  }
}

bool prepare_paths(std::string& decoded, std::string_view& path_out, std::string_view& raw_path_out,
                   std::string_view& query_out, std::string_view target) {
  std::string_view path;
  bool escaped = false;
  split_target(target, path, query_out, escaped);
  raw_path_out = path;
  if (!escaped) {
    path_out = path;
    return true;
  }
  if (!percent_decode(path, decoded, false)) return false;
  path_out = decoded;
  return true;
}

}  // namespace

bool percent_decode(std::string_view in, std::string& out, bool plus_is_space) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hex_value(in[i + 1]);
      int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

bool RequestAccess::prepare(Request& req, const MessageParser& parser, std::string_view remote_addr,
                            BodyReader* body, RequestHost* host) {
  req.method_ = parser.method();
  req.target_ = parser.target();
  req.headers_ = parser.headers();
  req.version_major_ = parser.version_major();
  req.version_minor_ = parser.version_minor();
  req.content_length_ = parser.content_length();
  req.remote_addr_ = remote_addr;
  req.body_ = body;
  req.host_ = host;
  req.path_value_count_ = 0;
  req.pattern_ = {};
  if (req.ctx_ready_) {
    req.ctx_ = Context();
    req.ctx_ready_ = false;
  }
  return prepare_paths(req.decoded_path_, req.path_, req.raw_path_, req.raw_query_, req.target_);
}

bool RequestAccess::prepare(Request& req, std::string_view method, std::string_view target,
                            std::span<const HeaderField> headers, BodyReader* body,
                            RequestHost* host) {
  req.method_ = method;
  req.target_ = target;
  req.headers_ = headers;
  req.version_major_ = 1;
  req.version_minor_ = 1;
  req.content_length_ = 0;
  req.remote_addr_ = {};
  req.body_ = body;
  req.host_ = host;
  req.path_value_count_ = 0;
  req.pattern_ = {};
  if (req.ctx_ready_) {
    req.ctx_ = Context();
    req.ctx_ready_ = false;
  }
  return prepare_paths(req.decoded_path_, req.path_, req.raw_path_, req.raw_query_, req.target_);
}

}  // namespace detail

const Context& Request::context() {
  if (!ctx_ready_) {
    if (host_ != nullptr) ctx_ = host_->request_context();
    ctx_ready_ = true;
  }
  return ctx_;
}

std::optional<std::string> Request::query(std::string_view name) const {
  std::optional<std::string> found;
  std::string key;
  detail::for_each_urlencoded_pair(
      raw_query_, [&](std::string_view, std::string_view raw_key, std::string_view raw_value) {
        if (!detail::percent_decode(raw_key, key, true) || key != name) return true;
        std::string value;
        if (!detail::percent_decode(raw_value, value, true)) return true;
        found = std::move(value);
        return false;
      });
  return found;
}

std::string_view Request::header(std::string_view name) const noexcept {
  for (const HeaderField& f : headers_) {
    if (iequals(f.name, name)) return f.value;
  }
  return {};
}

bool Request::has_header(std::string_view name) const noexcept {
  for (const HeaderField& f : headers_) {
    if (iequals(f.name, name)) return true;
  }
  return false;
}

Result<std::size_t> Request::read(void* buf, std::size_t len) {
  if (body_ == nullptr) return std::size_t{0};
  return body_->read(buf, len);
}

Result<std::string> Request::body() {
  std::string out;
  std::size_t size = 0;
  // One byte more than Content-Length, so the read that sees the end needs no growth.
  out.resize(content_length_ > 0 ? static_cast<std::size_t>(content_length_) + 1 : 16 * 1024);
  for (;;) {
    if (size == out.size()) out.resize(out.size() * 2);
    Result<std::size_t> n = read(out.data() + size, out.size() - size);
    if (!n) return n.error();
    if (*n == 0) break;
    size += *n;
  }
  out.resize(size);
  return out;
}

std::string_view Request::path_value(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < path_value_count_; ++i) {
    if (path_values_[i].first == name) return path_values_[i].second;
  }
  return {};
}

void Request::set_path_value(std::string_view name, std::string_view value) {
  for (std::size_t i = 0; i < path_value_count_; ++i) {
    if (path_values_[i].first == name) {
      path_values_[i].second.assign(value);
      return;
    }
  }
  if (path_value_count_ == path_values_.size()) path_values_.emplace_back();
  path_values_[path_value_count_].first.assign(name);
  path_values_[path_value_count_].second.assign(value);
  ++path_value_count_;
}

bool Request::client_gone() { return host_ != nullptr && host_->client_gone(); }

}  // namespace goro::http
