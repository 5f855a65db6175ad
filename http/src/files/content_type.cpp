// content_type_for: the Content-Type of a file from its extension (file_server.hpp).
#include <goro/http/file_server.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

namespace goro::http {
namespace {

struct Extension {
  std::string_view ext;
  std::string_view type;
};

// clang-format off: a table, two entries a line
constexpr Extension kTypes[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
};
// clang-format on

// An extension of up to 8 bytes in lower case as one number, its first byte lowest: the
// table is searched by comparing numbers, not strings.
constexpr std::uint64_t packed(std::string_view ext) noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < ext.size(); ++i) {
    const char c = ext[i];
    const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(lower)) << (8 * i);
  }
  return n;
}

constexpr std::size_t kTypeCount = std::size(kTypes);
constexpr std::array<std::uint64_t, kTypeCount> kPacked = [] {
  std::array<std::uint64_t, kTypeCount> out{};
  for (std::size_t i = 0; i < kTypeCount; ++i) out[i] = packed(kTypes[i].ext);
  return out;
}();
static_assert(std::all_of(std::begin(kTypes), std::end(kTypes),
                          [](const Extension& e) { return !e.ext.empty() && e.ext.size() <= 8; }));

constexpr std::string_view kUnknown = "application/octet-stream";

}  // namespace

std::string_view content_type_for(std::string_view file_name) noexcept {
  const std::size_t dot = file_name.rfind('.');
  const std::size_t slash = file_name.rfind('/');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
    return kUnknown;
  const std::string_view ext = file_name.substr(dot + 1);
  if (ext.empty() || ext.size() > 8) return kUnknown;
  const std::uint64_t key = packed(ext);
  for (std::size_t i = 0; i < kTypeCount; ++i) {
    if (kPacked[i] == key) return kTypes[i].type;
  }
  return kUnknown;
}

}  // namespace goro::http
