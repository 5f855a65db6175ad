// The /debug/goro/ endpoints (debug.hpp) over goro::debug's dumps.
#include <goro/http/debug.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include <goro/http/status.hpp>
#include <goro/scheduler/debug.hpp>
#include <goro/scheduler/runtime.hpp>

#include "access.hpp"

namespace goro::http::debug {

namespace {

constexpr std::string_view kIndex =
    "goro debug endpoints\n"
    "\n"
    "goroutines            every goroutine: state, wait, stack, creator (?debug=1: grouped,\n"
    "                      ?format=json)\n"
    "sched                 the scheduler: schedtrace line, per-P counters (?format=json)\n"
    "trace?seconds=N       what the scheduler did for N seconds (default 1, at most 60),\n"
    "                      as Chrome trace-event JSON: open it at ui.perfetto.dev\n";

}  // namespace

constexpr std::string_view kReadOnly = "the debug endpoints are read-only";

Handler handler() {
  return [](Request& req, ResponseWriter& w) {
    if (req.method() != "GET" && req.method() != "HEAD") {
      w.header().set("Allow", "GET, HEAD");
      (void)detail::send_builtin_error(
          req, w, status::method_not_allowed,
          detail::default_error_body(status::method_not_allowed, kReadOnly), kReadOnly, "debug");
      return;
    }
    std::string_view path = req.path();
    const std::size_t slash = path.rfind('/');
    const std::string_view leaf = slash == std::string_view::npos ? path : path.substr(slash + 1);
    const bool json = req.query("format").value_or("") == "json";
    w.header().set("Cache-Control", "no-store");
    if (leaf.empty()) {
      w.text(kIndex);
    } else if (leaf == "goroutines") {
      const std::string level = req.query("debug").value_or("2");
      if (level != "1" && level != "2") {
        constexpr std::string_view kLevel = "debug must be 1 (grouped) or 2 (every goroutine)";
        (void)detail::send_builtin_error(req, w, status::bad_request,
                                         detail::default_error_body(status::bad_request, kLevel),
                                         kLevel, "debug");
        return;
      }
      // A dump walks every parked stack: off the P, as a blocking call.
      std::string body = goro::blocking([&] {
        return json ? goro::debug::goroutine_dump_json()
                    : goro::debug::goroutine_dump(level == "1" ? 1 : 2);
      });
      if (json) {
        w.json(body);
      } else {
        w.text(body);
      }
    } else if (leaf == "trace") {
      const std::string text = req.query("seconds").value_or("1");
      char* end = nullptr;
      const double seconds = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(seconds > 0) || seconds > 60) {
        constexpr std::string_view kSeconds = "seconds must be a number above 0 and at most 60";
        (void)detail::send_builtin_error(req, w, status::bad_request,
                                         detail::default_error_body(status::bad_request, kSeconds),
                                         kSeconds, "debug");
        return;
      }
      std::string body = goro::debug::trace_json(
          std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
      w.header().set("Content-Disposition", "attachment; filename=\"goro-trace.json\"");
      w.json(body);
    } else if (leaf == "sched") {
      if (json) {
        w.json(goro::debug::sched_json());
      } else {
        w.text(goro::debug::sched_text());
      }
    } else {
      const std::string message =
          "no debug endpoint '" + std::string(leaf) + "' (see the index one level up)";
      (void)detail::send_builtin_error(req, w, status::not_found,
                                       detail::default_error_body(status::not_found, message),
                                       message, "debug");
    }
  };
}

}  // namespace goro::http::debug
