#include <goro/http/middleware.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>
#include <goro/http/trace.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "access.hpp"
#include "trace/log_line.hpp"

namespace goro::http {
namespace {

// Logs the exception and answers 500 in place of what the handler had buffered.
void recovered(const LogSink& sink, Request& req, ResponseWriter& w, const char* what) {
  std::string line = "recovered from exception in handler for ";
  line.append(req.method());
  line.push_back(' ');
  line.append(req.target());
  line.append(": ");
  line.append(what);
  detail::write_log_line(sink, line);
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

using detail::append_json_string;
using detail::append_logfmt_value;
using detail::append_utc_now;

// The fields of one access log line.
struct LogEntry {
  std::string_view method, target, remote, request_id;
  std::string_view trace_id, span_id;  // empty: the request has no trace
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
      line.push_back(' ');
      line.append(e.trace_id.empty() ? "-" : e.trace_id);
      line.push_back(' ');
      line.append(e.span_id.empty() ? "-" : e.span_id);
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
      line.append(" trace_id=");
      append_logfmt_value(line, e.trace_id);
      line.append(" span_id=");
      append_logfmt_value(line, e.span_id);
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
      for (auto [name, value] :
           {std::pair{",\"trace_id\":", e.trace_id}, std::pair{",\"span_id\":", e.span_id}}) {
        line.append(name);
        if (value.empty()) {
          line.append("null");
        } else {
          append_json_string(line, value);
        }
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
      if (const Trace* t = trace_of(req)) {
        e.trace_id = t->trace_id;
        e.span_id = t->span_id;
      }
      detail::write_log_line(options.sink, format_entry(options.format, e));
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
    std::optional<TraceParent> incoming;
    for (const HeaderField& f : reply.request_headers) {
      if (e.request_id.empty() && iequals(f.name, "x-request-id")) e.request_id = f.value;
      if (!incoming && iequals(f.name, "traceparent")) incoming = parse_traceparent(f.value);
    }
    // No span of ours handled it: the trace is the caller's, the span unknown.
    if (incoming) e.trace_id = incoming->trace_id;
    detail::write_log_line(options.sink, format_entry(options.format, e));
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
  return LogSink([file](std::string_view line) { detail::write_whole_line(*file, line); });
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
