// goro::http::Logger — a small structured logger: one line per event, logfmt or JSON,
// stamped with the trace, span and request ids of the context it is given.
//
//   goro::http::Logger log({.min_level = goro::http::LogLevel::debug});
//   log.info(req, "user loaded", {{"user", id}, {"rows", n}});
//   // time=2026-11-25T19:45:01.123Z level=info msg="user loaded"
//   //   trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7
//   //   request_id=4f1c2a9e0b7d3c55 user=7 rows=3
//
// It lives in goro::http, not lower, because what it stamps is the HTTP layer's: the
// request id of request_id() and the trace of trace() (trace.hpp), and it writes to the
// same LogSink as access_log. Ids absent from the context are left out of the line.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <goro/http/middleware.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::http {

enum class LogLevel { debug, info, warn, error };
enum class LogFormat { logfmt, json };

struct LoggerOptions {
  LogLevel min_level = LogLevel::info;  // events below it are dropped
  LogFormat format = LogFormat::logfmt;
  LogSink sink{};  // empty: stderr
};

// One key=value of an event. Text is quoted as its format needs; numbers and booleans
// are bare (JSON numbers and true/false).
struct LogField {
  LogField(std::string_view key, std::string_view text) : key(key), value(text), quoted(true) {}
  LogField(std::string_view key, const char* text) : LogField(key, std::string_view(text)) {}
  LogField(std::string_view key, const std::string& text) : LogField(key, std::string_view(text)) {}
  LogField(std::string_view key, bool b) : key(key), value(b ? "true" : "false") {}
  LogField(std::string_view key, std::integral auto n) : key(key), value(std::to_string(n)) {}
  LogField(std::string_view key, double d);

  std::string_view key;
  std::string value;
  bool quoted = false;
};

// Safe to use from many goroutines at once; each event is one call of the sink.
class Logger {
 public:
  explicit Logger(LoggerOptions options = {});

  // Changes the level below which events are dropped; any goroutine, any time.
  void set_min_level(LogLevel level) noexcept;
  bool enabled(LogLevel level) const noexcept;

  // Writes the event if its level is enabled, stamped with ctx's ids (or req's
  // context's). Blocks only as the sink does (stderr: a write(2) in goro::blocking).
  void log(LogLevel level, const Context& ctx, std::string_view message,
           std::initializer_list<LogField> fields = {}) const;
  void log(LogLevel level, Request& req, std::string_view message,
           std::initializer_list<LogField> fields = {}) const;

  template <class Scope>
  void debug(Scope&& scope, std::string_view message,
             std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::debug, scope, message, fields);
  }
  template <class Scope>
  void info(Scope&& scope, std::string_view message,
            std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::info, scope, message, fields);
  }
  template <class Scope>
  void warn(Scope&& scope, std::string_view message,
            std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::warn, scope, message, fields);
  }
  template <class Scope>
  void error(Scope&& scope, std::string_view message,
             std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::error, scope, message, fields);
  }

 private:
  LogFormat format_;
  LogSink sink_;
  std::atomic<int> min_level_;
};

}  // namespace goro::http
