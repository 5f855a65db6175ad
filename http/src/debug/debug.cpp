// The /debug/goro/ endpoints (debug.hpp) over goro::debug's dumps.
#include <goro/http/debug.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include <goro/http/status.hpp>
#include <goro/scheduler/debug.hpp>
#include <goro/scheduler/runtime.hpp>

#include "access.hpp"
#include "profile.hpp"

namespace goro::http::debug {

namespace {

constexpr std::string_view kIndex =
    "goro debug endpoints\n"
    "\n"
    "goroutines            every goroutine: state, wait, stack, creator (?debug=1: grouped,\n"
    "                      ?format=json)\n"
    "sched                 the scheduler: schedtrace line, per-P counters (?format=json)\n"
    "trace?seconds=N       what the scheduler did for N seconds (default 1, at most 60),\n"
    "                      as Chrome trace-event JSON: open it at ui.perfetto.dev\n"
    "pprof/                profiles in pprof's format (go tool pprof)\n";

constexpr std::string_view kPprofIndex =
    "goro pprof profiles, read by go tool pprof\n"
    "\n"
    "profile?seconds=N     CPU profile: the whole process sampled at 100 Hz for N seconds\n"
    "                      (default 30, at most 60); one at a time\n"
    "                      go tool pprof http://HOST/debug/goro/pprof/profile?seconds=5\n"
    "goroutine             every goroutine's stack, as Go's goroutine profile: parked ones\n"
    "                      with their stacks, the others by state (not stopped to be read)\n"
    "\n"
    "No heap profile: glibc's malloc does not sample allocations, and a heap profile\n"
    "without sampling would mean wrapping every allocation. Use heaptrack or jemalloc's\n"
    "profiler for the heap.\n";

constexpr int kDefaultProfileSeconds = 30;
constexpr int kMaxProfileSeconds = 60;

void send_debug_error(Request& req, ResponseWriter& w, int status, std::string_view message) {
  (void)detail::send_builtin_error(req, w, status, detail::default_error_body(status, message),
                                   message, "debug");
}

// GET .../pprof/profile?seconds=N: parks for the window, then answers the profile as Go's
// net/http/pprof does (a gzip-compressed profile.proto, as an attachment).
void serve_cpu_profile(Request& req, ResponseWriter& w) {
  const std::string text = req.query("seconds").value_or(std::to_string(kDefaultProfileSeconds));
  char* end = nullptr;
  errno = 0;
  const long seconds = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || errno != 0 || seconds < 1 ||
      seconds > kMaxProfileSeconds) {
    send_debug_error(req, w, status::bad_request,
                     "seconds must be a whole number from 1 to 60 (got '" + text + "')");
    return;
  }
  pprof::CpuProfileResult taken = pprof::profile_cpu(std::chrono::seconds(seconds));
  if (!taken.error.empty()) {
    send_debug_error(req, w,
                     taken.busy ? status::service_unavailable : status::internal_server_error,
                     "could not enable CPU profiling: " + taken.error);
    return;
  }
  // Symbolizing reads the modules' symbol tables: off the P.
  std::string body = goro::blocking([&] { return pprof::encode_pprof(taken.profile); });
  if (body.empty()) {
    send_debug_error(req, w, status::internal_server_error, "could not compress the profile");
    return;
  }
  w.header().set("Content-Type", "application/octet-stream");
  w.header().set("Content-Disposition", "attachment; filename=\"profile\"");
  (void)w.write(body);
}

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
    const std::string_view parent =
        slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
    const bool in_pprof = parent.ends_with("/pprof");
    const bool json = req.query("format").value_or("") == "json";
    w.header().set("Cache-Control", "no-store");
    if ((in_pprof && leaf.empty()) || (!in_pprof && leaf == "pprof")) {
      w.text(kPprofIndex);
    } else if (in_pprof && leaf == "profile") {
      serve_cpu_profile(req, w);
    } else if (in_pprof && leaf == "goroutine") {
      // Reading parked stacks and the symbol tables: off the P.
      std::string body =
          goro::blocking([] { return pprof::encode_pprof(pprof::goroutine_profile()); });
      w.header().set("Content-Type", "application/octet-stream");
      w.header().set("Content-Disposition", "attachment; filename=\"goroutine\"");
      (void)w.write(body);
    } else if (in_pprof) {
      const std::string message =
          "no pprof profile '" + std::string(leaf) +
          "' (the pprof/ index lists them; no heap profile: glibc's malloc does not sample)";
      send_debug_error(req, w, status::not_found, message);
    } else if (leaf.empty()) {
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
