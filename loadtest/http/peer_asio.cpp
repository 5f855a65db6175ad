// peer_asio: the HTTP/1.1 server a C++ user would write without goro, for
// loadtest/run.sh: standalone Asio with C++20 coroutines and llhttp (built from
// Debian's node-llhttp exactly as goro_http builds it), with goro-demo's routes.
//
// One io_context per thread, each with its own SO_REUSEPORT acceptor, one coroutine
// per connection. Each read is parsed whole; the requests complete in it are answered
// in order and their responses go out in one write. What a handler may not do on an
// io_context thread goes where an Asio user would put it:
//   GET  /, /plaintext   "Hello, World!"        GET /json   {"message":"Hello, World!"}
//   POST /echo           the body, with its Content-Type
//   GET  /sleep?ms=N     an asio::steady_timer wait (costs no thread), then "ok"
//   GET  /block?ms=N     nanosleep on a separate asio::thread_pool (ASIO_BLOCKING_THREADS,
//                        default 64): Asio has no hand-off, so blocking calls need a pool
//   GET  /cpu?ms=N       N ms of CPU on the io_context thread: nothing can preempt it, so
//                        the other connections of that thread wait
//   GET  /healthz        "ok"
//
//   peer_asio [--addr 127.0.0.1:8080] [--threads N] [--tls-cert FILE --tls-key FILE]
#include <llhttp.h>
#include <sys/socket.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/ssl.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using asio::ip::tcp;

namespace {

struct Request {
  llhttp_method_t method = HTTP_GET;
  std::string url;
  std::string content_type;
  std::string body;
  bool keep_alive = true;
  bool complete = false;
};

// The parser of one connection and the requests it has produced so far (the last one
// may still be incomplete).
struct Parser {
  llhttp_t parser;
  std::deque<Request> requests;
  bool in_content_type = false;
  std::string field;

  static Parser& of(llhttp_t* p) { return *static_cast<Parser*>(p->data); }

  static const llhttp_settings_t& settings() {
    static const llhttp_settings_t s = [] {
      llhttp_settings_t s;
      llhttp_settings_init(&s);
      s.on_message_begin = [](llhttp_t* p) {
        of(p).requests.emplace_back();
        return 0;
      };
      s.on_url = [](llhttp_t* p, const char* at, std::size_t n) {
        of(p).requests.back().url.append(at, n);
        return 0;
      };
      s.on_header_field = [](llhttp_t* p, const char* at, std::size_t n) {
        of(p).field.append(at, n);
        return 0;
      };
      s.on_header_field_complete = [](llhttp_t* p) {
        Parser& self = of(p);
        self.in_content_type = ::strcasecmp(self.field.c_str(), "content-type") == 0;
        self.field.clear();
        return 0;
      };
      s.on_header_value = [](llhttp_t* p, const char* at, std::size_t n) {
        Parser& self = of(p);
        if (self.in_content_type) self.requests.back().content_type.append(at, n);
        return 0;
      };
      s.on_body = [](llhttp_t* p, const char* at, std::size_t n) {
        of(p).requests.back().body.append(at, n);
        return 0;
      };
      s.on_message_complete = [](llhttp_t* p) {
        Request& r = of(p).requests.back();
        r.method = static_cast<llhttp_method_t>(p->method);
        r.keep_alive = llhttp_should_keep_alive(p) != 0;
        r.complete = true;
        return 0;
      };
      return s;
    }();
    return s;
  }

  Parser() {
    llhttp_init(&parser, HTTP_REQUEST, &settings());
    parser.data = this;
  }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
};

// "Date: ...\r\n", rebuilt once a second by each thread.
std::string_view date_header() {
  thread_local std::time_t second = 0;
  thread_local char text[64];
  thread_local std::size_t size = 0;
  std::time_t now = std::time(nullptr);
  if (now != second) {
    second = now;
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    size = std::strftime(text, sizeof text, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
  }
  return {text, size};
}

void append_response(std::string& out, int status, std::string_view type, std::string_view body,
                     bool keep_alive) {
  out += status == 200   ? "HTTP/1.1 200 OK"
         : status == 404 ? "HTTP/1.1 404 Not Found"
                         : "HTTP/1.1 400 Bad Request";
  out += "\r\nContent-Type: ";
  out += type;
  out += "\r\n";
  out += date_header();
  out += "Server: asio\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n";
  out += body;
}

// The integer query parameter `name` of `url`: `fallback` when absent, capped at `max`,
// nullopt when it is not a non-negative integer.
std::optional<long> query_number(std::string_view url, std::string_view name, long fallback,
                                 long max) {
  std::size_t q = url.find('?');
  if (q == std::string_view::npos) return fallback;
  std::string_view query = url.substr(q + 1);
  while (!query.empty()) {
    std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    if (pair.substr(0, pair.find('=')) != name) continue;
    std::string_view value = pair.find('=') == std::string_view::npos
                                 ? std::string_view{}
                                 : pair.substr(pair.find('=') + 1);
    if (value.empty() || value.size() > 9 ||
        value.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    long n = std::strtol(std::string(value).c_str(), nullptr, 10);
    return n > max ? max : n;
  }
  return fallback;
}

asio::thread_pool* blocking_pool;

asio::awaitable<void> handle(Request& r, std::string& out) {
  std::string_view url = r.url;
  std::string_view path = url.substr(0, url.find('?'));
  const bool get = r.method == HTTP_GET;
  auto bad_number = [&] {
    append_response(out, 400, "text/plain; charset=utf-8",
                    "400 Bad Request: query parameter ms must be a non-negative integer\n",
                    r.keep_alive);
  };
  if (get && (path == "/plaintext" || path == "/")) {
    append_response(out, 200, "text/plain; charset=utf-8", "Hello, World!", r.keep_alive);
  } else if (get && path == "/json") {
    append_response(out, 200, "application/json", R"({"message":"Hello, World!"})", r.keep_alive);
  } else if (r.method == HTTP_POST && path == "/echo") {
    append_response(out, 200, r.content_type.empty() ? "application/octet-stream" : r.content_type,
                    r.body, r.keep_alive);
  } else if (get && path == "/sleep") {
    std::optional<long> ms = query_number(url, "ms", 100, 60'000);
    if (!ms) {
      bad_number();
      co_return;
    }
    asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(*ms));
    co_await timer.async_wait(asio::use_awaitable);
    append_response(out, 200, "text/plain; charset=utf-8", "ok", r.keep_alive);
  } else if (get && path == "/block") {
    std::optional<long> ms = query_number(url, "ms", 100, 60'000);
    if (!ms) {
      bad_number();
      co_return;
    }
    co_await asio::co_spawn(
        *blocking_pool,
        [ms = *ms]() -> asio::awaitable<void> {
          timespec ts{ms / 1000, (ms % 1000) * 1'000'000};
          while (::nanosleep(&ts, &ts) != 0) {
          }
          co_return;
        },
        asio::use_awaitable);
    append_response(out, 200, "text/plain; charset=utf-8", "ok", r.keep_alive);
  } else if (get && path == "/cpu") {
    std::optional<long> ms = query_number(url, "ms", 10, 10'000);
    if (!ms) {
      bad_number();
      co_return;
    }
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(*ms);
    unsigned long long spins = 0;
    while (std::chrono::steady_clock::now() < until) ++spins;
    append_response(out, 200, "text/plain; charset=utf-8",
                    "spun " + std::to_string(spins) + " times in " + std::to_string(*ms) + " ms\n",
                    r.keep_alive);
  } else if (get && path == "/healthz") {
    append_response(out, 200, "text/plain; charset=utf-8", "ok", r.keep_alive);
  } else {
    append_response(out, 404, "text/plain; charset=utf-8", "404 page not found\n", r.keep_alive);
  }
}

// Serves requests on `stream` (a TCP socket or a TLS stream over one) until the client
// leaves, sends Connection: close, or sends something llhttp rejects.
template <class Stream>
asio::awaitable<void> serve_http(Stream& stream) {
  Parser parser;
  std::string out;
  char buf[4096];
  for (;;) {
    asio::error_code ec;
    std::size_t n = co_await stream.async_read_some(asio::buffer(buf),
                                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    llhttp_errno_t err = llhttp_execute(&parser.parser, buf, n);
    out.clear();
    bool close = false;
    while (!close && !parser.requests.empty() && parser.requests.front().complete) {
      Request r = std::move(parser.requests.front());
      parser.requests.pop_front();
      co_await handle(r, out);
      close = !r.keep_alive;
    }
    if (err != HPE_OK && !close) {
      append_response(out, 400, "text/plain; charset=utf-8",
                      std::string("400 Bad Request: ") + llhttp_errno_name(err) + "\n", false);
      close = true;
    }
    if (!out.empty()) {
      co_await asio::async_write(stream, asio::buffer(out),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
    }
    if (close) co_return;
  }
}

asio::awaitable<void> serve_tls(tcp::socket socket, asio::ssl::context& tls) {
  asio::ssl::stream<tcp::socket> stream(std::move(socket), tls);
  asio::error_code ec;
  co_await stream.async_handshake(asio::ssl::stream_base::server,
                                  asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) co_await serve_http(stream);
}

asio::awaitable<void> serve_plain(tcp::socket socket) { co_await serve_http(socket); }

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, asio::ssl::context* tls) {
  for (;;) {
    asio::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) continue;  // EMFILE and the like: the connection is lost, the server goes on
    socket.set_option(tcp::no_delay(true));
    if (tls) {
      asio::co_spawn(acceptor.get_executor(), serve_tls(std::move(socket), *tls), asio::detached);
    } else {
      asio::co_spawn(acceptor.get_executor(), serve_plain(std::move(socket)), asio::detached);
    }
  }
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: peer_asio [--addr HOST:PORT] [--threads N] "
               "[--tls-cert FILE --tls-key FILE]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1:8080", cert, key;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (i + 1 >= argc) usage();
    if (a == "--addr") {
      address = argv[++i];
    } else if (a == "--threads") {
      threads = std::atoi(argv[++i]);
    } else if (a == "--tls-cert") {
      cert = argv[++i];
    } else if (a == "--tls-key") {
      key = argv[++i];
    } else {
      usage();
    }
  }
  if (threads < 1 || cert.empty() != key.empty()) usage();
  const char* env_blocking = std::getenv("ASIO_BLOCKING_THREADS");
  asio::thread_pool pool(env_blocking ? std::max(1, std::atoi(env_blocking)) : 64);
  blocking_pool = &pool;

  std::unique_ptr<asio::ssl::context> tls;
  if (!cert.empty()) {
    tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    tls->use_certificate_chain_file(cert);
    tls->use_private_key_file(key, asio::ssl::context::pem);
  }

  std::signal(SIGPIPE, SIG_IGN);
  auto colon = address.rfind(':');
  if (colon == std::string::npos) usage();
  tcp::endpoint endpoint(asio::ip::make_address(address.substr(0, colon)),
                         static_cast<unsigned short>(std::atoi(address.c_str() + colon + 1)));
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  for (int i = 0; i < threads; ++i) {
    contexts.push_back(std::make_unique<asio::io_context>(1));
    auto acceptor = std::make_unique<tcp::acceptor>(*contexts.back());
    acceptor->open(endpoint.protocol());
    acceptor->set_option(tcp::acceptor::reuse_address(true));
    int one = 1;
    ::setsockopt(acceptor->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    acceptor->bind(endpoint);
    acceptor->listen(4096);
    asio::co_spawn(*contexts.back(), accept_loop(*acceptor, tls.get()), asio::detached);
    acceptors.push_back(std::move(acceptor));
  }
  std::fprintf(stderr, "peer_asio: serving %s://%s with %d threads\n", tls ? "https" : "http",
               address.c_str(), threads);
  std::vector<std::thread> workers;
  for (int i = 1; i < threads; ++i) workers.emplace_back([&, i] { contexts[i]->run(); });
  contexts[0]->run();
  for (auto& t : workers) t.join();
}
