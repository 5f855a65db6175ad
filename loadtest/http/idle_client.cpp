// idle_client: opens N keep-alive HTTP/1.1 connections to one server, sends one
// request on each and reads its response, then holds them all idle, for the idle
// scenario of loadtest/run.sh (server RSS per idle connection).
//
// The connections come from SOURCES addresses 127.0.0.2, 127.0.0.3, ... in turn, each
// bound with IP_BIND_ADDRESS_NO_PORT so the ephemeral port is chosen at connect time:
// every source address has the whole ephemeral port range to itself, so 100,000
// connections need only a few. At most 256 connections are being opened at a time, so
// the server's listen backlog never overflows.
//
// A PATH starting with /ws/ (goro-demo's /ws/echo) is asked for as a WebSocket: the
// request is a handshake and the answer its 101, after which the connection idles as a
// WebSocket (the idle-ws scenario).
//
// Output (stdout): "READY connected=N failed=F" once every connection has its answer
// or has failed, then, when SIGTERM/SIGINT arrives or HOLD seconds have passed,
// "DONE closed_by_server=K" and exit. RLIMIT_NOFILE is raised to its hard limit.
// SIGUSR1 while holding: one more request on every idle connection, all at once, and
// "AGAIN answered=A sent=S" once their answers are in (plain HTTP only; a WebSocket
// holder prints "AGAIN unsupported"), so that the server's memory can be read a known
// time after every connection's last response.
//
//   idle_client HOST PORT N [SOURCES=4] [PATH=/plaintext] [HOLD=120]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

volatile std::sig_atomic_t stop_requested = 0;

volatile std::sig_atomic_t again_requested = 0;

void on_signal(int) { stop_requested = 1; }
void on_again(int) { again_requested = 1; }

enum class State { connecting, reading, idle, failed };

struct Connection {
  int fd = -1;
  State state = State::connecting;
  std::string response;
};

// True once `r` holds a whole response: a head and Content-Length bytes of body.
bool response_complete(const std::string& r) {
  std::size_t head_end = r.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::string_view head(r.data(), head_end);
  std::size_t body = 0;
  for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    std::string_view line = head.substr(at + 2, head.find("\r\n", at + 2) - at - 2);
    if (line.size() > 15 && ::strncasecmp(line.data(), "content-length:", 15) == 0) {
      body = std::strtoul(std::string(line.substr(15)).c_str(), nullptr, 10);
    }
  }
  return r.size() >= head_end + 4 + body;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: idle_client HOST PORT N [SOURCES] [PATH] [HOLD]\n");
    return 2;
  }
  const char* host = argv[1];
  const int port = std::atoi(argv[2]);
  const long n = std::atol(argv[3]);
  const int sources = argc > 4 ? std::max(1, std::atoi(argv[4])) : 4;
  const std::string path = argc > 5 ? argv[5] : "/plaintext";
  const int hold = argc > 6 ? std::atoi(argv[6]) : 120;

  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (static_cast<rlim_t>(n) + 64 > lim.rlim_cur) {
    std::fprintf(stderr, "idle_client: RLIMIT_NOFILE %llu is too low for %ld connections\n",
                 static_cast<unsigned long long>(lim.rlim_cur), n);
    return 1;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGUSR1, on_again);

  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host, &server.sin_addr) != 1) {
    std::fprintf(stderr, "idle_client: bad IPv4 address %s\n", host);
    return 2;
  }
  const std::string upgrade =
      path.rfind("/ws/", 0) == 0
          ? "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
          : "";
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + upgrade + "\r\n";

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Connection> conns(static_cast<std::size_t>(n));
  long next = 0, in_flight = 0, answered = 0, failed = 0;
  auto fail = [&](Connection& c) {
    if (c.state == State::connecting || c.state == State::reading) --in_flight;
    c.state = State::failed;
    ::close(c.fd);
    ++failed;
  };
  auto open_more = [&] {
    while (next < n && in_flight < 256) {
      Connection& c = conns[static_cast<std::size_t>(next)];
      sockaddr_in source{};
      source.sin_family = AF_INET;
      source.sin_addr.s_addr = htonl(0x7f000002u + static_cast<std::uint32_t>(next % sources));
      ++next;
      ++in_flight;
      c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      int one = 1;
      ::setsockopt(c.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      if (c.fd < 0 || ::bind(c.fd, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0 ||
          (::connect(c.fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0 &&
           errno != EINPROGRESS)) {
        if (failed == 0) std::perror("idle_client: connect");
        fail(c);
        continue;
      }
      epoll_event ev{};
      ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
      ev.data.ptr = &c;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    }
  };

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<epoll_event> events(1024);
  open_more();
  while (answered + failed < n && !stop_requested) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "idle_client: gave up after 60 s with %ld connections answered\n",
                   answered);
      break;
    }
    int k = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < k; ++i) {
      Connection& c = *static_cast<Connection*>(events[i].data.ptr);
      if (c.state == State::connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || ::send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) !=
                            static_cast<ssize_t>(request.size())) {
          fail(c);
          continue;
        }
        c.state = State::reading;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = &c;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
      } else if (c.state == State::reading) {
        char buf[4096];
        ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got <= 0 && !(got < 0 && errno == EAGAIN)) {
          fail(c);
          continue;
        }
        if (got > 0) c.response.append(buf, static_cast<std::size_t>(got));
        if (response_complete(c.response)) {
          c.state = State::idle;
          c.response = std::string();
          --in_flight;
          ++answered;
        }
      }
    }
    open_more();
  }
  std::printf("READY connected=%ld failed=%ld\n", answered, n - answered);
  std::fflush(stdout);

  // Hold: count the idle connections the server closes meanwhile.
  long closed = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(hold);
  while (!stop_requested && std::chrono::steady_clock::now() < until) {
    if (again_requested) {
      again_requested = 0;
      if (!upgrade.empty()) {
        std::printf("AGAIN unsupported\n");
        std::fflush(stdout);
        continue;
      }
      long sent = 0, again = 0;
      for (Connection& c : conns) {
        if (c.state != State::idle) continue;
        if (::send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size())) {
          c.state = State::reading;
          ++sent;
        }
      }
      const auto again_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (again < sent && !stop_requested && std::chrono::steady_clock::now() < again_until) {
        int k = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
        for (int i = 0; i < k; ++i) {
          Connection& c = *static_cast<Connection*>(events[i].data.ptr);
          char buf[4096];
          ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
          if (got < 0 && errno == EAGAIN) continue;
          if (got <= 0) {
            ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
            if (c.state == State::idle || c.state == State::reading) ++closed;
            c.state = State::failed;
            continue;
          }
          if (c.state != State::reading) continue;  // unexpected bytes: dropped
          c.response.append(buf, static_cast<std::size_t>(got));
          if (response_complete(c.response)) {
            c.state = State::idle;
            c.response = std::string();
            ++again;
          }
        }
      }
      std::printf("AGAIN answered=%ld sent=%ld\n", again, sent);
      std::fflush(stdout);
      continue;
    }
    int k = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < k; ++i) {
      Connection& c = *static_cast<Connection*>(events[i].data.ptr);
      char buf[4096];
      ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got > 0 || (got < 0 && errno == EAGAIN)) continue;  // unexpected bytes: dropped
      ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
      if (c.state == State::idle) ++closed;
      c.state = State::failed;
    }
  }
  std::printf("DONE closed_by_server=%ld\n", closed);
  return 0;
}
