// grpc_idle_client: opens N h2c connections to a gRPC server, makes one
// helloworld.Greeter/SayHello call (name "world") on each, then holds them all idle,
// for the grpc-idle scenario of loadtest/run.sh (server RSS per idle gRPC connection).
//
// It speaks just enough HTTP/2 by hand to be a well-behaved idle client and no more:
// the connection preface and an empty SETTINGS, one HEADERS (HPACK without the dynamic
// table or Huffman, which a decoder must accept) and one DATA frame with the request
// message; it acknowledges the server's SETTINGS and answers its PINGs (grpc-go and
// gRPC C++ ping idle connections) for as long as it holds them, and never reads the
// response headers: a call counts as answered when a DATA frame with a message and then
// an END_STREAM came back on stream 1 (an error is a trailers-only response, no DATA,
// and counts as failed).
//
// The connections come from SOURCES addresses 127.0.0.2, 127.0.0.3, ... in turn (as
// loadtest/http/idle_client.cpp does), at most 256 being opened at a time.
//
// Output (stdout): "READY connected=N failed=F" once every connection has its answer
// or has failed, then, when SIGTERM/SIGINT arrives or HOLD seconds have passed,
// "DONE closed_by_server=K" and exit. RLIMIT_NOFILE is raised to its hard limit.
//
//   grpc_idle_client HOST PORT N [SOURCES=4] [HOLD=120]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

volatile std::sig_atomic_t stop_requested = 0;

void on_signal(int) { stop_requested = 1; }

enum class State { connecting, calling, idle, failed };

struct Connection {
  int fd = -1;
  State state = State::connecting;
  std::string input;            // bytes received and not yet parsed into frames
  std::size_t reply_bytes = 0;  // DATA payload on stream 1
};

constexpr std::uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4, kPing = 0x6,
                       kGoaway = 0x7;
constexpr std::uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

void append_frame(std::string& out, std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  std::string_view payload) {
  const auto len = static_cast<std::uint32_t>(payload.size());
  const char head[9] = {static_cast<char>(len >> 16),    static_cast<char>(len >> 8),
                        static_cast<char>(len),          static_cast<char>(type),
                        static_cast<char>(flags),        static_cast<char>(stream >> 24),
                        static_cast<char>(stream >> 16), static_cast<char>(stream >> 8),
                        static_cast<char>(stream)};
  out.append(head, 9);
  out.append(payload);
}

// An HPACK string literal, not Huffman-coded; every string here is under 127 bytes.
void append_string(std::string& out, std::string_view s) {
  out.push_back(static_cast<char>(s.size()));
  out.append(s);
}

// Everything a connection sends first: preface, SETTINGS, the call's HEADERS and DATA.
std::string opening_bytes(const std::string& authority) {
  std::string block;
  block.push_back('\x83');  // :method POST (static table 3)
  block.push_back('\x86');  // :scheme http (static table 6)
  block.push_back('\x04');  // :path, literal without indexing, name from static table 4
  append_string(block, "/helloworld.Greeter/SayHello");
  block.push_back('\x01');  // :authority (static table 1)
  append_string(block, authority);
  block.append("\x0f\x10", 2);  // content-type (static table 31 = 15 + 16)
  append_string(block, "application/grpc");
  block.push_back('\x00');  // te: a new name
  append_string(block, "te");
  append_string(block, "trailers");
  // The message: not compressed, 7 bytes: HelloRequest{name: "world"}.
  const std::string message("\x00\x00\x00\x00\x07\x0a\x05world", 12);
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  append_frame(out, kSettings, 0, 0, {});
  append_frame(out, kHeaders, kEndHeaders, 1, block);
  append_frame(out, kData, kEndStream, 1, message);
  return out;
}

enum class Outcome { more, answered, failed };

// Parses the whole frames in c.input; answers SETTINGS and PING. Says whether the call
// finished (answered or failed) with these frames.
Outcome consume_frames(Connection& c) {
  Outcome outcome = Outcome::more;
  std::size_t at = 0;
  std::string replies;
  while (c.input.size() - at >= 9) {
    const auto* p = reinterpret_cast<const unsigned char*>(c.input.data() + at);
    const std::size_t len = (std::size_t{p[0]} << 16) | (std::size_t{p[1]} << 8) | p[2];
    if (c.input.size() - at < 9 + len) break;
    const std::uint8_t type = p[3], flags = p[4];
    const std::uint32_t stream = ((std::uint32_t{p[5]} & 0x7f) << 24) |
                                 (std::uint32_t{p[6]} << 16) | (std::uint32_t{p[7]} << 8) | p[8];
    std::string_view payload(c.input.data() + at + 9, len);
    if (type == kSettings && !(flags & kAck)) {
      append_frame(replies, kSettings, kAck, 0, {});
    } else if (type == kPing && !(flags & kAck)) {
      append_frame(replies, kPing, kAck, 0, payload);
    } else if (stream == 1 && type == kData) {
      c.reply_bytes += len;
    } else if (stream == 1 && type == kRstStream) {
      outcome = Outcome::failed;
    } else if (type == kGoaway) {
      outcome = Outcome::failed;
    }
    if (stream == 1 && (type == kData || type == kHeaders) && (flags & kEndStream) &&
        outcome == Outcome::more) {
      // A reply message has a 5-byte prefix; a trailers-only response (an error) has none.
      outcome = c.reply_bytes > 5 ? Outcome::answered : Outcome::failed;
    }
    at += 9 + len;
  }
  c.input.erase(0, at);
  if (!replies.empty()) {
    (void)::send(c.fd, replies.data(), replies.size(), MSG_NOSIGNAL);
  }
  return outcome;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: grpc_idle_client HOST PORT N [SOURCES] [HOLD]\n");
    return 2;
  }
  const char* host = argv[1];
  const int port = std::atoi(argv[2]);
  const long n = std::atol(argv[3]);
  const int sources = argc > 4 ? std::max(1, std::atoi(argv[4])) : 4;
  const int hold = argc > 5 ? std::atoi(argv[5]) : 120;
  if (port <= 0 || port > 65535 || n <= 0) {
    std::fprintf(stderr, "grpc_idle_client: bad PORT or N\n");
    return 2;
  }

  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (static_cast<rlim_t>(n) + 64 > lim.rlim_cur) {
    std::fprintf(stderr, "grpc_idle_client: RLIMIT_NOFILE %llu is too low for %ld connections\n",
                 static_cast<unsigned long long>(lim.rlim_cur), n);
    return 1;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host, &server.sin_addr) != 1) {
    std::fprintf(stderr, "grpc_idle_client: bad IPv4 address %s\n", host);
    return 2;
  }
  const std::string opening = opening_bytes(std::string(host) + ":" + std::to_string(port));

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Connection> conns(static_cast<std::size_t>(n));
  long next = 0, in_flight = 0, answered = 0, failed = 0;
  auto fail = [&](Connection& c) {
    if (c.state == State::connecting || c.state == State::calling) --in_flight;
    c.state = State::failed;
    ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
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
        if (failed == 0) std::perror("grpc_idle_client: connect");
        fail(c);
        continue;
      }
      epoll_event ev{};
      ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
      ev.data.ptr = &c;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    }
  };
  // Reads what arrived; false when the peer closed or the read failed.
  auto read_into = [](Connection& c) {
    char buf[16384];
    for (;;) {
      ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got > 0) {
        c.input.append(buf, static_cast<std::size_t>(got));
        continue;
      }
      return got < 0 && errno == EAGAIN;
    }
  };

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<epoll_event> events(1024);
  open_more();
  while (answered + failed < n && !stop_requested) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "grpc_idle_client: gave up after 60 s with %ld calls answered\n",
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
        if (err != 0 || ::send(c.fd, opening.data(), opening.size(), MSG_NOSIGNAL) !=
                            static_cast<ssize_t>(opening.size())) {
          fail(c);
          continue;
        }
        c.state = State::calling;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = &c;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
      } else if (c.state == State::calling || c.state == State::idle) {
        const bool open = read_into(c);
        const Outcome outcome = consume_frames(c);
        if (c.state == State::calling) {
          if (outcome == Outcome::failed || (!open && outcome != Outcome::answered)) {
            fail(c);
            continue;
          }
          if (outcome == Outcome::answered) {
            c.state = State::idle;
            --in_flight;
            ++answered;
          }
        }
      }
    }
    open_more();
  }
  std::printf("READY connected=%ld failed=%ld\n", answered, n - answered);
  std::fflush(stdout);

  // Hold: answer PINGs, count the idle connections the server closes meanwhile.
  long closed = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(hold);
  while (!stop_requested && std::chrono::steady_clock::now() < until) {
    int k = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < k; ++i) {
      Connection& c = *static_cast<Connection*>(events[i].data.ptr);
      if (c.state == State::failed) continue;
      const bool open = read_into(c);
      (void)consume_frames(c);
      if (open) continue;
      ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
      if (c.state == State::idle) ++closed;
      c.state = State::failed;
    }
  }
  std::printf("DONE closed_by_server=%ld\n", closed);
  return 0;
}
