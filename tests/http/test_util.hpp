// Test helpers for goro::http: a server running in its own goro::run on a background
// thread, and a raw blocking socket client that speaks bytes, not HTTP, so a test
// states exactly what goes on the wire.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::http::test {

// Runs a Server on 127.0.0.1:<ephemeral> inside goro::run on a background thread.
// The destructor shuts the server down and waits for the runtime to return.
class TestServer {
 public:
  // tls: serve HTTPS with this certificate (ALPN http/1.1) instead of plain HTTP.
  explicit TestServer(Handler handler, ServerOptions options = {}, int procs = 2,
                      std::optional<net::TlsCertificate> tls = std::nullopt) {
    std::promise<std::uint16_t> port;
    auto port_future = port.get_future();
    thread_ = std::thread([this, handler = std::move(handler), options = std::move(options), procs,
                           tls = std::move(tls), &port]() mutable {
      goro::run(
          [&] {
            Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
            if (!listener) {
              port.set_value(0);
              return;
            }
            std::optional<net::TlsListener> secure;
            if (tls) {
              net::TlsConfig config;
              config.certificates.push_back(*tls);
              config.alpn = {"http/1.1"};
              auto ctx = net::TlsContext::server(config);
              if (!ctx) {
                port.set_value(0);
                return;
              }
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
            shutdown_result_ = server.shutdown(std::chrono::steady_clock::now() + shutdown_grace_);
            serving.wait();
            // Let connection goroutines that were force-closed unwind.
            for (int i = 0; i < 200 && server.connection_count() > 0; ++i) {
              goro::sleep(std::chrono::milliseconds(5));
            }
            server_ = nullptr;
          },
          goro::Config{.maxprocs = procs});
    });
    port_ = port_future.get();
    if (port_ == 0) ADD_FAILURE() << "listen failed";
  }

  ~TestServer() { stop(); }

  // Shuts the server down (grace: time for requests in flight) and joins.
  std::error_code stop(std::chrono::milliseconds grace = std::chrono::milliseconds(1000)) {
    if (thread_.joinable()) {
      shutdown_grace_ = grace;
      stop_.store(true, std::memory_order_release);
      thread_.join();
    }
    return shutdown_result_;
  }

  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url(std::string_view path = "/") const {
    return "http://" + address() + std::string(path);
  }
  Server* server() const { return server_; }

 private:
  std::thread thread_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::chrono::milliseconds shutdown_grace_{1000};
  std::error_code shutdown_result_;
  Server* server_ = nullptr;
};

// One response as read off the wire by RawConn.
struct RawResponse {
  int status = 0;
  std::string status_line;
  std::multimap<std::string, std::string> headers;  // names lower-cased
  std::string body;
  bool chunked = false;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  std::size_t count(const std::string& name) const { return headers.count(name); }
};

// A blocking TCP client for byte-exact tests. Reads time out after 5 s (a failure).
class RawConn {
 public:
  explicit RawConn(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // Reads more bytes into the pending buffer; false on EOF, error or timeout.
  bool fill(int timeout_ms = 5000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) {
      timed_out_ = true;
      return false;
    }
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  // Reads one response. head_only: the request was HEAD (no body follows).
  std::optional<RawResponse> read_response(bool head_only = false) {
    std::size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return std::nullopt;
    }
    RawResponse r;
    std::string head = pending_.substr(0, end + 2);
    pending_.erase(0, end + 4);
    std::size_t line_end = head.find("\r\n");
    r.status_line = head.substr(0, line_end);
    if (r.status_line.size() >= 12) r.status = std::stoi(r.status_line.substr(9, 3));
    std::size_t pos = line_end + 2;
    while (pos < head.size()) {
      std::size_t e = head.find("\r\n", pos);
      std::string line = head.substr(pos, e - pos);
      pos = e + 2;
      std::size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers.emplace(name, value);
    }
    if (head_only || r.status / 100 == 1 || r.status == 204 || r.status == 304) return r;
    if (r.header("transfer-encoding") == "chunked") {
      r.chunked = true;
      for (;;) {
        std::size_t e;
        while ((e = pending_.find("\r\n")) == std::string::npos) {
          if (!fill()) return std::nullopt;
        }
        std::size_t size = std::stoul(pending_.substr(0, e), nullptr, 16);
        pending_.erase(0, e + 2);
        while (pending_.size() < size + 2) {
          if (!fill()) return std::nullopt;
        }
        r.body.append(pending_, 0, size);
        pending_.erase(0, size + 2);
        if (size == 0) break;
      }
    } else if (!r.header("content-length").empty()) {
      std::size_t size = std::stoul(r.header("content-length"));
      while (pending_.size() < size) {
        if (!fill()) return std::nullopt;
      }
      r.body = pending_.substr(0, size);
      pending_.erase(0, size);
    } else {
      while (fill()) {
      }
      r.body = std::move(pending_);
      pending_.clear();
    }
    return r;
  }

  // True when the server closes the connection (EOF or reset) within timeout_ms; what it
  // sent before is kept in pending().
  bool closed_by_peer(int timeout_ms = 3000) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      if (!fill(timeout_ms)) return eof_;
    }
    return false;
  }

  // Bytes received and not yet consumed by read_response.
  std::string& pending() { return pending_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string pending_;
  bool eof_ = false;
  bool timed_out_ = false;
};

// Runs body(base_url) in a goroutine of a fresh goro::run, with a Server for handler
// listening on 127.0.0.1 in the same runtime (for code that must run on goroutines,
// such as goro::http::Client). Returns when body has returned and the server is shut
// down.
template <class Body>
void with_server(Handler handler, ServerOptions options, Body body, int procs = 2,
                 std::optional<net::TlsCertificate> tls = std::nullopt) {
  goro::run(
      [&] {
        Result<net::Listener> listener = net::listen("tcp", "127.0.0.1:0");
        ASSERT_TRUE(listener);
        std::uint16_t port = listener->addr().port();
        std::optional<net::TlsListener> secure;
        if (tls) {
          net::TlsConfig config;
          config.certificates.push_back(*tls);
          config.alpn = {"http/1.1"};
          auto ctx = net::TlsContext::server(config);
          ASSERT_TRUE(ctx);
          secure.emplace(std::move(*listener), *ctx);
        }
        Server server(std::move(options), std::move(handler));
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
        body(std::string(tls ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port));
        server.shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(1));
        serving.wait();
        for (int i = 0; i < 200 && server.connection_count() > 0; ++i) {
          goro::sleep(std::chrono::milliseconds(5));
        }
      },
      goro::Config{.maxprocs = procs});
}

// Sends one request on a new connection and reads one response.
inline std::optional<RawResponse> round_trip(std::uint16_t port, std::string_view request) {
  RawConn c(port);
  c.send(request);
  return c.read_response();
}

}  // namespace goro::http::test
