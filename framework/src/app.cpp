// goro::App: flags and environment, the startup line, signals and graceful shutdown
// around one http::Server (see app.hpp).
#include <goro/app.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>

#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/signal.hpp>

#ifndef GORO_VERSION
#define GORO_VERSION "unknown"
#endif

namespace goro {

namespace {

std::string base_name(const char* path) {
  std::string_view p = path != nullptr ? path : "goro";
  const std::size_t slash = p.rfind('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

// The options as the environment leaves them: a name, and the address from GORO_ADDR or
// PORT (a flag still wins).
AppOptions from_environment(AppOptions options, int argc, char** argv) {
  if (options.name.empty()) options.name = base_name(argc > 0 ? argv[0] : nullptr);
  if (const char* a = std::getenv("GORO_ADDR"); a != nullptr && *a != '\0') {
    options.addr = a;
  } else if (const char* p = std::getenv("PORT"); p != nullptr && *p != '\0') {
    options.addr = std::string(":") + p;
  }
  return options;
}

}  // namespace

App::App(int argc, char** argv, AppOptions options)
    : options_(from_environment(std::move(options), argc, argv)), flags_(options_.name) {
  for (int i = 0; i < argc; ++i) argv_.emplace_back(argv[i] != nullptr ? argv[i] : "");
  flags_.var("addr", options_.addr,
             "listen on `HOST:PORT` (else $GORO_ADDR, or $PORT for every interface)");
  flags_.var("tls-cert", options_.tls_cert,
             "serve HTTPS with the certificate chain in `FILE` (PEM), with --tls-key");
  flags_.var("tls-key", options_.tls_key, "the private key for --tls-cert, in `FILE` (PEM)");
  flags_.var("tls-reload-interval", options_.tls_reload_interval,
             "also reload --tls-cert/--tls-key when they change, looking every `duration` (0: "
             "only on SIGHUP)");
  flags_.var("shutdown-timeout", options_.shutdown_timeout,
             "how long a shutdown lets requests in flight finish (10s, 2.5, 500ms)");
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
  std::printf("%s: %s: reloaded TLS certificate %s\n", options_.name.c_str(), cause.c_str(),
              options_.tls_cert.c_str());
  std::fflush(stdout);
}

void App::log(std::string_view message) const {
  std::fprintf(stderr, "%s: %.*s\n", options_.name.c_str(), static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
}

int App::run(http::Handler handler) {
  return run(std::function<http::Handler()>([&handler] { return std::move(handler); }));
}

int App::run(std::function<http::Handler()> make) {
  if (std::optional<int> exit = parse()) return *exit;
  // A client that goes away must not end the process with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  return goro::run(
      [&]() -> int {
        goro::Chan<int> signals(1);
        if (std::error_code ec = goro::signal_notify(signals, {SIGINT, SIGTERM})) {
          log("signals: " + ec.message());
          return 1;
        }
        http::Handler handler;
        try {
          handler = make();
        } catch (const std::exception& e) {
          log(e.what());
          return 1;
        }
        const bool tls = !options_.tls_cert.empty();
        std::shared_ptr<net::TlsContext> tls_context;
        auto [watch_stop, stop_watching] = goro::with_cancel(Context());
        std::optional<net::Listener> plain;
        std::optional<net::TlsListener> secure;
        if (tls) {
          net::TlsConfig config;
          config.certificates.push_back({options_.tls_cert, options_.tls_key});
          // HTTP/2 through ALPN when the server speaks it.
          if (options_.server.enable_http2) {
            config.alpn = {"h2", "http/1.1"};
          } else {
            config.alpn = {"http/1.1"};
          }
          auto ctx = net::TlsContext::server(config);
          if (!ctx) {
            log("TLS certificate " + options_.tls_cert + ": " + ctx.error().message());
            return 1;
          }
          auto ln = net::tls_listen("tcp", options_.addr, *ctx);
          if (!ln) {
            log("cannot listen on " + options_.addr + ": " + ln.error().message());
            return 1;
          }
          secure.emplace(std::move(*ln));
          tls_context = *ctx;
          net::watch_files(tls_context, options_.tls_reload_interval, watch_stop,
                           [this](const goro::Error& e) { report_reload("change", e); });
          // SIGHUP reloads the certificate (below), as nginx's reload does.
          if (std::error_code ec = goro::signal_notify(signals, {SIGHUP})) {
            log("signals: " + ec.message());
            return 1;
          }
        } else {
          auto ln = net::listen("tcp", options_.addr);
          if (!ln) {
            log("cannot listen on " + options_.addr + ": " + ln.error().message());
            return 1;
          }
          plain.emplace(std::move(*ln));
        }
        http::ServerOptions server_options = options_.server;
        server_options.request_ids |= options_.request_ids || options_.access_log.has_value();
        if (options_.access_log) {
          http::AccessLogOptions log_options = *options_.access_log;
          if (!access_log_file_.empty()) {
            Result<http::LogSink> file = http::open_log_file(access_log_file_);
            if (!file) {
              log("access log " + access_log_file_ + ": " + file.error().message());
              return 1;
            }
            log_options.sink = std::move(*file);
          }
          handler = http::chain(std::move(handler), {http::access_log(log_options)});
          http::ErrorReplyHook own = std::move(server_options.on_error_reply);
          http::ErrorReplyHook log_replies = http::log_error_replies(log_options);
          server_options.on_error_reply = [own, log_replies](http::ErrorReply& reply) {
            if (own) own(reply);
            log_replies(reply);
          };
        }
        if (options_.trace) handler = http::chain(std::move(handler), {http::trace(*options_.trace)});
        http::Server server(std::move(server_options), std::move(handler));
        const net::Addr& bound = tls ? secure->addr() : plain->addr();
        std::printf("%s: serving %s://%s on %d Ps (goro %s)\n", options_.name.c_str(),
                    tls ? "https" : "http", bound.to_string().c_str(), goro::maxprocs(),
                    GORO_VERSION);
        std::fflush(stdout);

        goro::Chan<std::error_code> served(1);
        goro::go([&] { served.send(tls ? server.serve(*secure) : server.serve(*plain)); });
        std::optional<int> sig;
        std::optional<std::error_code> failed;
        for (;;) {
          sig.reset();
          goro::select(goro::recv_case(signals, sig), goro::recv_case(served, failed));
          if (!sig || *sig != SIGHUP) break;
          report_reload("SIGHUP", tls_context->reload());
        }
        stop_watching();
        if (failed) {
          // The listener broke: nothing more can be accepted.
          log("serving stopped: " + failed->message());
          server.shutdown(std::chrono::steady_clock::now() + options_.shutdown_timeout);
          return 1;
        }
        const double grace = std::chrono::duration<double>(options_.shutdown_timeout).count();
        std::printf("%s: %s: shutting down, %zu connections get up to %g s\n",
                    options_.name.c_str(), sig && *sig == SIGINT ? "SIGINT" : "SIGTERM",
                    server.connection_count(), grace);
        std::fflush(stdout);
        const std::error_code shut =
            server.shutdown(std::chrono::steady_clock::now() + options_.shutdown_timeout);
        served.recv();
        if (shut) {
          // The handlers still running had their contexts cancelled and their connections
          // closed: give them a moment to return (and finish what they log) before main
          // returns and the runtime abandons them.
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
          while (server.connection_count() > 0 && std::chrono::steady_clock::now() < until)
            goro::sleep(std::chrono::milliseconds(5));
          log("shutdown: " + shut.message() + " (connections still open were closed)");
        }
        goro::signal_stop(signals);
        return 0;
      },
      goro::Config{.maxprocs = options_.maxprocs});
}

}  // namespace goro
