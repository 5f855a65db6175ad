// Echo server as a bare epoll loop: the ceiling the other servers are measured against.
// No runtime, no coroutines, no locks: one edge-triggered epoll loop per thread, each
// with its own SO_REUSEPORT listener, calling recv and send directly. A read that comes
// back short drained the socket, so it does not read again for EAGAIN (what goro's
// NetFd and Asio's reactor also skip). A send the kernel does not take whole is kept
// and finished on EPOLLOUT, so the server is correct, not just fast.
//   bench_net_echo_epoll [address] [threads]   (default 127.0.0.1:9000, 1 thread)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Connection {
  int fd = -1;
  std::string pending;  // bytes the kernel has not taken yet
};

int listen_on(const sockaddr_in& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 4096) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  return fd;
}

void drop(int ep, Connection* c) {
  ::epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  delete c;
}

// Sends what is pending; false when the connection failed.
bool flush(Connection* c) {
  while (!c->pending.empty()) {
    ssize_t n = ::send(c->fd, c->pending.data(), c->pending.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN;
    c->pending.erase(0, static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until the socket is drained, echoing as it goes; false when the connection
// ended. After a hang-up (events has EPOLLRDHUP, HUP or ERR) or urgent data (PRI) a
// short read proves nothing: the end of the stream, or the data behind the urgent
// mark, is still to be read and no edge will announce it.
bool serve(Connection* c, std::uint32_t events) {
  char buf[4096];
  const bool hangup = events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI);
  if (!flush(c)) return false;
  for (;;) {
    ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN;
    if (c->pending.empty()) {
      ssize_t w;
      do {
        w = ::send(c->fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
      } while (w < 0 && errno == EINTR);
      if (w < 0 && errno != EAGAIN) return false;
      if (w < 0) w = 0;
      if (w < n) c->pending.append(buf + w, static_cast<std::size_t>(n - w));
    } else {
      c->pending.append(buf, static_cast<std::size_t>(n));
      if (!flush(c)) return false;
    }
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
          auto* conn = new Connection{fd, {}};
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
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
  std::string address = argc > 1 ? argv[1] : "127.0.0.1:9000";
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  if (threads < 1) threads = 1;
  auto colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos ||
      ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "bad IPv4 address %s\n", address.c_str());
    return 2;
  }
  addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(address.c_str() + colon + 1)));
  std::fprintf(stderr, "epoll echo on %s with %d threads\n", address.c_str(), threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(loop, addr);
  loop(addr);
}
