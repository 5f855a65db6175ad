#include <goro/http/logger.hpp>

#include <cmath>
#include <cstdio>
#include <utility>

#include <goro/http/request.hpp>
#include <goro/http/trace.hpp>

#include "trace/log_line.hpp"

namespace goro::http {
namespace {

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "info";
}

class LineWriter {
 public:
  explicit LineWriter(LogFormat format) : format_(format) {
    if (format_ == LogFormat::json) line_.push_back('{');
  }

  void text(std::string_view key, std::string_view value) { field(key, value, true); }

  void field(std::string_view key, std::string_view value, bool quoted) {
    if (format_ == LogFormat::logfmt) {
      if (!line_.empty()) line_.push_back(' ');
      // A key is written as given, but never so that it breaks the line's shape.
      for (char c : key) line_.push_back(c <= ' ' || c == '=' || c == '"' ? '_' : c);
      line_.push_back('=');
      if (quoted) {
        detail::append_logfmt_value(line_, value);
      } else {
        line_.append(value);
      }
      return;
    }
    if (line_.size() > 1) line_.push_back(',');
    detail::append_json_string(line_, key);
    line_.push_back(':');
    if (quoted) {
      detail::append_json_string(line_, value);
    } else {
      line_.append(value);
    }
  }

  std::string finish() && {
    if (format_ == LogFormat::json) line_.push_back('}');
    return std::move(line_);
  }

 private:
  LogFormat format_;
  std::string line_;
};

}  // namespace

LogField::LogField(std::string_view key, double d) : key(key) {
  if (!std::isfinite(d)) {
    // Neither logfmt readers nor JSON take nan or inf as a number.
    value = std::isnan(d) ? "NaN" : (d > 0 ? "Infinity" : "-Infinity");
    quoted = true;
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  value = buf;
}

Logger::Logger(LoggerOptions options)
    : format_(options.format),
      sink_(std::move(options.sink)),
      min_level_(static_cast<int>(options.min_level)) {}

// Relaxed: the level is a setting on its own; no other data is published with it.
void Logger::set_min_level(LogLevel level) noexcept {
  min_level_.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool Logger::enabled(LogLevel level) const noexcept {
  return static_cast<int>(level) >= min_level_.load(std::memory_order_relaxed);
}

void Logger::log(LogLevel level, const Context& ctx, std::string_view message,
                 std::initializer_list<LogField> fields) const {
  if (!enabled(level)) return;
  LineWriter w(format_);
  std::string time;
  detail::append_utc_now(time);
  w.text("time", time);
  w.text("level", level_name(level));
  w.text("msg", message);
  if (const Trace* t = trace_of(ctx)) {
    w.text("trace_id", t->trace_id);
    w.text("span_id", t->span_id);
  }
  if (const std::string* id = ctx.value(request_id_key)) w.text("request_id", *id);
  for (const LogField& f : fields) w.field(f.key, f.value, f.quoted);
  detail::write_log_line(sink_, std::move(w).finish());
}

void Logger::log(LogLevel level, Request& req, std::string_view message,
                 std::initializer_list<LogField> fields) const {
  log(level, req.context(), message, fields);
}

}  // namespace goro::http
