// Shared by the tests of faults and abuse under load (under_load_test.cpp,
// tls_abuse_test.cpp): a load of plain blocking client threads that counts what comes
// back, and one Server on a plain and a TLS listener in a goro::run of its own.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/server.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "leak_check.hpp"
#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {


using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A blocking TCP connection to 127.0.0.1:port whose connect, sends and receives give up
// after `timeout`; -1 when it cannot be made.
int connect_to(std::uint16_t port, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() too
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What one request got.
enum class Got { complete, clean, truncated, timed_out, refused };

// Sends `GET /` on fd and reads its response (a Content-Length body). keep: the server
// did not say Connection: close.
Got exchange(int fd, std::string& buf, bool& keep) {
  static constexpr std::string_view kRequest = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  if (::send(fd, kRequest.data(), kRequest.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(kRequest.size())) {
    return errno == EAGAIN ? Got::timed_out : Got::clean;
  }
  buf.clear();
  std::size_t need = std::string::npos;
  char chunk[4096];
  while (buf.size() < need) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EAGAIN) return Got::timed_out;
    if (n <= 0) return buf.empty() ? Got::clean : Got::truncated;
    buf.append(chunk, static_cast<std::size_t>(n));
    if (need == std::string::npos) {
      std::size_t end = buf.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      std::size_t cl = buf.find("Content-Length: ");
      if (cl == std::string::npos || cl > end) return Got::truncated;  // not what "/" sends
      need = end + 4 + std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
      keep = buf.find("Connection: close") > end;
    }
  }
  return Got::complete;
}

// What a load saw in one phase.
struct Tally {
  long complete = 0;
  long clean = 0;
  long truncated = 0;
  long timed_out = 0;
  long refused = 0;
  std::vector<float> latency_ms;        // of complete responses
  std::vector<Clock::time_point> done;  // when each complete response ended

  void add(const Tally& o) {
    complete += o.complete;
    clean += o.clean;
    truncated += o.truncated;
    timed_out += o.timed_out;
    refused += o.refused;
    latency_ms.insert(latency_ms.end(), o.latency_ms.begin(), o.latency_ms.end());
    done.insert(done.end(), o.done.begin(), o.done.end());
  }
  double percentile(double p) {
    if (latency_ms.empty()) return 0;
    std::sort(latency_ms.begin(), latency_ms.end());
    return latency_ms[std::min(
        latency_ms.size() - 1,
        static_cast<std::size_t>(p * static_cast<double>(latency_ms.size())))];
  }
};

// Client threads sending `GET /` to 127.0.0.1:port, each on a connection it keeps for
// `per_connection` requests (1: a new connection for each), pausing `pause` between
// requests. A request counts in the phase that was set when it started.
class Load {
 public:
  static constexpr int kPhases = 8;

  Load(std::uint16_t port, int threads, int per_connection,
       std::chrono::milliseconds timeout = 3000ms, std::chrono::microseconds pause = 0us)
      : tallies_(static_cast<std::size_t>(threads)) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i, port, per_connection, timeout, pause] {
        run(tallies_[static_cast<std::size_t>(i)], port, per_connection, timeout, pause);
      });
    }
  }
  ~Load() { stop(); }
  Load(const Load&) = delete;
  Load& operator=(const Load&) = delete;

  void set_phase(int phase) { phase_.store(phase, std::memory_order_relaxed); }
  void stop() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  // After stop().
  Tally tally(int phase) const {
    Tally sum;
    for (const auto& per_thread : tallies_) sum.add(per_thread[static_cast<std::size_t>(phase)]);
    return sum;
  }

 private:
  void run(std::array<Tally, kPhases>& tally, std::uint16_t port, int per_connection,
           std::chrono::milliseconds timeout, std::chrono::microseconds pause) {
    int fd = -1;
    int used = 0;
    std::string buf;
    while (!stop_.load()) {
      Tally& t = tally[static_cast<std::size_t>(phase_.load(std::memory_order_relaxed))];
      if (fd < 0) {
        fd = connect_to(port, timeout);
        if (fd < 0) {
          ++t.refused;
          std::this_thread::sleep_for(1ms);
          continue;
        }
        used = 0;
      }
      auto start = Clock::now();
      bool keep = true;
      Got got = exchange(fd, buf, keep);
      switch (got) {
        case Got::complete:
          ++t.complete;
          t.done.push_back(Clock::now());
          t.latency_ms.push_back(static_cast<float>(ms_between(start, t.done.back())));
          break;
        case Got::clean: ++t.clean; break;
        case Got::truncated: ++t.truncated; break;
        case Got::timed_out: ++t.timed_out; break;
        case Got::refused: ++t.refused; break;
      }
      if (got != Got::complete || !keep || ++used >= per_connection) {
        ::close(fd);
        fd = -1;
      }
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
    }
    if (fd >= 0) ::close(fd);
  }

  std::vector<std::array<Tally, kPhases>> tallies_;  // one per thread, written by it only
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> phase_{0};
};

// Requests the handler of "/" took, and handlers of "/hang" parked (until release).
std::atomic<long> handled{0};
std::atomic<int> hanging{0};
std::atomic<bool> release_hang{false};

void handler(Request& req, ResponseWriter& w) {
  if (req.path() == "/hang") {
    hanging.fetch_add(1);
    while (!release_hang.load()) goro::sleep(10ms);
    return;
  }
  handled.fetch_add(1);
  w.text("hello");
}

// One Server on two listeners of 127.0.0.1 in one goro::run on a background thread:
// plain HTTP and, when given a certificate, HTTPS.
class DualServer {
 public:
  DualServer(ServerOptions options, std::optional<net::TlsCertificate> tls, int procs = 2) {
    std::promise<std::pair<std::uint16_t, std::uint16_t>> ports;
    auto ports_future = ports.get_future();
    thread_ = std::thread([this, options = std::move(options), tls, procs, &ports]() mutable {
      goro::run(
          [&] {
            Result<net::Listener> plain = net::listen("tcp", "127.0.0.1:0");
            Result<net::Listener> second = net::listen("tcp", "127.0.0.1:0");
            if (!plain || !second) {
              ports.set_value({0, 0});
              return;
            }
            std::optional<net::TlsListener> secure;
            if (tls) {
              net::TlsConfig config;
              config.certificates.push_back(*tls);
              config.alpn = {"http/1.1"};
              auto ctx = net::TlsContext::server(config);
              if (!ctx) {
                ports.set_value({0, 0});
                return;
              }
              secure.emplace(std::move(*second), *ctx);
            }
            Server server(std::move(options), handler);
            ports.set_value({plain->addr().port(), secure ? secure->addr().port() : 0});
            goro::WaitGroup serving;
            serving.add(secure ? 2 : 1);
            goro::go([&] {
              server.serve(*plain);
              serving.done();
            });
            if (secure) {
              goro::go([&] {
                server.serve(*secure);
                serving.done();
              });
            }
            while (!stop_.load()) goro::sleep(2ms);
            auto start = Clock::now();
            shutdown_result_ = server.shutdown(start + grace_);
            shutdown_took_ = Clock::now() - start;
            serving.wait();
            release_hang.store(true);  // a handler that never returned may end now
            for (int i = 0; i < 400 && server.connection_count() > 0; ++i) goro::sleep(5ms);
          },
          goro::Config{.maxprocs = procs});
    });
    std::tie(port_, tls_port_) = ports_future.get();
    if (port_ == 0) ADD_FAILURE() << "listen failed";
  }
  ~DualServer() { stop(1000ms); }
  DualServer(const DualServer&) = delete;
  DualServer& operator=(const DualServer&) = delete;

  // Server::shutdown(now + grace), then the runtime ends. Returns shutdown's result.
  std::error_code stop(std::chrono::milliseconds grace) {
    if (thread_.joinable()) {
      grace_ = grace;
      stop_.store(true);
      thread_.join();
    }
    return shutdown_result_;
  }
  Clock::duration shutdown_took() const { return shutdown_took_; }
  std::uint16_t port() const { return port_; }
  std::uint16_t tls_port() const { return tls_port_; }

 private:
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::chrono::milliseconds grace_{1000};
  std::error_code shutdown_result_;
  Clock::duration shutdown_took_{};
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
};

// One connection to each listener, served or refused and closed: both accept loops have
// run, so a LeakCheck made after this counts their goroutines in its baseline.
void warm_up(const DualServer& server) {
  EXPECT_TRUE(round_trip(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  if (server.tls_port() != 0) {
    std::uint64_t accepted = server_stats().connections_total;
    int fd = connect_to(server.tls_port(), 2000ms);
    EXPECT_GE(fd, 0);
    auto until = Clock::now() + 5s;
    while (server_stats().connections_total == accepted && Clock::now() < until)
      std::this_thread::sleep_for(1ms);
    if (fd >= 0) ::close(fd);
  }
  auto until = Clock::now() + 5s;
  while (server_stats().connections_open > 0 && Clock::now() < until)
    std::this_thread::sleep_for(1ms);
}

ServerOptions quiet_options() {
  ServerOptions o;
  o.error_log = [](std::string_view) {};
  return o;
}

// Raises the soft RLIMIT_NOFILE to at least `want` for the scope (the hard limit
// permitting), and puts it back after.
class DescriptorLimit {
 public:
  explicit DescriptorLimit(rlim_t want) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit raised = saved_;
    if (raised.rlim_cur < want) raised.rlim_cur = std::min(want, raised.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &raised);
    ::getrlimit(RLIMIT_NOFILE, &raised);
    ok_ = raised.rlim_cur >= want;
  }
  ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

[[maybe_unused]] std::chrono::microseconds cpu_time() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return std::chrono::seconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         std::chrono::microseconds(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Under a sanitizer every instruction costs several times more, and the clients, the
// attackers and the server share the same cores, so rates and latencies measure the
// sanitizer: they are printed there, and bound only without one.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kTimingMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kTimingMeaningful = false;
#else
constexpr bool kTimingMeaningful = true;
#endif
#else
constexpr bool kTimingMeaningful = true;
#endif


}  // namespace
}  // namespace goro::http::test
