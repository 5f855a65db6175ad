// goro::App: options from the environment and the flags (see app.hpp); run() is in
// app_run.cpp.
#include <goro/app.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace goro {

namespace {

std::string base_name(const char* path) {
  std::string_view p = path != nullptr ? path : "goro";
  const std::size_t slash = p.rfind('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

// Reads the duration in the environment variable name into *target, if set; a message
// naming the variable into *error when it does not parse.
void duration_from_environment(const char* name, std::chrono::nanoseconds* target,
                               std::string* error) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return;
  std::optional<std::chrono::nanoseconds> d = parse_duration(v);
  if (d && d->count() >= 0) {
    *target = *d;
  } else if (error->empty()) {
    *error = std::string(name) + "='" + v + "': takes a duration such as 5s, 500ms or 1m30s";
  }
}

AppOptions with_name(AppOptions options, int argc, char** argv) {
  if (options.name.empty()) options.name = base_name(argc > 0 ? argv[0] : nullptr);
  return options;
}

// What the environment says: the address from GORO_ADDR or PORT, the drain delay and
// shutdown timeout from GORO_DRAIN_DELAY and GORO_SHUTDOWN_TIMEOUT (a flag still wins).
// Returns a message naming a variable that does not parse, else "".
std::string apply_environment(AppOptions& options) {
  if (const char* a = std::getenv("GORO_ADDR"); a != nullptr && *a != '\0') {
    options.addr = a;
  } else if (const char* p = std::getenv("PORT"); p != nullptr && *p != '\0') {
    options.addr = std::string(":") + p;
  }
  std::string error;
  duration_from_environment("GORO_DRAIN_DELAY", &options.drain_delay, &error);
  duration_from_environment("GORO_SHUTDOWN_TIMEOUT", &options.shutdown_timeout, &error);
  return error;
}

// argv[0] as an absolute path, for an upgrade to start again: made absolute against the
// working directory of the start, looked up in PATH when it has no slash; symbolic links
// are kept, so a link moved to a new release is what an upgrade runs.
std::string program_path(const char* argv0) {
  std::string a = argv0 != nullptr ? argv0 : "";
  if (a.empty()) return a;
  if (a.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "";
    while (!dirs.empty()) {
      const std::size_t colon = dirs.find(':');
      std::string candidate(dirs.substr(0, colon));
      candidate += "/" + a;
      if (::access(candidate.c_str(), X_OK) == 0) {
        a = candidate;
        break;
      }
      dirs = colon == std::string_view::npos ? "" : dirs.substr(colon + 1);
    }
  }
  if (a.front() != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) != nullptr) a = std::string(cwd) + "/" + a;
  }
  return a;
}

}  // namespace

App::App(int argc, char** argv, AppOptions options)
    : options_(with_name(std::move(options), argc, argv)),
      flags_(options_.name),
      program_(program_path(argc > 0 ? argv[0] : nullptr)),
      environment_error_(apply_environment(options_)) {
  for (int i = 0; i < argc; ++i) argv_.emplace_back(argv[i] != nullptr ? argv[i] : "");
  flags_.var("addr", options_.addr,
             "listen on `HOST:PORT` (else $GORO_ADDR, or $PORT for every interface)");
  flags_.var("tls-cert", options_.tls_cert,
             "serve HTTPS with the certificate chain in `FILE` (PEM), with --tls-key");
  flags_.var("tls-key", options_.tls_key, "the private key for --tls-cert, in `FILE` (PEM)");
  flags_.var("tls-reload-interval", options_.tls_reload_interval,
             "also reload --tls-cert/--tls-key when they change, looking every `duration` (0: "
             "only on SIGHUP)");
  flags_.var("drain-delay", options_.drain_delay,
             "after SIGTERM, how long /readyz says 503 while serving goes on, before the "
             "server stops accepting (else $GORO_DRAIN_DELAY; 0: none)");
  flags_.var("shutdown-timeout", options_.shutdown_timeout,
             "how long a shutdown lets requests in flight finish (10s, 2.5, 500ms; else "
             "$GORO_SHUTDOWN_TIMEOUT)");
  flags_.var("upgrade-timeout", options_.upgrade_timeout,
             "on SIGUSR2, how long the new process has to say it serves");
  flags_.var("pid-file", options_.pid_file, "write the process id to `FILE` once serving");
  flags_.func(
      "access-log", "log every request on stderr as `FORMAT`: logfmt (the default), json or common",
      [this](std::string_view format) {
        if (format.empty() || format == "logfmt") {
          access_log_format_ = http::AccessLogFormat::logfmt;
        } else if (format == "json") {
          access_log_format_ = http::AccessLogFormat::json;
        } else if (format == "common") {
          access_log_format_ = http::AccessLogFormat::common;
        } else {
          return std::string("takes logfmt, json or common");
        }
        return std::string();
      },
      /*takes_value=*/false);
  flags_.var("access-log-file", access_log_file_,
             "write the access log to `PATH` (appending) instead of stderr; turns it on");
  flags_.var("request-ids", options_.request_ids,
             "give every request an id (X-Request-Id) on its reply and in the log");
  flags_.var("trace", trace_flag_,
             "continue each caller's W3C trace (traceparent) or start one; ids in the access log");
}

std::optional<int> App::parse() {
  if (parsed_) return *parsed_;
  std::vector<const char*> argv;
  for (const std::string& a : argv_) argv.push_back(a.c_str());
  std::optional<int> exit = flags_.parse(static_cast<int>(argv.size()), argv.data());
  if (!exit && !environment_error_.empty()) {
    log(environment_error_);
    exit = 2;
  }
  if (!exit && options_.tls_cert.empty() != options_.tls_key.empty()) {
    log("--tls-cert and --tls-key go together");
    exit = 2;
  }
  if (!exit && trace_flag_ && !options_.trace) options_.trace = http::TraceOptions{};
  if (!exit && (access_log_format_ || !access_log_file_.empty())) {
    if (!options_.access_log) options_.access_log = http::AccessLogOptions{};
    if (access_log_format_) options_.access_log->format = *access_log_format_;
  }
  parsed_ = exit;
  return exit;
}

const std::vector<std::string>& App::args() {
  (void)parse();
  return flags_.args();
}

void App::report_reload(std::string_view why, const goro::Error& result) const {
  const std::string cause(why);
  if (result) {
    log(cause + ": TLS reload failed, still serving the previous certificate: " + result.what());
    return;
  }
  say(cause + ": reloaded TLS certificate " + options_.tls_cert);
}

void App::add_readiness_check(std::string name,
                              std::function<goro::Error(const Context&)> check) {
  options_.server.readiness_checks.push_back({std::move(name), std::move(check)});
}

void App::say(std::string_view message) const {
  std::printf("%s: %.*s\n", options_.name.c_str(), static_cast<int>(message.size()),
              message.data());
  std::fflush(stdout);
}

void App::log(std::string_view message) const {
  std::fprintf(stderr, "%s: %.*s\n", options_.name.c_str(), static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
}

}  // namespace goro
