// Echo load client on plain epoll: CONNS connections spread over THREADS threads, each
// connection ping-pongs one MSG-byte message (send, wait for all of it to come back,
// send again). Counts round trips for DURATION seconds after a WARMUP.
//   bench_net_client HOST PORT [CONNS=128] [MSG=64] [DURATION=5] [THREADS=1] [WARMUP=1]
// Prints: RESULT msgs_per_sec=<n> conns=<n> msg=<n> duration=<s>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  int received = 0;
};

std::atomic<bool> measuring{false};
std::atomic<bool> stopping{false};
std::atomic<long long> total{0};
std::atomic<int> failures{0};

int connect_with_retry(const sockaddr_in& addr) {
  auto give_up = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return fd;
    ::close(fd);
    if (Clock::now() > give_up) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void worker(sockaddr_in addr, int conns, int msg) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Connection> cs(static_cast<std::size_t>(conns));
  std::vector<char> out(static_cast<std::size_t>(msg), 'p');
  std::vector<char> in(65536);
  for (auto& c : cs) {
    c.fd = connect_with_retry(addr);
    if (c.fd < 0) {
      failures.fetch_add(1);
      return;
    }
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    // Edge-triggered: a level-triggered epoll polls every returned socket once more on
    // the next wait, a cost per message on the client's CPU, which the server shares
    // nothing with but which caps what the client can drive.
    ev.events = EPOLLIN | EPOLLET;
    ev.data.ptr = &c;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  for (auto& c : cs) {
    if (::send(c.fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size()))
      failures.fetch_add(1);
  }
  long long local = 0;
  epoll_event events[256];
  while (!stopping.load(std::memory_order_relaxed)) {
    int n = ::epoll_wait(ep, events, 256, 100);
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Connection*>(events[i].data.ptr);
      // One message is in flight per connection, so once it is whole the socket is
      // drained; a piece of it is followed by an edge for the rest.
      for (;;) {
        const auto want = static_cast<std::size_t>(msg - c->received);
        ssize_t r = ::recv(c->fd, in.data(), want, 0);
        if (r > 0) {
          c->received += static_cast<int>(r);
          if (c->received < msg) {
            if (static_cast<std::size_t>(r) < want) break;  // drained; the rest comes with an edge
            continue;
          }
          c->received = 0;
          if (measuring.load(std::memory_order_relaxed)) ++local;
          if (::send(c->fd, out.data(), out.size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(out.size()))
            failures.fetch_add(1);
          break;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          failures.fetch_add(1);
          ::epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
        }
        break;
      }
    }
  }
  total.fetch_add(local);
  for (auto& c : cs) ::close(c.fd);
  ::close(ep);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s HOST PORT [CONNS] [MSG] [DURATION] [THREADS] [WARMUP]\n",
                 argv[0]);
    return 2;
  }
  int conns = argc > 3 ? std::atoi(argv[3]) : 128;
  int msg = argc > 4 ? std::atoi(argv[4]) : 64;
  double duration = argc > 5 ? std::atof(argv[5]) : 5;
  int threads = argc > 6 ? std::atoi(argv[6]) : 1;
  double warmup = argc > 7 ? std::atof(argv[7]) : 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[2])));
  if (::inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
    std::fprintf(stderr, "bad IPv4 address %s\n", argv[1]);
    return 2;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    int mine = conns / threads + (t < conns % threads ? 1 : 0);
    pool.emplace_back(worker, addr, mine, msg);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  measuring = true;
  auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(duration));
  measuring = false;
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stopping = true;
  for (auto& t : pool) t.join();
  if (failures.load() != 0) {
    std::fprintf(stderr, "%d connection failures\n", failures.load());
    return 1;
  }
  std::printf("RESULT msgs_per_sec=%.0f conns=%d msg=%d duration=%.2f\n",
              static_cast<double>(total.load()) / secs, conns, msg, secs);
  return 0;
}
