// goro-demo: an HTTP server showing what goro does with plain blocking handler code.
//
//   goro-demo [--addr 127.0.0.1:8080] [--root DIR [--file-cache N]]
//             [--tls-cert cert.pem --tls-key key.pem]
//             [--shutdown-timeout 5s] [--access-log[=logfmt|json|common]]
//             [--access-log-file PATH] [--request-ids] [--debug] [--h2c]   (--help: all)
//   goro-demo --probe URL    GET URL (2 s limit); exit 0 on a 200, else 1 with the reason
//                            on stderr: the container's HEALTHCHECK, which needs no curl
//   goro-demo --text-body    prints the body of /text (the load kit gives it to nginx)
//
//   GET  /, /plaintext   "Hello, World!" (text/plain)
//   GET  /json           {"message":"Hello, World!"}
//   POST /echo           the request body, with its Content-Type
//   POST /upload         a multipart/form-data upload, streamed (never held in memory):
//                        "<sha256>  <filename>  <size>" per file part
//   GET  /sleep?ms=N     parks the goroutine N ms (goro::sleep), then "ok": costs no thread;
//                        ends at once if the client leaves (the request's context)
//   GET  /block?ms=N     a real blocking syscall (nanosleep) inside goro::blocking: the
//                        runtime hands the P to another thread meanwhile; then "ok"
//   GET  /cpu?ms=N       N ms of CPU without any runtime call (preemption at work)
//   GET  /stream?n=N     N chunks, each flushed on its own (chunked encoding)
//   GET  /text           a 12 KiB JSON document through compress(): zstd, br or gzip as
//                        the client's Accept-Encoding prefers (the kit's gzip-text)
//   GET  /static/...     files under --root (when given), the --file-cache (128) served
//                        lately kept open (FileServerOptions::cache_files)
//   GET  /healthz        200 "ok" while the process serves (goro::App's liveness probe)
//   GET  /readyz         200 "ok" while it should get traffic, 503 from the first moment
//                        of a shutdown (App's readiness probe; ?verbose says why)
//   GET  /ws/echo        a WebSocket that echoes every message (permessage-deflate when
//                        the client offers it); closed with 1001 when the server stops
//   GET  /metrics        Prometheus metrics: the runtime, the process, the server's
//                        connections and bytes, and every request's method, route,
//                        status, duration and size (instrument())
//   GET  /debug/goro/... goroutine dumps and scheduler state, with --debug only (stacks
//                        are not for the open Internet: bind --addr to 127.0.0.1, or
//                        publish the port on a private network only)
//   gRPC (where goro::grpc is built): every request whose Content-Type is
//   application/grpc goes to a gRPC server on the same port: helloworld.Greeter
//   (SayHello), grpc.health.v1.Health (SERVING until the drain begins) and server
//   reflection. HTTP/2 is gRPC's transport: over TLS (ALPN h2), or h2c with --h2c.
//
// HTTP/2: over TLS when the client offers h2 in ALPN; on plain TCP with --h2c, for
// clients with prior knowledge (curl --http2-prior-knowledge, h2load), beside HTTP/1.1.
//
// The service shell is goro::App: the address also comes from GORO_ADDR or PORT; over
// HTTPS, SIGHUP reloads --tls-cert and --tls-key (new connections get the new
// certificate; a file that does not load is logged and the old one kept); SIGTERM
// drains (readiness false, serving on, for --drain-delay or $GORO_DRAIN_DELAY, 5 s) and
// then shuts down gracefully (requests in flight get 5 s, or --shutdown-timeout), SIGINT
// shuts down at once; SIGUSR2 upgrades in place (a new process on the same sockets).
// Then one line on stdout with the requests the handlers took and finished, which a
// test holds against the responses its client received.
#include <goro/app.hpp>
#include <goro/goro.hpp>
#if GORO_DEMO_GRPC
#include <goro/grpc/grpc.hpp>

#include "helloworld.goro.grpc.hpp"
#endif

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

namespace http = goro::http;
using namespace std::chrono_literals;

namespace {

// Requests that entered the handler chain, and those whose handler returned.
struct RequestCounts {
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> finished{0};
};

http::Middleware count_requests(RequestCounts& counts) {
  return [&counts](http::Handler next) -> http::Handler {
    return [&counts, next = std::move(next)](http::Request& req, http::ResponseWriter& w) {
      counts.started.fetch_add(1, std::memory_order_relaxed);
      next(req, w);
      counts.finished.fetch_add(1, std::memory_order_relaxed);
    };
  };
}

#if GORO_DEMO_GRPC
class Greeter final : public helloworld::Greeter::Service {
 public:
  goro::grpc::Status SayHello(goro::grpc::ServerContext&, const helloworld::HelloRequest& request,
                              helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + request.name());
    return {};
  }
};

// Sends gRPC requests (Content-Type application/grpc...) to grpc, the rest to http. The
// first gRPC call starts a goroutine that turns the health service NOT_SERVING when the
// HTTP server starts draining (its drain context is cancelled then), so that load
// balancers stop sending calls while those in flight finish.
http::Handler with_grpc(goro::grpc::Server& grpc, http::Handler http) {
  auto watching = std::make_shared<std::atomic<bool>>(false);
  return [&grpc, watching, grpc_handler = grpc.handler(), http = std::move(http)](
             http::Request& req, http::ResponseWriter& w) {
    // The version first: an HTTP/1 request is never gRPC, and costs no header lookup.
    if (req.version_major() != 2 || !req.header("content-type").starts_with("application/grpc"))
      return http(req, w);
    if (!watching->exchange(true, std::memory_order_relaxed)) {
      goro::go([&grpc, stopping = http::drain_context(req)] {
        (void)stopping.done().recv();  // closed when the drain begins
        grpc.health().shutdown();
      });
    }
    grpc_handler(req, w);
  };
}
#endif

// --probe: one GET, for health checks run inside the container.
int probe(const std::string& url) {
  return goro::run(
      [&]() -> int {
        http::ClientOptions options;
        options.connect_timeout = 2s;
        options.read_timeout = 2s;
        options.write_timeout = 2s;
        options.user_agent = "goro-demo-probe";
        http::Client client(options);
        goro::Result<http::ClientResponse> r = client.get(url);
        if (!r) {
          std::fprintf(stderr, "goro-demo: probe %s: %s\n", url.c_str(),
                       r.error().message().c_str());
          return 1;
        }
        if (r->status != 200) {
          std::fprintf(stderr, "goro-demo: probe %s: status %d\n", url.c_str(), r->status);
          return 1;
        }
        return 0;
      },
      goro::Config{.maxprocs = 1});
}

// The integer query parameter `name`: `fallback` when absent, capped at `max`;
// nullopt (and a 400 naming the problem already written) when it is not a number.
std::optional<long> query_number(http::Request& req, http::ResponseWriter& w, std::string_view name,
                                 long fallback, long max) {
  std::optional<std::string> v = req.query(name);
  if (!v) return fallback;
  // Digits only: strtol alone would take a sign or leading blanks.
  bool digits = !v->empty() && v->find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  char* end = nullptr;
  long n = digits ? std::strtol(v->c_str(), &end, 10) : -1;
  if (errno == ERANGE) n = max;
  if (!digits || n < 0) {
    w.text("400 Bad Request: query parameter " + std::string(name) +
               " must be a non-negative integer\n",
           400);
    return std::nullopt;
  }
  return n > max ? max : n;
}

// POST /upload: each file part's bytes go through SHA-256 as they arrive, so an upload
// as large as the server's max_body_bytes costs a 64 KiB buffer.
void upload(http::Request& req, http::ResponseWriter& w) {
  http::FormLimits limits;
  limits.max_body_bytes = std::uint64_t{1} << 40;  // the server's max_body_bytes governs
  http::MultipartReader reader(req, limits);
  std::string out;
  std::string buf(64 * 1024, '\0');
  while (http::MultipartPart* part = reader.next_part()) {
    if (!part->is_file()) continue;
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
    std::uint64_t size = 0;
    while (true) {
      goro::Result<std::size_t> n = part->read(buf.data(), buf.size());
      if (!n || *n == 0) break;
      EVP_DigestUpdate(sha.get(), buf.data(), *n);
      size += *n;
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(sha.get(), digest, &len);
    static constexpr char hex[] = "0123456789abcdef";
    for (unsigned int i = 0; i < len; ++i) {
      out.push_back(hex[digest[i] >> 4]);
      out.push_back(hex[digest[i] & 15]);
    }
    out += "  " + std::string(part->filename()) + "  " + std::to_string(size) + "\n";
  }
  if (reader.failed()) {
    (void)http::send_form_error(req, w, reader.error());
    return;
  }
  w.text(out);
}

// The body of /text: 12 KiB of JSON records, the same on every run (the load kit gives
// nginx a copy, from goro-demo --text-body).
std::string text_document() {
  static const char* const kNames[] = {"ada", "grace", "edsger", "barbara", "ken", "dennis",
                                       "margaret", "donald", "frances", "niklaus"};
  std::string doc = "[";
  for (int i = 0; doc.size() < 12 * 1024 - 100; ++i) {
    if (i > 0) doc += ",";
    doc += "{\"id\":" + std::to_string(1000 + i) + ",\"name\":\"" + kNames[i % 10] + "\"," +
           "\"email\":\"" + kNames[(i * 7) % 10] + std::to_string(i) + "@example.org\"," +
           "\"active\":" + (i % 3 != 0 ? "true" : "false") + ",\"score\":" +
           std::to_string((i * 7919) % 1000) + ",\"tags\":[\"" + kNames[(i * 3) % 10] + "\",\"" +
           kNames[(i * 5 + 1) % 10] + "\"]}";
  }
  doc += "]";
  return doc;
}

http::Router make_router(const std::string& root, std::size_t cache_files, bool debug) {
  http::Router r;
  auto hello = [](http::Request&, http::ResponseWriter& w) { w.text("Hello, World!"); };
  r.handle("GET /{$}", hello);
  r.handle("GET /plaintext", hello);
  r.handle("GET /json", [](http::Request&, http::ResponseWriter& w) {
    w.json(R"({"message":"Hello, World!"})");
  });
  r.handle("POST /echo", [](http::Request& req, http::ResponseWriter& w) {
    goro::Result<std::string> body = req.body();
    if (!body) return;  // the server has answered 413 / 400 already, or the client left
    std::string_view type = req.header("content-type");
    w.header().set("Content-Type", type.empty() ? "application/octet-stream" : type);
    w.write(*body);
  });
  r.handle("POST /upload", upload);
  r.handle("GET /sleep", [](http::Request& req, http::ResponseWriter& w) {
    std::optional<long> ms = query_number(req, w, "ms", 100, 60'000);
    if (!ms) return;
    // Under the request's context: a client that leaves frees this goroutine at once.
    if (goro::sleep(std::chrono::milliseconds(*ms), req.context())) return;
    w.text("ok");
  });
  r.handle("GET /block", [](http::Request& req, http::ResponseWriter& w) {
    std::optional<long> ms = query_number(req, w, "ms", 100, 60'000);
    if (!ms) return;
    goro::blocking([ms = *ms] {
      timespec ts{ms / 1000, (ms % 1000) * 1'000'000};
      while (nanosleep(&ts, &ts) != 0) {
      }
    });
    w.text("ok");
  });
  r.handle("GET /cpu", [](http::Request& req, http::ResponseWriter& w) {
    std::optional<long> ms = query_number(req, w, "ms", 10, 10'000);
    if (!ms) return;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(*ms);
    unsigned long long spins = 0;
    while (std::chrono::steady_clock::now() < until) ++spins;  // no runtime call
    w.text("spun " + std::to_string(spins) + " times in " + std::to_string(*ms) + " ms\n");
  });
  r.handle("GET /stream", [](http::Request& req, http::ResponseWriter& w) {
    std::optional<long> n = query_number(req, w, "n", 5, 100'000);
    if (!n) return;
    w.header().set("Content-Type", "text/plain; charset=utf-8");
    for (long i = 0; i < *n; ++i) {
      if (w.write("chunk " + std::to_string(i) + "\n") || w.flush()) return;  // client gone
    }
  });
  r.handle("GET /text",
           http::chain([doc = text_document()](http::Request&,
                                               http::ResponseWriter& w) { w.json(doc); },
                       {http::compress()}));
  r.handle("GET /ws/echo", [](http::Request& req, http::ResponseWriter& w) {
    http::websocket::AcceptOptions options;
    options.compression.enabled = true;
    auto ws = http::websocket::accept(req, w, options);
    if (!ws) return;  // not a WebSocket handshake: answered 400/426 already
    // Served message by message: between messages the WebSocket holds no goroutine, and
    // a stopping server says going away to it.
    (void)http::websocket::serve(
        std::make_shared<http::websocket::WebSocket>(std::move(*ws)),
        [](http::websocket::WebSocket& ws, http::websocket::Message& m) {
          (void)ws.write(m.type, m.data);
        });
  });
  if (!root.empty())
    r.handle("GET /static/{path...}", http::file_server(root, {.cache_files = cache_files}));
  r.handle("GET /metrics", http::metrics::handler());
  if (debug) r.handle("/debug/goro/", http::debug::handler());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == "--probe") return probe(argv[2]);
  if (argc == 2 && std::string_view(argv[1]) == "--text-body") {
    const std::string doc = text_document();
    std::fwrite(doc.data(), 1, doc.size(), stdout);
    return 0;
  }
  goro::App app(argc, argv, {.name = "goro-demo", .shutdown_timeout = 5s});
  goro::FlagSet& flags = app.flags();
  flags.set_description(
      "An HTTP server showing what goro does with plain blocking handler code.\n"
      "goro-demo --probe URL: GET URL (2 s limit), exit 0 on a 200 (the container's "
      "health check).");
  const std::string& root = flags.add("root", "", "serve the files under `DIR` at /static/");
  const std::int64_t& file_cache = flags.add(
      "file-cache", static_cast<std::int64_t>(http::FileServerOptions{}.cache_files),
      "files the /static/ file server keeps open between requests (0: none)");
  const bool& debug = flags.add("debug", false, "serve goroutine dumps under /debug/goro/");
  const bool& h2c = flags.add("h2c", false, "serve HTTP/2 with prior knowledge on plain TCP");
  const bool& shed = flags.add("shed", false,
                               "shed load past capacity: 503 + Retry-After from an adaptive "
                               "concurrency limit (goro/http/overload.hpp)");
  const std::int64_t& max_conns =
      flags.add("max-connections", std::int64_t{0}, "connections open at most (0: no limit)");
  if (std::optional<int> exit = app.parse()) return *exit;
  if (!app.args().empty()) {
    app.log("unexpected argument '" + app.args()[0] + "' (see goro-demo --help)");
    return 2;
  }
  app.options().server.enable_h2c = h2c;
  app.options().server.max_connections = static_cast<std::size_t>(std::max<std::int64_t>(max_conns, 0));
  RequestCounts counts;
#if GORO_DEMO_GRPC
  Greeter greeter;
  goro::grpc::Server grpc;
  grpc.register_service(greeter);
#endif
  const int code = app.run([&] {
    http::Handler routes =
        make_router(root, static_cast<std::size_t>(std::max<std::int64_t>(file_cache, 0)), debug);
#if GORO_DEMO_GRPC
    routes = with_grpc(grpc, std::move(routes));
#endif
    // Every request is counted and timed for /metrics (the middleware goes first, so it
    // sees what recover answers).
    routes = http::chain(routes,
                         {http::metrics::instrument(), count_requests(counts), http::recover()});
    // Outermost: a shed request costs no more than its 503 (it is counted by
    // http_server_shed_requests_total, not by the request metrics).
    if (shed) routes = http::chain(routes, {http::limit_concurrency(http::ConcurrencyLimiter::adaptive())});
    return routes;
  });
  if (code == 0) {
    std::printf("goro-demo: stopped: %llu requests handled, %llu cut off\n",
                static_cast<unsigned long long>(counts.finished.load()),
                static_cast<unsigned long long>(counts.started.load() - counts.finished.load()));
  }
  return code;
}
