#include "h1/head.hpp"

#include <charconv>
#include <vector>

#include <goro/http/status.hpp>

namespace goro::http::detail::h1 {

void append_number(std::string& out, std::uint64_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  (void)ec;
  out.append(digits, end);
}

namespace {

// "HTTP/1.1 200 OK\r\n": made once for each code from 100 to 599.
std::string_view status_line(int status) {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> v(500);
    for (int code = 100; code < 600; ++code) {
      std::string& line = v[static_cast<std::size_t>(code - 100)];
      line.append("HTTP/1.1 ");
      append_number(line, static_cast<std::uint64_t>(code));
      line.push_back(' ');
      line.append(reason_phrase(code));
      line.append("\r\n");
    }
    return v;
  }();
  if (status < 100 || status >= 600) return {};
  return lines[static_cast<std::size_t>(status - 100)];
}

}  // namespace

void append_status_line(std::string& out, int status) {
  if (std::string_view line = status_line(status); !line.empty()) {
    out.append(line);
    return;
  }
  out.append("HTTP/1.1 ");
  append_number(out, static_cast<std::uint64_t>(status));
  out.push_back(' ');
  out.append(reason_phrase(status));
  out.append("\r\n");
}

Field field_of(std::string_view name) {
  switch (name.size()) {
    case 4: return iequals(name, "date") ? Field::date : Field::other;
    case 6: return iequals(name, "server") ? Field::server : Field::other;
    case 10: return iequals(name, "connection") ? Field::connection : Field::other;
    case 14: return iequals(name, "content-length") ? Field::content_length : Field::other;
    case 17: return iequals(name, "transfer-encoding") ? Field::transfer_encoding : Field::other;
    default: return Field::other;
  }
}

bool safe_field(const HeaderField& f) {
  return f.name.find_first_of("\r\n:") == std::string_view::npos &&
         f.value.find_first_of("\r\n") == std::string_view::npos;
}

}  // namespace goro::http::detail::h1
