#include <goro/http/middleware.hpp>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "access.hpp"

namespace goro::http {
namespace {

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

void write_line(const LogSink& sink, std::string_view line) {
  if (sink) {
    sink(line);
    return;
  }
  write_whole_line(STDERR_FILENO, line);
}

// Logs the exception and answers 500 in place of what the handler had buffered.
void recovered(const LogSink& sink, Request& req, ResponseWriter& w, const char* what) {
  std::string line = "recovered from exception in handler for ";
  line.append(req.method());
  line.push_back(' ');
  line.append(req.target());
  line.append(": ");
  line.append(what);
  write_line(sink, line);
  ResponseController(w).discard_response();
  (void)detail::send_builtin_error(req, w, status::internal_server_error,
                                   "500 Internal Server Error\n", "the handler threw an exception",
                                   "recover");
}

}  // namespace

Handler chain(Handler handler, std::initializer_list<Middleware> middlewares) {
  std::vector<Middleware> list(middlewares);
  for (auto it = list.rbegin(); it != list.rend(); ++it) handler = (*it)(std::move(handler));
  return handler;
}

namespace {

// "2026-11-25T19:45:01.123Z" for now.
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

// A logfmt value: bare when it has no space, quote, '=' or control character.
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

// A JSON string (RFC 8259 escaping; bytes >= 0x80 are copied as they are).
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

// The fields of one access log line.
struct LogEntry {
  std::string_view method, target, remote, request_id;
  int version_major = 1, version_minor = 1;
  int status = 0;
  std::uint64_t bytes = 0;
  std::int64_t micros = -1;  // -1: not known (a reply the server made on its own)
};

std::string format_entry(AccessLogFormat format, const LogEntry& e) {
  std::string line;
  line.reserve(160 + e.target.size());
  char num[64];
  switch (format) {
    case AccessLogFormat::common:
      line.append(e.remote);
      line.append(" \"");
      line.append(e.method.empty() ? "-" : e.method);
      line.push_back(' ');
      line.append(e.target.empty() ? "-" : e.target);
      line.append(e.version_major == 2   ? " HTTP/2.0"
                  : e.version_minor == 0 ? " HTTP/1.0"
                                         : " HTTP/1.1");
      if (e.micros >= 0) {
        std::snprintf(num, sizeof num, "\" %d %llu %lld.%03lldms", e.status,
                      static_cast<unsigned long long>(e.bytes),
                      static_cast<long long>(e.micros / 1000), static_cast<long long>(e.micros % 1000));
      } else {
        std::snprintf(num, sizeof num, "\" %d %llu -", e.status,
                      static_cast<unsigned long long>(e.bytes));
      }
      line.append(num);
      break;
    case AccessLogFormat::logfmt:
      line.append("time=");
      append_utc_now(line);
      line.append(" method=");
      append_logfmt_value(line, e.method);
      line.append(" path=");
      append_logfmt_value(line, e.target);
      std::snprintf(num, sizeof num, " status=%d bytes=%llu", e.status,
                    static_cast<unsigned long long>(e.bytes));
      line.append(num);
      if (e.micros >= 0) {
        std::snprintf(num, sizeof num, " duration_ms=%lld.%03lld",
                      static_cast<long long>(e.micros / 1000), static_cast<long long>(e.micros % 1000));
        line.append(num);
      }
      line.append(" remote=");
      append_logfmt_value(line, e.remote);
      line.append(" request_id=");
      append_logfmt_value(line, e.request_id);
      break;
    case AccessLogFormat::json:
      line.append("{\"time\":\"");
      append_utc_now(line);
      line.append("\",\"method\":");
      append_json_string(line, e.method);
      line.append(",\"path\":");
      append_json_string(line, e.target);
      std::snprintf(num, sizeof num, ",\"status\":%d,\"bytes\":%llu", e.status,
                    static_cast<unsigned long long>(e.bytes));
      line.append(num);
      if (e.micros >= 0) {
        std::snprintf(num, sizeof num, ",\"duration_ms\":%lld.%03lld",
                      static_cast<long long>(e.micros / 1000), static_cast<long long>(e.micros % 1000));
        line.append(num);
      }
      line.append(",\"remote\":");
      append_json_string(line, e.remote);
      line.append(",\"request_id\":");
      if (e.request_id.empty()) {
        line.append("null");
      } else {
        append_json_string(line, e.request_id);
      }
      line.push_back('}');
      break;
  }
  return line;
}

}  // namespace

Middleware access_log(AccessLogOptions options) {
  return [options](Handler next) -> Handler {
    return [options, next = std::move(next)](Request& req, ResponseWriter& w) {
      const auto start = std::chrono::steady_clock::now();
      next(req, w);
      LogEntry e;
      e.micros = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count();
      e.method = req.method();
      e.target = req.target();
      e.remote = req.remote_addr();
      e.version_major = req.version_major();
      e.version_minor = req.version_minor();
      e.status = w.status();
      e.bytes = w.bytes_written();
      e.request_id = w.header().get("x-request-id");
      if (e.request_id.empty()) e.request_id = req.header("x-request-id");
      write_line(options.sink, format_entry(options.format, e));
    };
  };
}

ErrorReplyHook log_error_replies(AccessLogOptions options) {
  return [options](ErrorReply& reply) {
    LogEntry e;
    e.method = reply.method;
    e.target = reply.target;
    e.remote = reply.remote_addr;
    e.status = reply.status;
    e.request_id = reply.headers.get("x-request-id");
    for (const HeaderField& f : reply.request_headers) {
      if (e.request_id.empty() && iequals(f.name, "x-request-id")) e.request_id = f.value;
    }
    write_line(options.sink, format_entry(options.format, e));
  };
}

Middleware request_id() {
  return [](Handler next) -> Handler {
    return [next = std::move(next)](Request& req, ResponseWriter& w) {
      // The server gave it one already (ServerOptions::request_ids).
      if (req.context().value(request_id_key) != nullptr) return next(req, w);
      std::string id = detail::request_id_for(req.header("x-request-id"));
      w.header().set("X-Request-Id", id);
      const Context outer = req.context();
      req.set_context(goro::with_value(outer, request_id_key, std::move(id)));
      next(req, w);
      req.set_context(outer);
    };
  };
}

Result<LogSink> open_log_file(const std::string& path) {
  const int fd = goro::blocking(
      [&] { return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644); });
  if (fd < 0) return std::error_code(errno, std::system_category());
  // The descriptor closes with the last copy of the sink.
  auto file = std::shared_ptr<int>(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
  return LogSink([file](std::string_view line) { write_whole_line(*file, line); });
}

Middleware access_log(LogSink sink) {
  return access_log(AccessLogOptions{AccessLogFormat::common, std::move(sink)});
}

Middleware recover(LogSink sink) {
  return [sink](Handler next) -> Handler {
    return [sink, next = std::move(next)](Request& req, ResponseWriter& w) {
      try {
        next(req, w);
      } catch (const std::exception& e) {
        if (w.headers_sent()) throw;
        recovered(sink, req, w, e.what());
      } catch (...) {
        if (w.headers_sent()) throw;
        recovered(sink, req, w, "an exception that is not a std::exception");
      }
    };
  };
}

}  // namespace goro::http
