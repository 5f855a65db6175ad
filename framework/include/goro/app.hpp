// goro::App: runs an HTTP service the way production wants it, in one call.
//
//   int main(int argc, char** argv) {
//     goro::http::Router r;
//     r.handle("GET /hello", [](auto& req, auto& w) { w.text("hi\n"); });
//     return goro::App(argc, argv, {.name = "hello"}).run(r);
//   }
//
// What run() does:
//  - listens on the address from --addr HOST:PORT, else $GORO_ADDR, else $PORT (":PORT":
//    every interface), else AppOptions::addr; HTTPS when --tls-cert/--tls-key (or the
//    options) name a certificate and key;
//  - prints one startup line on stdout: "hello: serving http://127.0.0.1:8080 on 4 Ps
//    (goro 0.1.0)";
//  - serves until SIGTERM or SIGINT, then shuts down gracefully: stops accepting, lets
//    requests in flight finish for up to the shutdown timeout (--shutdown-timeout
//    SECONDS, default 10), during which Server::shutdown_context() (and
//    http::shutdown_context(req)) is cancelled so long-lived handlers can end early; at
//    the deadline the remaining request contexts are cancelled and their connections
//    closed, and their handlers get up to 1 s more to return;
//  - returns the process's exit code: 0 after a shutdown, 1 with a message naming the
//    problem when it cannot listen (address in use, bad certificate), 2 for a bad flag.
// Arguments it does not know are left for the program in args().
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/middleware.hpp>
#include <goro/http/server.hpp>

namespace goro {

struct AppOptions {
  // Names the program in its log lines; empty: the base name of argv[0].
  std::string name;
  // The address when neither --addr, GORO_ADDR nor PORT gives one.
  std::string addr = "127.0.0.1:8080";
  // How long a shutdown lets requests in flight finish.
  std::chrono::nanoseconds shutdown_timeout = std::chrono::seconds(10);
  // Serve HTTPS with this certificate chain and key (PEM files); --tls-cert/--tls-key.
  // ALPN offers "h2" too unless server.enable_http2 is off.
  std::string tls_cert, tls_key;
  // Ps for the runtime; 0: goro::Config's default (GORO_MAXPROCS, the cgroup quota, the
  // cores).
  int maxprocs = 0;
  // Access logging, off unless set (--access-log[=logfmt|json|common]): one line per
  // request on stderr, through http::request_id() and http::access_log(), and one per
  // reply the server makes on its own (http::log_error_replies).
  std::optional<http::AccessLogFormat> access_log;
  http::ServerOptions server;
};

class App {
 public:
  // Takes the flags App knows (--addr, --tls-cert, --tls-key, --shutdown-timeout, each
  // as "--flag value" or "--flag=value", and --access-log[=FORMAT]) out of argv; the
  // rest is in args().
  App(int argc, char** argv, AppOptions options = {});

  // The arguments App did not take, in order (argv[0] excluded).
  const std::vector<std::string>& args() const noexcept { return args_; }
  // The address run() will listen on.
  const std::string& addr() const noexcept { return options_.addr; }
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
  AppOptions options_;
  std::vector<std::string> args_;
  std::string flag_error_;
};

}  // namespace goro
