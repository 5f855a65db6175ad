#include "trace/log_line.hpp"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

#include <goro/scheduler/runtime.hpp>

namespace goro::http::detail {

// Writes line and its newline to fd in one write(2), off the P: two calls (fwrite, then
// fputc) let another thread's line in between, and lines ran together under load.
void write_whole_line(int fd, std::string_view line) {
  std::string out;
  out.reserve(line.size() + 1);
  out.append(line).push_back('\n');
  goro::blocking([&] {
    std::string_view rest = out;
    while (!rest.empty()) {
      const ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  });
}

void write_log_line(const LogSink& sink, std::string_view line) {
  if (sink) {
    sink(line);
    return;
  }
  write_whole_line(STDERR_FILENO, line);
}

void append_utc_now(std::string& out) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ts.tv_nsec / 1'000'000) % 1000);
  out.append(buf);
}

void append_logfmt_value(std::string& out, std::string_view v) {
  if (v.empty()) {
    out.push_back('-');
    return;
  }
  bool bare = true;
  for (unsigned char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == 0x7f) bare = false;
  }
  if (bare) {
    out.append(v);
    return;
  }
  out.push_back('"');
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out.append(esc);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

void append_json_string(std::string& out, std::string_view v) {
  out.push_back('"');
  for (unsigned char c : v) {
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out.append(esc);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

}  // namespace goro::http::detail
