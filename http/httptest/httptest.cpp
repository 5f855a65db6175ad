// goro::http::httptest: record() over an in-memory stream, and test servers on
// loopback sockets.
#include <goro/http/httptest.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include <goro/net/errors.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::http::httptest {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The authority of an absolute request-target ("http://host:8080/p" -> "host:8080"),
// or empty for any other form.
std::string_view target_authority(std::string_view target) {
  std::size_t scheme = target.find("://");
  if (scheme == std::string_view::npos || target.substr(0, scheme).find('/') != std::string_view::npos)
    return {};
  std::string_view rest = target.substr(scheme + 3);
  return rest.substr(0, rest.find_first_of("/?#"));
}

void append_hex(std::string& out, std::size_t n) {
  char digits[2 * sizeof n];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n, 16);
  out.append(digits, end);
}

bool expired(net::Deadline d) {
  return d != net::no_deadline && d <= std::chrono::steady_clock::now();
}

// The two ends of the in-memory connection: the request bytes the server reads, the
// bytes it writes. The server's connection goroutine uses the stream, and a handler
// goroutine under the timeout middleware may read the body or interrupt reads at the
// same time, so every field is guarded by mu. Nothing here parks: a std::mutex is right.
struct Exchange {
  std::mutex mu;
  std::string input;
  std::size_t read_pos = 0;
  std::string output;
  bool closed = false;
  bool write_shut = false;
  net::Deadline read_deadline = net::no_deadline;
  net::Deadline write_deadline = net::no_deadline;
};

// A net::Stream whose client has sent one request and waits for the answer: reads
// return the request, then end of stream; writes are kept. Deadlines that have passed
// fail reads and writes with net::errc::timeout, as they do on a socket (the timeout
// middleware relies on that to interrupt a body read).
class MemoryStream final : public net::Stream {
 public:
  MemoryStream(std::shared_ptr<Exchange> exchange, net::Addr remote)
      : exchange_(std::move(exchange)), remote_(remote) {}

  Result<std::size_t> read(void* buf, std::size_t len) override {
    std::lock_guard lock(exchange_->mu);
    if (exchange_->closed) return net::errc::closed;
    if (expired(exchange_->read_deadline)) return net::errc::timeout;
    std::size_t n = std::min(len, exchange_->input.size() - exchange_->read_pos);
    std::copy_n(exchange_->input.data() + exchange_->read_pos, n, static_cast<char*>(buf));
    exchange_->read_pos += n;
    return n;
  }
  Result<std::size_t> write(const void* buf, std::size_t len) override {
    iovec iov{const_cast<void*>(buf), len};
    return writev(&iov, 1);
  }
  Result<std::size_t> writev(const iovec* iov, int count) override {
    std::lock_guard lock(exchange_->mu);
    if (exchange_->closed) return net::errc::closed;
    if (exchange_->write_shut) return std::errc::broken_pipe;
    if (expired(exchange_->write_deadline)) return net::errc::timeout;
    std::size_t total = 0;
    for (int i = 0; i < count; ++i) {
      exchange_->output.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
      total += iov[i].iov_len;
    }
    return total;
  }
  std::error_code close() override {
    std::lock_guard lock(exchange_->mu);
    if (exchange_->closed) return net::errc::closed;
    exchange_->closed = true;
    return {};
  }
  std::error_code shutdown_write() override {
    std::lock_guard lock(exchange_->mu);
    if (exchange_->closed) return net::errc::closed;
    exchange_->write_shut = true;
    return {};
  }
  // The client waits for its answer; it is never seen leaving.
  bool peer_closed() const override { return false; }
  std::error_code set_read_deadline(net::Deadline d) override {
    std::lock_guard lock(exchange_->mu);
    exchange_->read_deadline = d;
    return {};
  }
  std::error_code set_write_deadline(net::Deadline d) override {
    std::lock_guard lock(exchange_->mu);
    exchange_->write_deadline = d;
    return {};
  }
  std::error_code set_deadline(net::Deadline d) override {
    std::lock_guard lock(exchange_->mu);
    exchange_->read_deadline = d;
    exchange_->write_deadline = d;
    return {};
  }
  net::Addr remote_addr() const override { return remote_; }
  net::Addr local_addr() const override { return {}; }

 private:
  std::shared_ptr<Exchange> exchange_;
  net::Addr remote_;
};

// Decodes a chunked body from data into out; returns whether the last chunk (and the
// trailers after it) arrived.
bool decode_chunked(std::string_view data, std::string& out) {
  for (;;) {
    std::size_t line_end = data.find("\r\n");
    if (line_end == std::string_view::npos) return false;
    std::string_view size_field = data.substr(0, std::min(line_end, data.find(';')));
    std::size_t size = 0;
    auto [ptr, ec] =
        std::from_chars(size_field.data(), size_field.data() + size_field.size(), size, 16);
    if (ec != std::errc() || ptr != size_field.data() + size_field.size()) return false;
    data.remove_prefix(line_end + 2);
    if (size == 0) {
      // Trailers, if any, then the empty line.
      for (;;) {
        std::size_t end = data.find("\r\n");
        if (end == std::string_view::npos) return false;
        if (end == 0) return true;
        data.remove_prefix(end + 2);
      }
    }
    if (data.size() < size) {
      out.append(data);
      return false;
    }
    out.append(data.substr(0, size));
    data.remove_prefix(size);
    if (data.substr(0, 2) != "\r\n") return false;
    data.remove_prefix(2);
  }
}

// Parses the response the server wrote for one request: interim 1xx responses are
// skipped, the body is framed by the request method, the status, Transfer-Encoding,
// Content-Length or the end of the bytes.
Recorded parse_response(std::string raw, bool head_request) {
  Recorded r;
  std::string_view data = raw;
  for (;;) {
    std::size_t head_end = data.find("\r\n\r\n");
    std::size_t line_end = data.find("\r\n");
    if (head_end == std::string_view::npos) {
      r.raw = std::move(raw);
      return r;
    }
    std::string_view status_line = data.substr(0, line_end);
    int status = 0;
    if (status_line.size() >= 12 && status_line.substr(0, 5) == "HTTP/") {
      std::from_chars(status_line.data() + 9, status_line.data() + 12, status);
    }
    if (status >= 100 && status < 200) {
      data.remove_prefix(head_end + 4);
      continue;
    }
    r.status = status;
    r.reason = status_line.size() > 13 ? std::string(status_line.substr(13)) : std::string();
    std::string_view fields = data.substr(line_end + 2, head_end + 2 - (line_end + 2));
    while (!fields.empty()) {
      std::size_t end = fields.find("\r\n");
      std::string_view line = fields.substr(0, end);
      fields.remove_prefix(end + 2);
      std::size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      r.headers.add(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
    }
    data.remove_prefix(head_end + 4);
    break;
  }
  if (head_request || r.status == 204 || r.status == 304) {
    r.complete = true;
  } else if (has_token(r.headers.get("transfer-encoding"), "chunked")) {
    r.chunked = true;
    r.complete = decode_chunked(data, r.body);
  } else if (r.headers.has("content-length")) {
    std::string_view field = r.headers.get("content-length");
    std::size_t length = 0;
    std::from_chars(field.data(), field.data() + field.size(), length);
    r.body.assign(data.substr(0, length));
    r.complete = data.size() >= length;
  } else {
    r.body.assign(data);  // delimited by the end of the connection
    r.complete = true;
  }
  r.raw = std::move(raw);
  return r;
}

// Records, in the handler's goroutine, whether the head had gone out when the handler
// returned (or threw).
struct FlushProbe {
  ResponseWriter& writer;
  bool& flushed;
  ~FlushProbe() { flushed = writer.headers_sent(); }
};

}  // namespace

// ---- RequestBuilder ---------------------------------------------------------------

RequestBuilder::RequestBuilder(std::string_view method, std::string_view target, std::string body)
    : method_(method), target_(target), body_(std::move(body)) {}

RequestBuilder& RequestBuilder::header(std::string_view name, std::string_view value) {
  headers_.add(name, value);
  return *this;
}

RequestBuilder& RequestBuilder::body(std::string body) {
  body_ = std::move(body);
  return *this;
}

RequestBuilder& RequestBuilder::chunked(std::size_t chunk_size) {
  chunked_ = true;
  chunk_size_ = chunk_size;
  return *this;
}

RequestBuilder& RequestBuilder::remote_addr(std::string_view address) {
  remote_addr_ = address;
  return *this;
}

RequestBuilder& RequestBuilder::version(int major, int minor) {
  version_major_ = major;
  version_minor_ = minor;
  return *this;
}

std::string RequestBuilder::wire() const {
  std::string out;
  out.reserve(128 + target_.size() + body_.size());
  out.append(method_).append(" ").append(target_).append(" HTTP/");
  out.append(std::to_string(version_major_)).append(".").append(std::to_string(version_minor_));
  out.append("\r\n");
  if (!headers_.has("host")) {
    std::string_view authority = target_authority(target_);
    out.append("Host: ").append(authority.empty() ? "example.com" : authority).append("\r\n");
  }
  for (HeaderField field : headers_) {
    out.append(field.name).append(": ").append(field.value).append("\r\n");
  }
  bool framed_by_caller = headers_.has("content-length") || headers_.has("transfer-encoding");
  bool encode_chunks = chunked_ && !framed_by_caller;
  if (!framed_by_caller) {
    if (chunked_) {
      out.append("Transfer-Encoding: chunked\r\n");
    } else if (!body_.empty() || method_ == "POST" || method_ == "PUT" || method_ == "PATCH") {
      out.append("Content-Length: ").append(std::to_string(body_.size())).append("\r\n");
    }
  }
  out.append("\r\n");
  if (!encode_chunks) {
    out.append(body_);
    return out;
  }
  std::string_view rest = body_;
  std::size_t piece = chunk_size_ == 0 ? rest.size() : chunk_size_;
  while (!rest.empty()) {
    std::string_view chunk = rest.substr(0, piece);
    rest.remove_prefix(chunk.size());
    append_hex(out, chunk.size());
    out.append("\r\n").append(chunk).append("\r\n");
  }
  out.append("0\r\n\r\n");
  return out;
}

// ---- record -----------------------------------------------------------------------

Recorded record(const Handler& handler, const RequestBuilder& request, const ServerOptions& options) {
  if (goro::goid() == 0) {
    Recorded result;
    goro::run([&] { result = record(handler, request, options); }, goro::Config{.maxprocs = 2});
    return result;
  }
  auto exchange = std::make_shared<Exchange>();
  exchange->input = request.wire();
  Result<net::Addr> remote = net::Addr::parse("tcp", request.remote_addr());
  bool flushed = false;
  http::Server server(options, [&handler, &flushed](Request& req, ResponseWriter& w) {
    FlushProbe probe{w, flushed};
    handler(req, w);
  });
  server.serve_conn(std::make_unique<MemoryStream>(exchange, remote.value_or(net::Addr())));
  std::string raw;
  {
    std::lock_guard lock(exchange->mu);
    raw = std::move(exchange->output);
  }
  Recorded result = parse_response(std::move(raw), request.method() == "HEAD");
  result.flushed = flushed;
  return result;
}

// ---- Server -----------------------------------------------------------------------

struct Server::Impl {
  Impl(ServerOptions options, Handler handler) : server(std::move(options), std::move(handler)) {}

  http::Server server;
  net::Listener listener;                  // plain HTTP
  std::optional<net::TlsListener> secure;  // HTTPS: owns the listener instead
  net::Addr addr;
  std::string url;
  std::optional<Client> client;
  goro::WaitGroup serving;  // the goroutine running server.serve
  bool closed = false;
};

Server::Server(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Server::Server(Server&&) noexcept = default;

Server& Server::operator=(Server&& other) noexcept {
  if (this != &other) {
    if (impl_ && !impl_->closed) close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Server::~Server() {
  if (!impl_ || impl_->closed) return;
  if (goro::goid() == 0) {
    // Closing parks; off a goroutine the server can only be abandoned, with its
    // goroutine still using it.
    std::fprintf(stderr, "goro::http::httptest::Server destroyed off a goroutine while open\n");
    std::abort();
  }
  close();
}

Result<Server> Server::start(Handler handler, StartOptions options) {
  if (goro::goid() == 0) return std::errc::operation_not_permitted;
  Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
  if (!listener) return listener.error();
  auto impl = std::make_unique<Impl>(std::move(options.server), std::move(handler));
  impl->addr = listener->addr();
  if (options.tls) {
    net::TlsConfig config;
    config.certificates.push_back(*options.tls);
    config.alpn = {"http/1.1"};
    Result<std::shared_ptr<net::TlsContext>> context = net::TlsContext::server(config);
    if (!context) return context.error();
    impl->secure.emplace(std::move(*listener), std::move(*context));
    impl->url = "https://" + net::join_host_port(options.tls_host, impl->addr.port());
    if (options.client.ca_file.empty()) options.client.ca_file = options.tls->cert_file;
  } else {
    impl->listener = std::move(*listener);
    impl->url = "http://" + impl->addr.to_string();
  }
  impl->client.emplace(std::move(options.client));
  impl->serving.add(1);
  goro::go(GoOptions{.name = "httptest serve"}, [state = impl.get()] {
    if (state->secure) {
      state->server.serve(*state->secure);
    } else {
      state->server.serve(state->listener);
    }
    state->serving.done();
  });
  return Server(std::move(impl));
}

const std::string& Server::url() const noexcept { return impl_->url; }
const net::Addr& Server::addr() const noexcept { return impl_->addr; }
Client& Server::client() noexcept { return *impl_->client; }
http::Server& Server::http_server() noexcept { return impl_->server; }

std::error_code Server::close(std::chrono::nanoseconds grace) {
  if (!impl_ || impl_->closed) return {};
  impl_->closed = true;
  impl_->client->close_idle();
  std::error_code result = impl_->server.shutdown(std::chrono::steady_clock::now() + grace);
  impl_->serving.wait();
  // A serve() that began after shutdown() returned at once, leaving its listener open.
  if (impl_->secure) {
    impl_->secure->close();
  } else {
    impl_->listener.close();
  }
  // shutdown() returns once every connection is gone or, at its deadline, after closing
  // the rest: their goroutines still unwind, and their handlers may still be running.
  while (impl_->server.connection_count() > 0) goro::sleep(std::chrono::milliseconds(1));
  return result;
}

// ---- BackgroundServer -------------------------------------------------------------

struct BackgroundServer::Impl {
  std::thread thread;
  std::promise<std::error_code> started;  // set once the server listens, or failed
  std::string url;
  net::Addr addr;
  std::atomic<bool> stop{false};
  std::chrono::nanoseconds grace{0};  // written before stop is set
  std::error_code close_result;       // read after the thread is joined
};

BackgroundServer::BackgroundServer(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
BackgroundServer::BackgroundServer(BackgroundServer&&) noexcept = default;

BackgroundServer& BackgroundServer::operator=(BackgroundServer&& other) noexcept {
  if (this != &other) {
    if (impl_) close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

BackgroundServer::~BackgroundServer() {
  if (impl_) close();
}

Result<BackgroundServer> BackgroundServer::start(Handler handler, StartOptions options,
                                                 goro::Config runtime) {
  auto impl = std::make_unique<Impl>();
  std::future<std::error_code> started = impl->started.get_future();
  impl->thread = std::thread([state = impl.get(), handler = std::move(handler),
                              options = std::move(options), runtime]() mutable {
    goro::run(
        [&] {
          Result<Server> server = Server::start(std::move(handler), std::move(options));
          if (!server) {
            state->started.set_value(server.error());
            return;
          }
          state->url = server->url();
          state->addr = server->addr();
          state->started.set_value({});
          // A plain thread cannot wake a goroutine: look for the stop flag now and then.
          while (!state->stop.load(std::memory_order_acquire)) {
            goro::sleep(std::chrono::milliseconds(2));
          }
          state->close_result = server->close(state->grace);
        },
        runtime);
  });
  std::error_code ec = started.get();
  if (ec) {
    impl->thread.join();
    return ec;
  }
  return BackgroundServer(std::move(impl));
}

const std::string& BackgroundServer::url() const noexcept { return impl_->url; }
const net::Addr& BackgroundServer::addr() const noexcept { return impl_->addr; }

std::error_code BackgroundServer::close(std::chrono::nanoseconds grace) {
  if (!impl_ || !impl_->thread.joinable()) return {};
  impl_->grace = grace;
  impl_->stop.store(true, std::memory_order_release);
  impl_->thread.join();
  return impl_->close_result;
}

}  // namespace goro::http::httptest
