// peer_epoll: an HTTP/1.1 server as a bare edge-triggered epoll loop, the ceiling the
// other servers of loadtest/run.sh are measured against. No runtime, no coroutines, no
// locks, no parser library: one epoll loop per thread, each with its own SO_REUSEPORT
// listener. It reads what the socket has, answers every complete request in that
// buffer with ONE send, and keeps an incomplete one for the next read.
//
// Framing is the minimum the load tests need: a request line, header fields, and a
// body only by Content-Length. Transfer-Encoding, a header block over 8 KiB or a body
// over 1 MiB get an error status and the connection closed.
//
//   GET  /, /plaintext   "Hello, World!"        GET /json   {"message":"Hello, World!"}
//   POST /echo           the body, with its Content-Type
//   GET  /healthz        "ok"                   anything else: 404
//
//   peer_epoll [address] [threads]   (default 127.0.0.1:8080, 1 thread)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kMaxHead = 8 * 1024;
constexpr std::size_t kMaxBody = 1 << 20;

struct Connection {
  int fd = -1;
  std::string input;     // the start of a request not complete yet
  std::string pending;   // response bytes the kernel has not taken yet
  bool closing = false;  // close once pending is sent
};

// "Date: ...\r\n", rebuilt once a second by each thread.
struct DateHeader {
  std::time_t second = 0;
  char text[64] = {};
  std::size_t size = 0;

  std::string_view get() {
    std::time_t now = std::time(nullptr);
    if (now != second) {
      second = now;
      std::tm tm{};
      ::gmtime_r(&now, &tm);
      size = std::strftime(text, sizeof text, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    }
    return {text, size};
  }
};

thread_local DateHeader date_header;

void append_response(std::string& out, int status, std::string_view reason, std::string_view type,
                     std::string_view body, bool close) {
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason;
  out += "\r\nContent-Type: ";
  out += type;
  out += "\r\n";
  out += date_header.get();
  out += "Server: epoll\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n";
  out += body;
}

bool equals_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Answers the complete requests at the start of `data` into `out`; returns how many
// bytes they took. Sets c->closing on an error or "Connection: close".
std::size_t answer_requests(Connection* c, std::string_view data, std::string& out) {
  std::size_t used = 0;
  while (!c->closing) {
    std::string_view rest = data.substr(used);
    std::size_t head_end = rest.find("\r\n\r\n");
    if (head_end == std::string_view::npos) {
      if (rest.size() > kMaxHead) {
        append_response(out, 431, "Request Header Fields Too Large", "text/plain",
                        "request head over 8 KiB\n", true);
        c->closing = true;
      }
      break;
    }
    std::string_view head = rest.substr(0, head_end);
    std::size_t line_end = head.find("\r\n");
    std::string_view line = head.substr(0, line_end);
    std::size_t sp1 = line.find(' ');
    std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.substr(sp2 + 1).substr(0, 7) != "HTTP/1.") {
      append_response(out, 400, "Bad Request", "text/plain", "malformed request line\n", true);
      c->closing = true;
      break;
    }
    std::string_view method = line.substr(0, sp1);
    std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));

    std::size_t body_size = 0;
    std::string_view type = "application/octet-stream";
    bool bad_length = false, chunked = false, close = false;
    std::string_view fields = line_end == std::string_view::npos ? "" : head.substr(line_end + 2);
    while (!fields.empty()) {
      std::size_t eol = fields.find("\r\n");
      std::string_view field = fields.substr(0, eol);
      fields = eol == std::string_view::npos ? "" : fields.substr(eol + 2);
      std::size_t colon = field.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view name = field.substr(0, colon), value = trim(field.substr(colon + 1));
      if (equals_nocase(name, "content-length")) {
        bad_length = value.empty() || value.size() > 9 ||
                     value.find_first_not_of("0123456789") != std::string_view::npos;
        if (!bad_length) body_size = std::strtoul(std::string(value).c_str(), nullptr, 10);
      } else if (equals_nocase(name, "content-type")) {
        type = value;
      } else if (equals_nocase(name, "transfer-encoding")) {
        chunked = true;
      } else if (equals_nocase(name, "connection")) {
        close = equals_nocase(value, "close");
      }
    }
    if (bad_length || chunked || body_size > kMaxBody) {
      append_response(out, chunked ? 501 : (bad_length ? 400 : 413),
                      chunked ? "Not Implemented" : (bad_length ? "Bad Request" : "Too Large"),
                      "text/plain", "Content-Length bodies up to 1 MiB only\n", true);
      c->closing = true;
      break;
    }
    std::size_t total = head_end + 4 + body_size;
    if (rest.size() < total) break;  // the body is still on its way
    std::string_view body = rest.substr(head_end + 4, body_size);
    used += total;

    if (method == "GET" && (path == "/plaintext" || path == "/")) {
      append_response(out, 200, "OK", "text/plain; charset=utf-8", "Hello, World!", close);
    } else if (method == "GET" && path == "/json") {
      append_response(out, 200, "OK", "application/json", R"({"message":"Hello, World!"})", close);
    } else if (method == "POST" && path == "/echo") {
      append_response(out, 200, "OK", type, body, close);
    } else if (method == "GET" && path == "/healthz") {
      append_response(out, 200, "OK", "text/plain; charset=utf-8", "ok", close);
    } else {
      append_response(out, 404, "Not Found", "text/plain", "404 page not found\n", close);
    }
    c->closing = close;
  }
  return used;
}

int listen_on(const sockaddr_in& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 4096) != 0) {
    std::perror("peer_epoll: listen");
    std::exit(1);
  }
  return fd;
}

void drop(int ep, Connection* c) {
  ::epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  delete c;
}

// Sends `data` after what is pending; keeps what the kernel does not take. False when
// the connection failed.
bool send_all(Connection* c, std::string_view data) {
  if (c->pending.empty() && !data.empty()) {
    ssize_t n;
    do {
      n = ::send(c->fd, data.data(), data.size(), MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN) return false;
    data.remove_prefix(n < 0 ? 0 : static_cast<std::size_t>(n));
  }
  c->pending.append(data);
  while (!c->pending.empty()) {
    ssize_t n = ::send(c->fd, c->pending.data(), c->pending.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN;
    c->pending.erase(0, static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until the socket is drained, answering as it goes; false when the connection
// is to be dropped. After a hang-up (EPOLLRDHUP, HUP or ERR) a short read proves
// nothing: the end of the stream is still to be read and no edge will announce it.
bool serve(Connection* c, std::uint32_t events) {
  static thread_local char buf[64 * 1024];
  static thread_local std::string out;
  const bool hangup = events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
  if (!send_all(c, {})) return false;
  if (c->closing) return !c->pending.empty();
  for (;;) {
    ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN;
    out.clear();
    if (c->input.empty()) {
      std::string_view data(buf, static_cast<std::size_t>(n));
      c->input.assign(data.substr(answer_requests(c, data, out)));
    } else {
      c->input.append(buf, static_cast<std::size_t>(n));
      c->input.erase(0, answer_requests(c, c->input, out));
    }
    if (!send_all(c, out)) return false;
    if (c->closing) return !c->pending.empty();
    if (!hangup && static_cast<std::size_t>(n) < sizeof buf) return true;  // drained
  }
}

void loop(sockaddr_in addr) {
  int lfd = listen_on(addr);
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event lev{};
  lev.events = EPOLLIN;
  lev.data.ptr = nullptr;  // the listener
  ::epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
  epoll_event events[256];
  for (;;) {
    int n = ::epoll_wait(ep, events, 256, -1);
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      if (c == nullptr) {
        for (;;) {
          int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto* conn = new Connection;
          conn->fd = fd;
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
          ev.data.ptr = conn;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
          if (!serve(conn, 0)) drop(ep, conn);
        }
        continue;
      }
      if (!serve(c, events[i].events)) drop(ep, c);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = argc > 1 ? argv[1] : "127.0.0.1:8080";
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  if (threads < 1) threads = 1;
  auto colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos ||
      ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "peer_epoll: bad IPv4 address %s\n", address.c_str());
    return 2;
  }
  addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(address.c_str() + colon + 1)));
  std::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr, "peer_epoll: serving http://%s with %d threads\n", address.c_str(), threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(loop, addr);
  loop(addr);
}
