// goro::App::run: the listeners (its own, or those it was given), serving, and the
// process's life around it: signals, readiness, the drain, graceful shutdown and
// in-place upgrades (see app.hpp).
#include <goro/app.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <goro/net/activation.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/signal.hpp>
#include <goro/scheduler/waitgroup.hpp>

#ifndef GORO_VERSION
#define GORO_VERSION "unknown"
#endif

namespace goro {

namespace {

using Clock = std::chrono::steady_clock;

// One socket the server accepts on, plain or under TLS.
struct Endpoint {
  std::string name;  // LISTEN_FDNAMES
  std::unique_ptr<net::Listener> plain;
  std::unique_ptr<net::TlsListener> secure;

  net::Listener& socket() { return secure ? secure->inner() : *plain; }
};

std::string seconds(std::chrono::nanoseconds d) {
  std::ostringstream out;
  out << std::chrono::duration<double>(d).count() << " s";
  return out.str();
}

// The process id into path, whole or not at all (a temporary file renamed over it).
std::error_code write_pid_file(const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ::getpid() << "\n";
    if (!out.flush()) return std::make_error_code(std::errc::io_error);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return {errno, std::system_category()};
  return {};
}

// Removes path if it still names this process (a stop that was no upgrade; after one,
// the file is left to the new process).
void remove_pid_file(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (in >> pid && pid == static_cast<long>(::getpid())) std::remove(path.c_str());
}

// What became of an upgrade's new process.
struct Upgrade {
  int pid = -1;
  std::string failure;  // empty: it said READY=1
};

// Starts program with args and the endpoints' sockets, and waits up to timeout for its
// READY=1 (polling its exit every 100 ms meanwhile). A process not ready in time is sent
// SIGTERM: it may already have accepted connections, which it then finishes.
Upgrade start_upgrade(const std::string& program, const std::vector<std::string>& args,
                      std::vector<Endpoint>& endpoints, std::chrono::nanoseconds timeout) {
  Upgrade u;
  Result<net::NotifySocket> ready = net::NotifySocket::open();
  if (!ready) {
    u.failure = "notification socket: " + ready.error().message();
    return u;
  }
  std::vector<net::PassedListener> passed;
  for (Endpoint& e : endpoints) passed.push_back({e.name, e.socket().fd()});
  Result<int> pid =
      net::start_with_listeners(program, args, passed, {"NOTIFY_SOCKET=" + ready->name()});
  if (!pid) {
    u.failure = "starting " + program + ": " + pid.error().message();
    return u;
  }
  u.pid = *pid;
  const Clock::time_point until = Clock::now() + timeout;
  for (;;) {
    const Clock::time_point now = Clock::now();
    Result<std::string> message =
        ready->receive(std::min(until, now + std::chrono::milliseconds(100)));
    if (message && ("\n" + *message + "\n").find("\nREADY=1\n") != std::string::npos) return u;
    int status = 0;
    int waited = 0;
    goro::blocking([&] { waited = ::waitpid(u.pid, &status, WNOHANG); });
    if (waited == u.pid) {
      u.failure = program + " (pid " + std::to_string(u.pid) + ") exited before it was ready (" +
                  (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                     : "signal " + std::to_string(WTERMSIG(status))) +
                  ")";
      return u;
    }
    if (Clock::now() >= until) {
      ::kill(u.pid, SIGTERM);
      u.failure = "process " + std::to_string(u.pid) + " not ready after " + seconds(timeout) +
                  "; sent it SIGTERM";
      return u;
    }
  }
}

}  // namespace

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
        if (std::error_code ec = goro::signal_notify(signals, {SIGINT, SIGTERM, SIGUSR2})) {
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
          tls_context = *ctx;
        }
        // The sockets: those the process was given (socket activation, an upgrade), else
        // its own on the address.
        std::vector<Endpoint> endpoints;
        Result<std::vector<net::InheritedListener>> inherited = net::inherited_listeners();
        if (!inherited) {
          log("LISTEN_FDS: the sockets passed are not listening stream sockets: " +
              inherited.error().message());
          return 1;
        }
        for (net::InheritedListener& l : *inherited) {
          endpoints.push_back({l.name, std::make_unique<net::Listener>(std::move(l.listener)), {}});
        }
        if (endpoints.empty()) {
          auto ln = net::listen("tcp", options_.addr);
          if (!ln) {
            log("cannot listen on " + options_.addr + ": " + ln.error().message());
            return 1;
          }
          endpoints.push_back({tls ? "https" : "http", std::make_unique<net::Listener>(std::move(*ln)), {}});
        } else {
          std::string names;
          for (const Endpoint& e : endpoints) names += " " + e.name;
          say("serving the " + std::to_string(endpoints.size()) +
              " listening sockets it was given (LISTEN_FDS):" + names);
        }
        if (tls) {
          for (Endpoint& e : endpoints) {
            e.secure = std::make_unique<net::TlsListener>(std::move(*e.plain), tls_context);
            e.plain.reset();
          }
          net::watch_files(tls_context, options_.tls_reload_interval, watch_stop,
                           [this](const goro::Error& e) { report_reload("change", e); });
          // SIGHUP reloads the certificate (below), as nginx's reload does.
          if (std::error_code ec = goro::signal_notify(signals, {SIGHUP})) {
            log("signals: " + ec.message());
            return 1;
          }
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
        // Outermost: the probes are answered before the handler, its log and its metrics.
        handler = http::chain(std::move(handler), {http::probes(options_.probes)});
        http::Server server(std::move(server_options), std::move(handler));
        std::string addresses;
        for (Endpoint& e : endpoints) {
          if (!addresses.empty()) addresses += ", ";
          addresses += std::string(tls ? "https" : "http") + "://" + e.socket().addr().to_string();
        }
        std::printf("%s: serving %s on %d Ps (goro %s)\n", options_.name.c_str(),
                    addresses.c_str(), goro::maxprocs(), GORO_VERSION);
        std::fflush(stdout);

        goro::Chan<std::error_code> served(static_cast<int>(endpoints.size()));
        goro::WaitGroup serving;
        for (Endpoint& e : endpoints) {
          serving.add(1);
          goro::go([&server, &served, &serving, &e] {
            served.send(e.secure ? server.serve(*e.secure) : server.serve(*e.plain));
            serving.done();
          });
        }
        // Ready once readiness first holds: systemd (Type=notify) or the process that
        // started this one for an upgrade hears READY=1, and the pid file is written.
        goro::WaitGroup announcing;
        announcing.add(1);
        goro::go([&] {
          const Context stopping = server.drain_context();
          while (!server.readiness(stopping).ready) {
            if (goro::sleep(std::chrono::milliseconds(50), stopping)) {
              announcing.done();
              return;
            }
          }
          if (std::error_code ec = net::notify("READY=1")) log("NOTIFY_SOCKET: " + ec.message());
          if (!options_.pid_file.empty()) {
            if (std::error_code ec = write_pid_file(options_.pid_file)) {
              log("pid file " + options_.pid_file + ": " + ec.message());
            }
          }
          announcing.done();
        });

        std::optional<int> sig;
        std::optional<std::error_code> failed;
        bool upgraded = false;
        for (;;) {
          sig.reset();
          goro::select(goro::recv_case(signals, sig), goro::recv_case(served, failed));
          if (!sig) break;
          if (*sig == SIGHUP) {
            report_reload("SIGHUP", tls_context->reload());
            continue;
          }
          if (*sig != SIGUSR2) break;
          say("SIGUSR2: upgrading: starting " + program_);
          Upgrade u = start_upgrade(program_, argv_, endpoints, options_.upgrade_timeout);
          if (!u.failure.empty()) {
            log("SIGUSR2: upgrade failed, still serving: " + u.failure);
            continue;
          }
          say("SIGUSR2: process " + std::to_string(u.pid) +
              " serves on the same sockets; this one stops");
          upgraded = true;
          break;
        }
        if (!failed && !upgraded && *sig == SIGTERM && options_.drain_delay.count() > 0) {
          // Readiness off first: whoever reads the line may ask /readyz at once.
          server.drain();
          say("SIGTERM: draining for " + seconds(options_.drain_delay) +
              ": /readyz answers 503 while serving goes on");
          (void)net::notify("STOPPING=1");
          const Clock::time_point until = Clock::now() + options_.drain_delay;
          for (;;) {
            std::optional<int> again;
            const auto left = until - Clock::now();
            if (left <= std::chrono::nanoseconds::zero()) break;
            const int which = goro::select(goro::recv_case(signals, again),
                                           goro::recv_case(served, failed),
                                           goro::timeout_case(left));
            if (which != 0) break;
            if (again && *again == SIGHUP) {
              report_reload("SIGHUP", tls_context->reload());
            } else if (again && *again == SIGUSR2) {
              log("SIGUSR2: ignored: the server is draining");
            } else {
              say(std::string(again && *again == SIGINT ? "SIGINT" : "SIGTERM") +
                  ": drain cut short");
              break;
            }
          }
        }
        stop_watching();
        (void)net::notify("STOPPING=1");
        const auto deadline = Clock::now() + options_.shutdown_timeout;
        if (failed) {
          // A listener broke: nothing more can be accepted there.
          log("serving stopped: " + failed->message());
          server.shutdown(deadline);
          serving.wait();
          announcing.wait();
          return 1;
        }
        const char* cause = upgraded ? "SIGUSR2" : *sig == SIGINT ? "SIGINT" : "SIGTERM";
        say(std::string(cause) + ": shutting down, " + std::to_string(server.connection_count()) +
            " connections get up to " + seconds(options_.shutdown_timeout));
        const std::error_code shut = server.shutdown(deadline);
        serving.wait();
        announcing.wait();
        if (shut) {
          // The handlers still running had their contexts cancelled and their connections
          // closed: give them a moment to return (and finish what they log) before main
          // returns and the runtime abandons them.
          const auto until = Clock::now() + std::chrono::seconds(1);
          while (server.connection_count() > 0 && Clock::now() < until)
            goro::sleep(std::chrono::milliseconds(5));
          log("shutdown: " + shut.message() + " (connections still open were closed)");
        }
        goro::signal_stop(signals);
        // After an upgrade the file is the new process's: it writes it right after its
        // READY=1, perhaps only now, and a look-then-remove here could remove its pid.
        if (!options_.pid_file.empty() && !upgraded) remove_pid_file(options_.pid_file);
        return 0;
      },
      goro::Config{.maxprocs = options_.maxprocs});
}

}  // namespace goro
