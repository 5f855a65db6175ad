// Test helpers for HTTP/2: a server with h2c on (and h2 offered over TLS), a client that
// is nghttp2's client session over a blocking socket (so no test hand-encodes HPACK),
// and a raw frame client for what a well-behaved client never sends.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::http::test {

using Fields = std::vector<std::pair<std::string, std::string>>;
using Clock = std::chrono::steady_clock;

// A Server on 127.0.0.1:<ephemeral> in goro::run on a background thread, h2c on; with
// tls, over TLS offering ALPN h2 and http/1.1. The destructor shuts it down.
class H2Server {
 public:
  explicit H2Server(Handler handler, ServerOptions options = {},
                    std::optional<net::TlsCertificate> tls = std::nullopt, int procs = 2) {
    options.enable_h2c = true;
    std::promise<std::uint16_t> port;
    auto port_future = port.get_future();
    thread_ = std::thread([this, handler = std::move(handler), options = std::move(options),
                           tls = std::move(tls), procs, &port]() mutable {
      goro::run(
          [&] {
            Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
            if (!listener) return port.set_value(0);
            std::optional<net::TlsListener> secure;
            if (tls) {
              net::TlsConfig config;
              config.certificates.push_back(*tls);
              config.alpn = {"h2", "http/1.1"};
              auto ctx = net::TlsContext::server(config);
              if (!ctx) return port.set_value(0);
              secure.emplace(std::move(*listener), *ctx);
            }
            Server server(std::move(options), std::move(handler));
            server_ = &server;
            port.set_value(secure ? secure->addr().port() : listener->addr().port());
            goro::WaitGroup serving;
            serving.add(1);
            goro::go([&] {
              if (secure) {
                server.serve(*secure);
              } else {
                server.serve(*listener);
              }
              serving.done();
            });
            while (!stop_.load(std::memory_order_acquire))
              goro::sleep(std::chrono::milliseconds(2));
            shutdown_result_ = server.shutdown(Clock::now() + grace_);
            serving.wait();
            for (int i = 0; i < 400 && server.connection_count() > 0; ++i)
              goro::sleep(std::chrono::milliseconds(5));
            server_ = nullptr;
          },
          goro::Config{.maxprocs = procs});
    });
    port_ = port_future.get();
    if (port_ == 0) ADD_FAILURE() << "listen failed";
  }
  ~H2Server() { stop(); }

  // Shuts the server down with grace for the streams in flight, and joins.
  std::error_code stop(std::chrono::milliseconds grace = std::chrono::milliseconds(1000)) {
    if (thread_.joinable()) {
      grace_ = grace;
      stop_.store(true, std::memory_order_release);
      thread_.join();
    }
    return shutdown_result_;
  }
  // Starts the shutdown without waiting for it (join with stop()).
  void begin_stop(std::chrono::milliseconds grace) {
    grace_ = grace;
    stop_.store(true, std::memory_order_release);
  }

  std::uint16_t port() const { return port_; }
  Server* server() const { return server_; }

 private:
  std::thread thread_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::chrono::milliseconds grace_{1000};
  std::error_code shutdown_result_;
  Server* server_ = nullptr;
};

// A blocking TCP socket to 127.0.0.1.
class Socket {
 public:
  explicit Socket(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      ADD_FAILURE() << "connect: " << std::strerror(errno);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  // Appends what arrives within timeout to out; 0 at EOF, -1 on an error (a reset),
  // kTimedOut when nothing came.
  static constexpr ssize_t kTimedOut = -2;
  ssize_t recv(std::string& out, std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return kTimedOut;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    return n < 0 ? -1 : n;
  }

 private:
  int fd_ = -1;
};

// What a stream ended with, as the client saw it.
struct H2Response {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  std::uint32_t reset = 0;  // RST_STREAM's error code; 0 when none
  bool closed = false;
  std::vector<Clock::time_point> data_times;  // when each DATA chunk arrived
};

// nghttp2's client session over a Socket, driven by run().
class H2Client {
 public:
  explicit H2Client(std::uint16_t port) : socket_(port) {
    nghttp2_session_callbacks* cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, const std::uint8_t* n, std::size_t nl,
               const std::uint8_t* v, std::size_t vl, std::uint8_t, void* u) {
          auto& r = static_cast<H2Client*>(u)->responses[f->hd.stream_id];
          std::string name(reinterpret_cast<const char*>(n), nl);
          std::string value(reinterpret_cast<const char*>(v), vl);
          if (name == ":status") r.status = std::stoi(value);
          r.headers[name] = value;
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, [](nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* d,
               std::size_t len, void* u) {
          auto& r = static_cast<H2Client*>(u)->responses[id];
          r.body.append(reinterpret_cast<const char*>(d), len);
          r.data_times.push_back(Clock::now());
          return 0;
        });
    nghttp2_session_callbacks_set_on_stream_close_callback(
        cb, [](nghttp2_session*, std::int32_t id, std::uint32_t code, void* u) {
          auto* c = static_cast<H2Client*>(u);
          c->responses[id].closed = true;
          c->responses[id].reset = code;
          --c->open_;
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
          auto* c = static_cast<H2Client*>(u);
          if (f->hd.type == NGHTTP2_GOAWAY) {
            c->goaway = true;
            c->goaway_code = f->goaway.error_code;
            c->goaway_last_stream = f->goaway.last_stream_id;
          }
          if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK)) {
            c->settings.clear();
            for (std::size_t i = 0; i < f->settings.niv; ++i)
              c->settings[f->settings.iv[i].settings_id] = f->settings.iv[i].value;
          }
          return 0;
        });
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~H2Client() { nghttp2_session_del(session_); }
  H2Client(const H2Client&) = delete;
  H2Client& operator=(const H2Client&) = delete;

  // Queues a request; body (if any) is sent as DATA. Returns the stream id.
  std::int32_t submit(const std::string& method, const std::string& path, Fields extra = {},
                      std::optional<std::string> body = std::nullopt) {
    Fields fields = {
        {":method", method}, {":scheme", "http"}, {":authority", "localhost"}, {":path", path}};
    fields.insert(fields.end(), extra.begin(), extra.end());
    std::vector<nghttp2_nv> nv;
    for (auto& [n, v] : fields) {
      nv.push_back({reinterpret_cast<std::uint8_t*>(n.data()),
                    reinterpret_cast<std::uint8_t*>(v.data()), n.size(), v.size(),
                    NGHTTP2_NV_FLAG_NONE});
    }
    nghttp2_data_provider provider{};
    auto source = std::make_unique<Body>();
    if (body) {
      source->data = std::move(*body);
      provider.source.ptr = source.get();
      provider.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf,
                                  std::size_t len, std::uint32_t* flags, nghttp2_data_source* s,
                                  void*) -> ssize_t {
        auto* b = static_cast<Body*>(s->ptr);
        std::size_t n = std::min(len, b->data.size() - b->pos);
        std::memcpy(buf, b->data.data() + b->pos, n);
        b->pos += n;
        if (b->pos == b->data.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
      };
    }
    std::int32_t id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                             body ? &provider : nullptr, nullptr);
    bodies_.push_back(std::move(source));
    responses[id];
    ++open_;
    return id;
  }

  // Exchanges frames until every submitted stream closed (true), the connection ended
  // or timeout passed (false).
  bool run(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      if (!flush()) return false;
      if (open_ == 0) return true;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      if (!receive(left)) return false;
    }
  }
  // Sends what the session has queued.
  bool flush() {
    const std::uint8_t* data;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(session_, &data)) > 0) {
      if (!socket_.send({reinterpret_cast<const char*>(data), static_cast<std::size_t>(n)}))
        return false;
    }
    return n == 0;
  }
  // Reads once and feeds the session; false when the server closed the connection (eof
  // set) or nothing came within timeout.
  bool receive(std::chrono::milliseconds timeout) {
    std::string in;
    ssize_t n = socket_.recv(in, timeout);
    if (n <= 0) {
      eof = n != Socket::kTimedOut;
      return false;
    }
    return nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(in.data()),
                                    in.size()) >= 0;
  }
  nghttp2_session* session() { return session_; }

  std::map<std::int32_t, H2Response> responses;
  std::map<std::int32_t, std::uint32_t> settings;  // the server's last SETTINGS
  bool goaway = false;
  std::uint32_t goaway_code = 0;
  std::int32_t goaway_last_stream = -1;
  bool eof = false;  // the server closed the connection

 private:
  struct Body {
    std::string data;
    std::size_t pos = 0;
  };
  Socket socket_;
  nghttp2_session* session_ = nullptr;
  std::vector<std::unique_ptr<Body>> bodies_;
  int open_ = 0;
};

// One frame as read off the wire.
struct Frame {
  std::uint8_t type = 0;
  std::uint8_t flags = 0;
  std::int32_t stream = 0;
  std::string payload;
  std::uint32_t error_code() const {  // of RST_STREAM, GOAWAY
    std::size_t at = type == NGHTTP2_GOAWAY ? 4 : 0;
    if (payload.size() < at + 4) return 0xffffffff;
    auto b = [&](std::size_t i) { return static_cast<std::uint8_t>(payload[at + i]); };
    return std::uint32_t{b(0)} << 24 | std::uint32_t{b(1)} << 16 | std::uint32_t{b(2)} << 8 | b(3);
  }
};

// Frames by hand, for what nghttp2's client refuses to send. HPACK blocks come from
// nghttp2's deflater.
class RawH2 {
 public:
  static constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

  explicit RawH2(std::uint16_t port, bool handshake = true) : socket_(port) {
    nghttp2_hd_deflate_new(&deflater_, 4096);
    if (handshake) {
      socket_.send(kPreface);
      send_frame(NGHTTP2_SETTINGS, 0, 0, "");
    }
  }
  ~RawH2() { nghttp2_hd_deflate_del(deflater_); }

  static std::string frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream,
                           std::string_view payload) {
    std::string f;
    f.push_back(static_cast<char>(payload.size() >> 16));
    f.push_back(static_cast<char>(payload.size() >> 8));
    f.push_back(static_cast<char>(payload.size()));
    f.push_back(static_cast<char>(type));
    f.push_back(static_cast<char>(flags));
    for (int shift : {24, 16, 8, 0}) f.push_back(static_cast<char>(stream >> shift));
    f.append(payload);
    return f;
  }
  bool send_frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream,
                  std::string_view payload) {
    return socket_.send(frame(type, flags, stream, payload));
  }
  bool send_raw(std::string_view bytes) { return socket_.send(bytes); }
  // An HPACK block for fields, as given (any case, any order).
  std::string block(const Fields& fields) {
    std::vector<nghttp2_nv> nv;
    for (auto& [n, v] : fields) {
      nv.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(n.data())),
                    reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), n.size(),
                    v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    std::string out(nghttp2_hd_deflate_bound(deflater_, nv.data(), nv.size()), '\0');
    ssize_t n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<std::uint8_t*>(out.data()),
                                      out.size(), nv.data(), nv.size());
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
  }
  static Fields get(const std::string& path = "/") {
    return {{":method", "GET"}, {":scheme", "http"}, {":authority", "localhost"}, {":path", path}};
  }
  bool send_headers(std::int32_t stream, const Fields& fields, bool end_stream = true) {
    return send_frame(NGHTTP2_HEADERS,
                      NGHTTP2_FLAG_END_HEADERS | (end_stream ? NGHTTP2_FLAG_END_STREAM : 0), stream,
                      block(fields));
  }

  // The next frame, or nullopt when the server closed the connection (closed set) or
  // after timeout.
  std::optional<Frame> read_frame(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      if (in_.size() >= 9) {
        std::size_t len = static_cast<std::uint8_t>(in_[0]) << 16 |
                          static_cast<std::uint8_t>(in_[1]) << 8 |
                          static_cast<std::uint8_t>(in_[2]);
        if (in_.size() >= 9 + len) {
          Frame f;
          f.type = static_cast<std::uint8_t>(in_[3]);
          f.flags = static_cast<std::uint8_t>(in_[4]);
          f.stream = (static_cast<std::uint8_t>(in_[5]) & 0x7f) << 24 |
                     static_cast<std::uint8_t>(in_[6]) << 16 |
                     static_cast<std::uint8_t>(in_[7]) << 8 | static_cast<std::uint8_t>(in_[8]);
          f.payload = in_.substr(9, len);
          in_.erase(0, 9 + len);
          return f;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      ssize_t n = socket_.recv(in_, left);
      if (n <= 0) {
        closed = n != Socket::kTimedOut;
        return std::nullopt;
      }
    }
  }
  // Reads until a frame of type (on stream, if given) arrives; nullopt at EOF or timeout.
  std::optional<Frame> wait_for(
      std::uint8_t type, std::optional<std::int32_t> stream = {},
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      std::optional<Frame> f = read_frame(left);
      if (!f) return std::nullopt;
      if (f->type == type && (!stream || f->stream == *stream)) return f;
    }
  }

  bool closed = false;  // the server closed the connection

 private:
  Socket socket_;
  nghttp2_hd_deflater* deflater_ = nullptr;
  std::string in_;
};

}  // namespace goro::http::test
