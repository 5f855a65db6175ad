// ws_echo_client: WebSocket round trips against an echo endpoint (goro-demo's /ws/echo),
// to measure the message path of a WebSocket server: N connections, each with one
// binary message of SIZE bytes in flight; every echo is checked byte for byte before the
// next message goes. One thread and epoll, so that the client costs little beside the
// server.
//
// Output (stdout), after WARMUP + SECONDS: "messages=M per_s=R errors=E connections=C",
// counting the SECONDS after the warm-up only. Exit 1 when a connection failed or an
// echo differed, 2 on bad arguments.
//
//   ws_echo_client HOST PORT N SIZE [SECONDS=5] [WARMUP=1] [PATH=/ws/echo]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

enum class State { connecting, handshake, echoing, failed };

struct Connection {
  int fd = -1;
  State state = State::connecting;
  std::string in;  // bytes received and not yet matched
};

// A binary frame's header for a payload of `size` bytes (RFC 6455 5.2), the mask bit set
// when `masked`.
std::string frame_header(std::size_t size, bool masked) {
  const char mask = masked ? static_cast<char>(0x80) : 0;
  std::string f;
  f.push_back(static_cast<char>(0x82));
  if (size < 126) {
    f.push_back(static_cast<char>(mask | static_cast<char>(size)));
  } else if (size <= 0xFFFF) {
    f.push_back(static_cast<char>(mask | 126));
    f.push_back(static_cast<char>(size >> 8));
    f.push_back(static_cast<char>(size & 0xFF));
  } else {
    f.push_back(static_cast<char>(mask | 127));
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((size >> (8 * i)) & 0xFF));
  }
  return f;
}

char payload_byte(std::size_t i) { return static_cast<char>('a' + i % 26); }

// The client's masked frame, as every client frame must be.
std::string client_frame(std::size_t size) {
  std::string f = frame_header(size, true);
  const unsigned char key[4] = {0x12, 0x34, 0x56, 0x78};
  f.append(reinterpret_cast<const char*>(key), 4);
  for (std::size_t i = 0; i < size; ++i)
    f.push_back(static_cast<char>(static_cast<unsigned char>(payload_byte(i)) ^ key[i % 4]));
  return f;
}

// The server's unmasked frame carrying the same payload.
std::string server_frame(std::size_t size) {
  std::string f = frame_header(size, false);
  for (std::size_t i = 0; i < size; ++i) f.push_back(payload_byte(i));
  return f;
}

bool send_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EAGAIN) {
      // The server reads as it echoes; a short wait lets the socket drain.
      ::usleep(50);
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: ws_echo_client HOST PORT N SIZE [SECONDS] [WARMUP] [PATH]\n");
    return 2;
  }
  const char* host = argv[1];
  const int port = std::atoi(argv[2]);
  const long n = std::atol(argv[3]);
  const long size = std::atol(argv[4]);
  const double seconds = argc > 5 ? std::atof(argv[5]) : 5;
  const double warmup = argc > 6 ? std::atof(argv[6]) : 1;
  const std::string path = argc > 7 ? argv[7] : "/ws/echo";
  if (n <= 0 || size < 0 || size > (1 << 20) || seconds <= 0 || warmup < 0) {
    std::fprintf(stderr, "ws_echo_client: N > 0, 0 <= SIZE <= 1 MiB, SECONDS > 0\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host, &server.sin_addr) != 1) {
    std::fprintf(stderr, "ws_echo_client: bad IPv4 address %s\n", host);
    return 2;
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + host +
                              "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                              "Sec-WebSocket-Version: 13\r\n\r\n";
  const std::string frame = client_frame(static_cast<std::size_t>(size));
  const std::string echo = server_frame(static_cast<std::size_t>(size));

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Connection> conns(static_cast<std::size_t>(n));
  long errors = 0, ready = 0;
  auto fail = [&](Connection& c, const char* why) {
    if (errors == 0) std::fprintf(stderr, "ws_echo_client: %s\n", why);
    ++errors;
    c.state = State::failed;
    ::close(c.fd);
  };
  for (Connection& c : conns) {
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0 &&
        errno != EINPROGRESS) {
      fail(c, "connect failed");
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = &c;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(warmup));
  const auto end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  long counted = 0;
  std::vector<epoll_event> events(1024);
  char buf[65536];
  while (Clock::now() < end) {
    int k = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    const bool measuring = Clock::now() >= measure_from;
    for (int i = 0; i < k; ++i) {
      Connection& c = *static_cast<Connection*>(events[i].data.ptr);
      if (c.state == State::failed) continue;
      if (c.state == State::connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0 || !send_all(c.fd, request)) {
          fail(c, "the handshake could not be sent");
          continue;
        }
        c.state = State::handshake;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = &c;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
        continue;
      }
      for (;;) {
        ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got < 0 && errno == EAGAIN) break;
        if (got <= 0) {
          fail(c, "the server closed a connection");
          break;
        }
        c.in.append(buf, static_cast<std::size_t>(got));
        if (c.state == State::handshake) {
          const std::size_t head_end = c.in.find("\r\n\r\n");
          if (head_end == std::string::npos) continue;
          if (c.in.rfind("HTTP/1.1 101", 0) != 0) {
            fail(c, "the server did not answer 101");
            break;
          }
          c.in.erase(0, head_end + 4);
          c.state = State::echoing;
          ++ready;
          if (!send_all(c.fd, frame)) {
            fail(c, "a send failed");
            break;
          }
        }
        while (c.state == State::echoing && c.in.size() >= echo.size()) {
          if (c.in.compare(0, echo.size(), echo) != 0) {
            fail(c, "an echo differed from the message sent");
            break;
          }
          c.in.erase(0, echo.size());
          if (measuring) ++counted;
          if (!send_all(c.fd, frame)) fail(c, "a send failed");
        }
        if (c.state == State::failed) break;
      }
    }
  }
  std::printf("messages=%ld per_s=%.0f errors=%ld connections=%ld\n", counted,
              static_cast<double>(counted) / seconds, errors, ready);
  return errors == 0 && ready == n ? 0 : 1;
}
