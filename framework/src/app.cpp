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

// Parses a whole number of seconds, or a fraction ("2.5"); nullopt when it is not one.
std::optional<std::chrono::nanoseconds> parse_seconds(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(v >= 0) || v > 86400.0 * 365) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(v * 1e9));
}

}  // namespace

App::App(int argc, char** argv, AppOptions options) : options_(std::move(options)) {
  if (options_.name.empty()) options_.name = base_name(argc > 0 ? argv[0] : nullptr);
  // The environment first, so that a flag wins.
  if (const char* a = std::getenv("GORO_ADDR"); a != nullptr && *a != '\0') {
    options_.addr = a;
  } else if (const char* p = std::getenv("PORT"); p != nullptr && *p != '\0') {
    options_.addr = std::string(":") + p;
  }
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view flag = arg;
    std::optional<std::string> value;
    if (const std::size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    if (flag == "--access-log") {
      const std::string format = value.value_or("logfmt");
      if (format == "logfmt") {
        options_.access_log = http::AccessLogFormat::logfmt;
      } else if (format == "json") {
        options_.access_log = http::AccessLogFormat::json;
      } else if (format == "common") {
        options_.access_log = http::AccessLogFormat::common;
      } else {
        flag_error_ = "--access-log takes logfmt, json or common, not '" + format + "'";
      }
      continue;
    }
    if (flag != "--addr" && flag != "--tls-cert" && flag != "--tls-key" &&
        flag != "--shutdown-timeout") {
      args_.emplace_back(arg);
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) {
        flag_error_ = std::string(flag) + " needs a value";
        continue;
      }
      value = argv[++i];
    }
    if (flag == "--addr") {
      options_.addr = *value;
    } else if (flag == "--tls-cert") {
      options_.tls_cert = *value;
    } else if (flag == "--tls-key") {
      options_.tls_key = *value;
    } else if (auto d = parse_seconds(*value)) {
      options_.shutdown_timeout = *d;
    } else {
      flag_error_ = "--shutdown-timeout takes seconds, not '" + *value + "'";
    }
  }
  if (flag_error_.empty() && options_.tls_cert.empty() != options_.tls_key.empty())
    flag_error_ = "--tls-cert and --tls-key go together";
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
  if (!flag_error_.empty()) {
    log(flag_error_);
    return 2;
  }
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
        } else {
          auto ln = net::listen("tcp", options_.addr);
          if (!ln) {
            log("cannot listen on " + options_.addr + ": " + ln.error().message());
            return 1;
          }
          plain.emplace(std::move(*ln));
        }
        http::ServerOptions server_options = options_.server;
        if (options_.access_log) {
          const http::AccessLogOptions log_options{*options_.access_log, {}};
          handler = http::chain(std::move(handler),
                                {http::access_log(log_options), http::request_id()});
          http::ErrorReplyHook own = std::move(server_options.on_error_reply);
          http::ErrorReplyHook log_replies = http::log_error_replies(log_options);
          server_options.on_error_reply = [own, log_replies](http::ErrorReply& reply) {
            if (own) own(reply);
            log_replies(reply);
          };
        }
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
        goro::select(goro::recv_case(signals, sig), goro::recv_case(served, failed));
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
