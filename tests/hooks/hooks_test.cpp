// goro::hooks on sockets, polls and sleeps: libc's blocking calls, made on a goroutine,
// park it; made elsewhere, they are libc's.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <goro/hooks/hooks.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace {

// errno as the calling goroutine sees it now. glibc declares __errno_location const, so a
// compiler may look it up once per function and keep it across a call that parks: after
// the goroutine resumed on another thread, `errno` would read the old thread's. A call
// that cannot be inlined or merged looks it up afresh.
[[gnu::noinline]] int errno_now() {
  asm volatile("" ::: "memory");
  return errno;
}

// A call's result and the errno it left, read before anything else runs (an assertion
// in between may change errno).
struct Outcome {
  long result;
  int error;
};
template <class Call>
Outcome outcome(Call call) {
  errno = 0;
  const long result = static_cast<long>(call());
  return {result, errno_now()};
}


using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void run_with(int procs, const std::function<void()>& body) {
  goro::Config config;
  config.maxprocs = procs;
  goro::run(body, config);
}

// A connected pair of blocking Unix stream sockets, made through the hooks.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    a = fds[0];
    b = fds[1];
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  int a = -1, b = -1;
};

// A TCP listener on 127.0.0.1 with an ephemeral port, made through the hooks.
int listen_local(sockaddr_in* addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(addr), len), 0);
  EXPECT_EQ(::listen(fd, 16), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(addr), &len), 0);
  return fd;
}

class HooksTest : public ::testing::TestWithParam<int> {};

TEST(Hooks, AreLinked) { EXPECT_TRUE(goro::hooks::linked()); }

// The figure: 200 goroutines sleeping 100 ms in usleep at one P end together,
// with no EINTR and no thread per sleeper.
TEST_P(HooksTest, TwoHundredSleepsEndTogether) {
  run_with(GetParam(), [] {
    constexpr int kSleepers = 200;
    std::atomic<int> ok{0};
    goro::WaitGroup wg;
    const auto t0 = Clock::now();
    for (int i = 0; i < kSleepers; ++i) {
      wg.add(1);
      goro::go([&, i] {
        int r = -1;
        switch (i % 4) {
          case 0: r = ::usleep(100'000); break;
          case 1: {
            const timespec d{0, 100'000'000};
            r = ::nanosleep(&d, nullptr);
            break;
          }
          case 2: {
            timespec at;
            ::clock_gettime(CLOCK_MONOTONIC, &at);
            at.tv_nsec += 100'000'000;
            if (at.tv_nsec >= 1'000'000'000) {
              at.tv_sec += 1;
              at.tv_nsec -= 1'000'000'000;
            }
            r = ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr);
            break;
          }
          default: r = ::poll(nullptr, 0, 100);
        }
        if (r == 0) ok.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    const double ms = ms_since(t0);
    std::printf("200 sleeps of 100 ms at %d P: %.0f ms, %d threads\n", goro::maxprocs(), ms,
                goro::stats().threads);
    EXPECT_EQ(ok.load(), kSleepers);
    EXPECT_GE(ms, 99);
    EXPECT_LT(ms, 1000);  // ~100-300 ms; a loaded 2-core CI machine gets slack
    EXPECT_LE(goro::stats().threads, goro::maxprocs() + 4);
  });
}

TEST(Hooks, ZeroSleepsAndZeroTimeoutsReturnAtOnce) {
  run_with(1, [] {
    const auto t0 = Clock::now();
    EXPECT_EQ(::sleep(0), 0u);
    EXPECT_EQ(::usleep(0), 0);
    const timespec zero{0, 0};
    EXPECT_EQ(::nanosleep(&zero, nullptr), 0);
    Pair p;
    pollfd fd{p.a, POLLIN, 0};
    EXPECT_EQ(::poll(&fd, 1, 0), 0);
    timeval tv{0, 0};
    fd_set set;
    FD_ZERO(&set);
    FD_SET(p.a, &set);
    EXPECT_EQ(::select(p.a + 1, &set, nullptr, nullptr, &tv), 0);
    EXPECT_LT(ms_since(t0), 50);
    const timespec bad{0, 2'000'000'000};
    const Outcome o = outcome([&] { return ::nanosleep(&bad, nullptr); });
    EXPECT_EQ(o.result, -1);
    EXPECT_EQ(o.error, EINVAL);
  });
}

// A read on a blocking socket parks the goroutine: at one P, another goroutine runs
// meanwhile, and writes what the reader gets.
TEST_P(HooksTest, ReadOnABlockingSocketParksTheGoroutine) {
  run_with(GetParam(), [] {
    Pair p;
    std::atomic<int> ticks{0};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      for (int i = 0; i < 5; ++i) {
        goro::sleep(10ms);
        ticks.fetch_add(1);
      }
      EXPECT_EQ(::write(p.b, "hello", 5), 5);
      wg.done();
    });
    char buf[16];
    const ssize_t n = ::read(p.a, buf, sizeof buf);
    ASSERT_EQ(n, 5);
    EXPECT_EQ(std::memcmp(buf, "hello", 5), 0);
    EXPECT_EQ(ticks.load(), 5);
    // The user's view of the flags: still blocking.
    EXPECT_EQ(::fcntl(p.a, F_GETFL) & O_NONBLOCK, 0);
    wg.wait();
  });
}

// A write larger than the socket's buffer parks until the reader makes room.
TEST_P(HooksTest, AWriteThatFillsTheSocketParksUntilRead) {
  run_with(GetParam(), [] {
    Pair p;
    constexpr std::size_t kSize = 4 << 20;
    std::vector<char> out(kSize, 'x');
    std::size_t got = 0;
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      std::vector<char> in(64 << 10);
      while (got < kSize) {
        const ssize_t n = ::recv(p.b, in.data(), in.size(), 0);
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      wg.done();
    });
    EXPECT_EQ(::send(p.a, out.data(), out.size(), 0), static_cast<ssize_t>(kSize));
    wg.wait();
    EXPECT_EQ(got, kSize);
    // MSG_WAITALL waits for all of it, as the blocking call does.
    wg.add(1);
    goro::go([&] {
      EXPECT_EQ(::write(p.b, "ab", 2), 2);
      goro::sleep(20ms);
      EXPECT_EQ(::write(p.b, "cd", 2), 2);
      wg.done();
    });
    char four[4];
    EXPECT_EQ(::recv(p.a, four, sizeof four, MSG_WAITALL), 4);
    EXPECT_EQ(std::memcmp(four, "abcd", 4), 0);
    wg.wait();
  });
}

TEST(Hooks, SocketTimeoutsEndWaits) {
  run_with(1, [] {
    Pair p;
    const timeval tv{0, 100'000};
    ASSERT_EQ(::setsockopt(p.a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    char c;
    const auto t0 = Clock::now();
    const Outcome o = outcome([&] { return ::read(p.a, &c, 1); });
    EXPECT_EQ(o.result, -1);
    EXPECT_TRUE(o.error == EAGAIN || o.error == EWOULDBLOCK) << o.error;
    const double ms = ms_since(t0);
    EXPECT_GE(ms, 99);
    EXPECT_LT(ms, 1000);
    // SO_SNDTIMEO bounds a send nobody reads: what was queued before it passed.
    ASSERT_EQ(::setsockopt(p.a, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
    std::vector<char> big(8 << 20, 'x');
    const auto t1 = Clock::now();
    const ssize_t sent = ::send(p.a, big.data(), big.size(), 0);
    EXPECT_GT(sent, 0);
    EXPECT_LT(sent, static_cast<ssize_t>(big.size()));
    EXPECT_GE(ms_since(t1), 99);
    EXPECT_LT(ms_since(t1), 1000);
  });
}

// A duplicate shares the file, so the O_NONBLOCK the hooks set underneath: it is
// tracked too, blocking as the user left it, and parks as the original does.
TEST(Hooks, DuplicatesAreTrackedAsTheOriginal) {
  run_with(1, [] {
    Pair p;
    char c;
    EXPECT_EQ(::write(p.b, "1", 1), 1);
    EXPECT_EQ(::read(p.a, &c, 1), 1);  // non-blocking underneath from here on
    for (const int copy : {::dup(p.a), ::fcntl(p.a, F_DUPFD_CLOEXEC, 100)}) {
      ASSERT_GE(copy, 0);
      EXPECT_EQ(::fcntl(copy, F_GETFL) & O_NONBLOCK, 0);
      goro::WaitGroup wg;
      wg.add(1);
      goro::go([&] {
        goro::sleep(20ms);
        EXPECT_EQ(::write(p.b, "2", 1), 1);
        wg.done();
      });
      const Outcome o = outcome([&] { return ::read(copy, &c, 1); });
      EXPECT_EQ(o.result, 1) << o.error;  // parks, not EAGAIN
      wg.wait();
      ::close(copy);
    }
  });
}

TEST(Hooks, NonBlockingSocketsAreTheUsers) {
  run_with(1, [] {
    Pair p;
    ASSERT_EQ(::fcntl(p.a, F_SETFL, ::fcntl(p.a, F_GETFL) | O_NONBLOCK), 0);
    EXPECT_NE(::fcntl(p.a, F_GETFL) & O_NONBLOCK, 0);
    char c;
    const auto t0 = Clock::now();
    const Outcome o = outcome([&] { return ::read(p.a, &c, 1); });
    EXPECT_EQ(o.result, -1);
    EXPECT_EQ(o.error, EAGAIN);
    EXPECT_LT(ms_since(t0), 50);
    // Back to blocking, then FIONBIO: the user's view follows both.
    ASSERT_EQ(::fcntl(p.a, F_SETFL, ::fcntl(p.a, F_GETFL) & ~O_NONBLOCK), 0);
    EXPECT_EQ(::fcntl(p.a, F_GETFL) & O_NONBLOCK, 0);
    int on = 1;
    ASSERT_EQ(::ioctl(p.a, FIONBIO, &on), 0);
    EXPECT_NE(::fcntl(p.a, F_GETFL) & O_NONBLOCK, 0);
    const Outcome by_fionbio = outcome([&] { return ::recv(p.a, &c, 1, 0); });
    EXPECT_EQ(by_fionbio.result, -1);
    EXPECT_EQ(by_fionbio.error, EAGAIN);
    // MSG_DONTWAIT on a blocking socket: that call only.
    on = 0;
    ASSERT_EQ(::ioctl(p.a, FIONBIO, &on), 0);
    const Outcome by_flag = outcome([&] { return ::recv(p.a, &c, 1, MSG_DONTWAIT); });
    EXPECT_EQ(by_flag.result, -1);
    EXPECT_EQ(by_flag.error, EAGAIN);
  });
}

TEST_P(HooksTest, CloseFromAnotherGoroutineWakesAParkedRead) {
  run_with(GetParam(), [] {
    Pair p;
    goro::WaitGroup wg;
    wg.add(1);
    const int fd = p.a;
    goro::go([&] {
      goro::sleep(50ms);
      EXPECT_EQ(::close(fd), 0);
      wg.done();
    });
    char c;
    const auto t0 = Clock::now();
    const Outcome o = outcome([&] { return ::read(fd, &c, 1); });
    EXPECT_EQ(o.result, -1);
    EXPECT_EQ(o.error, EBADF);
    EXPECT_GE(ms_since(t0), 45);
    wg.wait();
    p.a = -1;
  });
}

TEST_P(HooksTest, ConnectAndAccept) {
  run_with(GetParam(), [] {
    sockaddr_in addr;
    const int lfd = listen_local(&addr);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      const int c = ::accept(lfd, nullptr, nullptr);  // parks: nobody has connected yet
      ASSERT_GE(c, 0);
      EXPECT_EQ(::write(c, "x", 1), 1);
      ::close(c);
      wg.done();
    });
    goro::sleep(20ms);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    char c = 0;
    EXPECT_EQ(::read(fd, &c, 1), 1);
    EXPECT_EQ(c, 'x');
    EXPECT_EQ(::read(fd, &c, 1), 0);
    ::close(fd);
    wg.wait();
    ::close(lfd);
    // The port is closed now: refused.
    const int refused = ::socket(AF_INET, SOCK_STREAM, 0);
    const Outcome o = outcome(
        [&] { return ::connect(refused, reinterpret_cast<sockaddr*>(&addr), sizeof addr); });
    EXPECT_EQ(o.result, -1);
    EXPECT_EQ(o.error, ECONNREFUSED);
    ::close(refused);
  });
}

TEST_P(HooksTest, PollOnOneAndOnSeveralDescriptors) {
  run_with(GetParam(), [] {
    Pair p1, p2, p3;
    // One descriptor: a timeout, then readiness another goroutine brings.
    pollfd one{p1.a, POLLIN, 0};
    auto t0 = Clock::now();
    EXPECT_EQ(::poll(&one, 1, 60), 0);
    EXPECT_GE(ms_since(t0), 59);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(30ms);
      EXPECT_EQ(::write(p1.b, "a", 1), 1);
      goro::sleep(30ms);
      EXPECT_EQ(::write(p3.b, "c", 1), 1);
      wg.done();
    });
    EXPECT_EQ(::poll(&one, 1, 5000), 1);
    EXPECT_NE(one.revents & POLLIN, 0);
    // Several: p1.a is ready already, so drain it first; then p3 becomes ready.
    char c;
    EXPECT_EQ(::read(p1.a, &c, 1), 1);
    pollfd several[3] = {{p1.a, POLLIN, 0}, {p2.a, POLLIN, 0}, {p3.a, POLLIN, 0}};
    t0 = Clock::now();
    EXPECT_EQ(::poll(several, 3, 5000), 1);
    EXPECT_EQ(several[0].revents, 0);
    EXPECT_EQ(several[1].revents, 0);
    EXPECT_NE(several[2].revents & POLLIN, 0);
    EXPECT_LT(ms_since(t0), 1000);
    wg.wait();
    // Several, timing out; and select on them.
    EXPECT_EQ(::read(p3.a, &c, 1), 1);
    t0 = Clock::now();
    EXPECT_EQ(::poll(several, 3, 50), 0);
    EXPECT_GE(ms_since(t0), 49);
    fd_set set;
    FD_ZERO(&set);
    FD_SET(p1.a, &set);
    FD_SET(p2.a, &set);
    timeval tv{0, 50'000};
    EXPECT_EQ(::select(std::max(p1.a, p2.a) + 1, &set, nullptr, nullptr, &tv), 0);
    EXPECT_EQ(::write(p2.b, "b", 1), 1);
    FD_SET(p1.a, &set);
    FD_SET(p2.a, &set);
    tv = {5, 0};
    EXPECT_EQ(::select(std::max(p1.a, p2.a) + 1, &set, nullptr, nullptr, &tv), 1);
    EXPECT_FALSE(FD_ISSET(p1.a, &set));
    EXPECT_TRUE(FD_ISSET(p2.a, &set));
  });
}

// Off a goroutine (before goro::run, on a thread of its own), everything is libc's,
// also for a socket a goroutine used, which the hooks made non-blocking underneath.
TEST(Hooks, OffAGoroutineCallsAreLibcs) {
  Pair p;
  const timeval tv{0, 50'000};
  ASSERT_EQ(::setsockopt(p.a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  char c;
  const Outcome o = outcome([&] { return ::read(p.a, &c, 1); });
  EXPECT_EQ(o.result, -1);
  EXPECT_EQ(o.error, EAGAIN);
  const timeval none{0, 0};
  ASSERT_EQ(::setsockopt(p.a, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none), 0);
  // A goroutine reads: the socket becomes non-blocking underneath.
  run_with(1, [&] {
    EXPECT_EQ(::write(p.b, "g", 1), 1);
    EXPECT_EQ(::read(p.a, &c, 1), 1);
  });
  EXPECT_EQ(::fcntl(p.a, F_GETFL) & O_NONBLOCK, 0);
  // Now a thread reads: it blocks until the write comes, as libc's read does.
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(::write(p.b, "t", 1), 1);
  });
  const auto t0 = Clock::now();
  EXPECT_EQ(::read(p.a, &c, 1), 1);
  EXPECT_EQ(c, 't');
  EXPECT_GE(ms_since(t0), 45);
  writer.join();
  const auto t1 = Clock::now();
  EXPECT_EQ(::usleep(20'000), 0);
  EXPECT_GE(ms_since(t1), 19);
}

// Name lookups run in goro::blocking: the results are libc's.
TEST(Hooks, NameLookupsOnAGoroutine) {
  run_with(1, [] {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    ASSERT_EQ(::getaddrinfo("localhost", "80", &hints, &list), 0);
    ASSERT_NE(list, nullptr);
    EXPECT_EQ(reinterpret_cast<sockaddr_in*>(list->ai_addr)->sin_port, htons(80));
    ::freeaddrinfo(list);
    char host[NI_MAXHOST];
    sockaddr_in loopback{};
    loopback.sin_family = AF_INET;
    loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::getnameinfo(reinterpret_cast<sockaddr*>(&loopback), sizeof loopback, host,
                            sizeof host, nullptr, 0, NI_NUMERICHOST),
              0);
    EXPECT_STREQ(host, "127.0.0.1");
  });
}

// A child forked from a goroutine has no runtime: its calls are libc's, and a socket
// the hooks made non-blocking underneath still blocks the child's thread.
TEST(Hooks, AForkedChildGetsLibcs) {
  run_with(2, [] {
    Pair p;
    char c;
    EXPECT_EQ(::write(p.b, "1", 1), 1);
    EXPECT_EQ(::read(p.a, &c, 1), 1);  // a goroutine's read: non-blocking underneath
    const pid_t child = ::fork();
    if (child == 0) {
      int failures = 0;
      if (::usleep(10'000) != 0) ++failures;
      // Blocks until the parent writes, 50 ms from now.
      if (::read(p.a, &c, 1) != 1 || c != '2') ++failures;
      if ((::fcntl(p.a, F_GETFL) & O_NONBLOCK) != 0) ++failures;
      ::_exit(failures);
    }
    ASSERT_GT(child, 0);
    goro::sleep(50ms);
    EXPECT_EQ(::write(p.b, "2", 1), 1);
    int status = -1;
    goro::blocking_long([&] { ::waitpid(child, &status, 0); });
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksTest, ::testing::Values(1, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "P" + std::to_string(info.param);
                         });

}  // namespace
