// goro::App: runs an HTTP service the way production wants it, in one call.
//
//   int main(int argc, char** argv) {
//     goro::App app(argc, argv, {.name = "hello"});
//     std::string& greeting = app.flags().add("greeting", "hi", "what /hello says");
//     if (std::optional<int> exit = app.parse()) return *exit;  // --help, a bad flag
//     goro::http::Router r;
//     r.handle("GET /hello", [&](auto& req, auto& w) { w.text(greeting + "\n"); });
//     return app.run(r);
//   }
//
// Flags: App's own (below) and the program's, defined on flags() before parse(), are
// read by one goro::FlagSet (flags.hpp): --help lists them all and exits 0, an unknown
// flag or a bad value is an error and exit code 2. parse() comes before the options are
// final: what it read can still shape options() before run(). A program that defines no
// flags of its own may call run() directly (it parses first). Arguments that are not
// flags are in args().
//
// What run() does:
//  - listens on the address from --addr HOST:PORT, else $GORO_ADDR, else $PORT (":PORT":
//    every interface), else AppOptions::addr; HTTPS when --tls-cert/--tls-key (or the
//    options) name a certificate and key;
//  - prints one startup line on stdout: "hello: serving http://127.0.0.1:8080 on 4 Ps
//    (goro 0.1.0)";
//  - over HTTPS, reloads the certificate and key files on SIGHUP (TlsContext::reload):
//    new handshakes get the new certificate, open connections keep theirs; a file that
//    does not load is logged, naming it, and the previous certificate stays in use;
//    with --tls-reload-interval, also when the files change;
//  - or, started by systemd's socket activation (LISTEN_FDS) or by an upgrade (below),
//    serves the listening sockets it was given instead, and needs no address;
//  - answers liveness on /healthz and readiness on /readyz (http::probes, ahead of the
//    handler and its logging; AppOptions::probes moves or removes them): ready while
//    serving and every readiness check (add_readiness_check) holds;
//  - once serving, says so: READY=1 to systemd when NOTIFY_SOCKET is set (Type=notify),
//    and its pid into --pid-file;
//  - on SIGTERM drains: readiness turns false at once (/readyz 503, Server::drain,
//    http::drain_context cancelled) while it goes on accepting and serving for the drain
//    delay (--drain-delay, $GORO_DRAIN_DELAY, default 5 s: what load balancers and
//    Kubernetes' endpoints take to stop sending traffic); a second SIGTERM or a SIGINT
//    ends the drain early; SIGINT (Ctrl-C) skips it;
//  - then shuts down gracefully: stops accepting, lets requests in flight finish for up
//    to the shutdown timeout (--shutdown-timeout, $GORO_SHUTDOWN_TIMEOUT, a duration such
//    as 10s or 2.5, default 10 s; drain and shutdown together fit Kubernetes' default
//    terminationGracePeriodSeconds of 30), during which Server::shutdown_context() (and
//    http::shutdown_context(req)) is cancelled so long-lived handlers can end early
//    (a WebSocket closing with 1001); HTTP/2 connections get GOAWAY; at the deadline the
//    remaining request contexts are cancelled and their connections closed, and their
//    handlers get up to 1 s more to return;
//  - on SIGUSR2 upgrades in place, as nginx does: starts its own binary again (the path
//    it was started by, so a new file there is what runs) with the same arguments and its
//    listening sockets passed as socket activation passes them, waits until the new
//    process says READY=1 (up to --upgrade-timeout, 30 s), then stops accepting and
//    shuts down as above with no drain (the new process accepts on the same sockets, so
//    no connection is refused); if the new process fails or is not ready in time, it says
//    why and goes on serving;
//  - returns the process's exit code: 0 after a shutdown, 1 with a message naming the
//    problem when it cannot listen (address in use, bad certificate) or open the access
//    log, 2 for a bad flag or environment variable.
//
// App's flags: --addr, --tls-cert, --tls-key, --tls-reload-interval, --drain-delay,
// --shutdown-timeout, --upgrade-timeout, --pid-file, --access-log[=FORMAT] (logfmt, json
// or common; one line per request and per reply the server makes on its own),
// --access-log-file PATH (instead of stderr), --request-ids (an id on every request and
// reply, ServerOptions::request_ids; access logging turns it on too), --trace.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/base/error.hpp>
#include <goro/flags.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/probes.hpp>
#include <goro/http/server.hpp>
#include <goro/http/trace.hpp>

namespace goro {

struct AppOptions {
  // Names the program in its log lines and help; empty: the base name of argv[0].
  std::string name{};
  // The address when neither --addr, GORO_ADDR nor PORT gives one.
  std::string addr = "127.0.0.1:8080";
  // After SIGTERM, how long readiness says no while serving goes on, before the server
  // stops accepting (see above); zero: it stops at once. --drain-delay; $GORO_DRAIN_DELAY
  // replaces this default.
  std::chrono::nanoseconds drain_delay = std::chrono::seconds(5);
  // How long a shutdown lets requests in flight finish. --shutdown-timeout;
  // $GORO_SHUTDOWN_TIMEOUT replaces this default.
  std::chrono::nanoseconds shutdown_timeout = std::chrono::seconds(10);
  // How long an upgrade (SIGUSR2) waits for the new process's READY=1. --upgrade-timeout.
  std::chrono::nanoseconds upgrade_timeout = std::chrono::seconds(30);
  // Where the process id goes once serving (removed at exit if it is still this
  // process's); empty: nowhere. --pid-file.
  std::string pid_file{};
  // The paths of the liveness and readiness probes; an empty path is not served.
  http::ProbeOptions probes{};
  // Serve HTTPS with this certificate chain and key (PEM files); --tls-cert/--tls-key.
  // ALPN offers "h2" too unless server.enable_http2 is off.
  std::string tls_cert{};
  std::string tls_key{};
  // Besides SIGHUP, reload the certificate when its files change, looking this often
  // (net::watch_files); zero: only on SIGHUP. --tls-reload-interval.
  std::chrono::nanoseconds tls_reload_interval{0};
  // Ps for the runtime; 0: goro::Config's default (GORO_MAXPROCS, the cgroup quota, the
  // cores).
  int maxprocs = 0;
  // Access logging, off unless set: one line per request (http::access_log()) and one
  // per reply the server makes on its own (http::log_error_replies), in the format and
  // to the sink given (an empty sink: stderr; http::open_log_file for a file).
  // --access-log[=FORMAT] turns it on; --access-log-file PATH turns it on into PATH.
  std::optional<http::AccessLogOptions> access_log{};
  // Gives every request an id (ServerOptions::request_ids): on its response, its
  // context (http::request_id_of) and the server's own replies. --request-ids; on
  // whenever access logging is.
  bool request_ids = false;
  // W3C trace context, off unless set: each request continues the caller's traceparent
  // or starts a trace (http::trace()), outside the access log, which then stamps its
  // trace_id and span_id. --trace turns it on with default options.
  std::optional<http::TraceOptions> trace{};
  http::ServerOptions server{};
};

class App {
 public:
  // Keeps argv for parse() and defines App's flags (see above) on flags(), their
  // defaults taken from options after the environment (GORO_ADDR, PORT) had its say.
  App(int argc, char** argv, AppOptions options = {});
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // The flag set: define the program's flags here before parse().
  FlagSet& flags() noexcept { return flags_; }
  // Reads the command line, once: nullopt to go on, else the exit code the program
  // should return now (0 after --help printed the usage, 2 after a bad flag, with a
  // message on stderr). Later calls return the first answer.
  std::optional<int> parse();

  // The arguments that are not flags, in order (argv[0] excluded); parses first if
  // parse() was not called.
  const std::vector<std::string>& args();
  // The address run() will listen on.
  const std::string& addr() const noexcept { return options_.addr; }
  // Readiness (/readyz) also asks check, under name, each time it is probed; see
  // http::ReadinessCheck. Call before run(), or from the function run(make) calls (a
  // check on the database pool it makes).
  void add_readiness_check(std::string name, std::function<goro::Error(const Context&)> check);

  // The options, flags applied once parse() ran; may be changed until run().
  AppOptions& options() noexcept { return options_; }
  const AppOptions& options() const noexcept { return options_; }
  const std::string& name() const noexcept { return options_.name; }

  // Serves handler (see the top of this file) and returns the exit code. Runs goro::run:
  // call it from main, not from a goroutine.
  int run(http::Handler handler);
  // The same with a handler made on the main goroutine, once the runtime is up (for
  // handlers whose setup needs it: a client, a pool of connections). An exception from
  // make ends run() with exit code 1 and its message.
  int run(std::function<http::Handler()> make);

  // Prints "name: message" on stderr, the way run() reports.
  void log(std::string_view message) const;

 private:
  // A line saying how a certificate reload (on SIGHUP, or a change of the files) went.
  void report_reload(std::string_view why, const goro::Error& result) const;
  // Prints "name: message" on stdout (what an operator follows), flushed.
  void say(std::string_view message) const;

  AppOptions options_;
  FlagSet flags_;
  std::vector<std::string> argv_;
  std::optional<std::optional<int>> parsed_;
  std::optional<http::AccessLogFormat> access_log_format_;
  std::string access_log_file_;
  bool trace_flag_ = false;
  // The program as it was started (absolute, links not resolved): what an upgrade runs.
  std::string program_;
  // A GORO_* variable that does not parse, named, for parse() to report.
  std::string environment_error_;
};

}  // namespace goro
