// net::FdWatch and net::wait_fd on descriptors goro did not open: socket pairs and
// pipes made with the plain system calls, as a C library makes its own. The C
// libraries themselves are driven in tests/clibs/.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <goro/net/wait_fd.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

// A non-blocking socket pair owned by the test: what a C library's connection looks
// like to goro.
struct Pair {
  int a = -1, b = -1;
  Pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0) {
      a = fds[0];
      b = fds[1];
    }
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
};

void put(int fd, const std::string& s) {
  ASSERT_EQ(::write(fd, s.data(), s.size()), ssize_t(s.size()));
}

// Reads what is there (until EAGAIN).
std::string drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// Fills fd's send buffer (and the peer's receive buffer) until a write would block.
void fill(int fd) {
  std::vector<char> junk(65536, 'x');
  while (::write(fd, junk.data(), junk.size()) > 0) {
  }
  ASSERT_EQ(errno, EAGAIN);
}

// Runs fn in a goroutine after delay; the destructor waits for it to end, so that the
// descriptors it uses (declared before it) are not closed under it.
class After {
 public:
  After(std::chrono::milliseconds delay, std::function<void()> fn) {
    done_.add(1);
    goro::go([this, delay, fn = std::move(fn)] {
      goro::sleep(delay);
      fn();
      done_.done();
    });
  }
  ~After() { done_.wait(); }
  After(const After&) = delete;
  After& operator=(const After&) = delete;

 private:
  goro::WaitGroup done_;
};

using FdWatchTest = ProcsTest;

TEST_P(FdWatchTest, ReadWaitParksTheGoroutineNotTheThread) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch) << watch.error().message();
    std::atomic<bool> woke{false};
    std::atomic<int> ticks{0};
    goro::WaitGroup wg;
    wg.add(2);
    goro::go([&] {
      // On one P, this only runs if the waiter parked instead of holding its thread.
      for (int i = 0; i < 10; ++i) {
        goro::sleep(2ms);
        ticks.fetch_add(1);
      }
      put(p.b, "ping");
      wg.done();
    });
    goro::go([&] {
      EXPECT_FALSE(watch->wait(Interest::read));
      woke = true;
      EXPECT_EQ(drain(p.a), "ping");
      wg.done();
    });
    wg.wait();
    EXPECT_TRUE(woke.load());
    EXPECT_EQ(ticks.load(), 10);
  });
}

TEST_P(FdWatchTest, LevelTriggeredReturnsAtOnceWhileDataWaits) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch);
    put(p.b, "a");
    // Data that came before the wait, and is still unread after it: a library that
    // reads once per readiness (libpq, hiredis) is never left waiting on it.
    for (int i = 0; i < 3; ++i) {
      const auto t0 = Clock::now();
      EXPECT_FALSE(watch->wait(Interest::read, deadline_after(2s)));
      EXPECT_LT(ms_since(t0), 500);
    }
    EXPECT_EQ(drain(p.a), "a");
    EXPECT_EQ(watch->wait(Interest::read, deadline_after(20ms)), errc::timeout);
  });
}

TEST_P(FdWatchTest, EdgeTriggeredNeedsTheCallerToDrainFirst) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a, Trigger::edge);
    ASSERT_TRUE(watch);
    put(p.b, "a");
    // The edge of "a" is kept for the first wait, consumed by it...
    EXPECT_FALSE(watch->wait(Interest::read, deadline_after(2s)));
    // ...so a second wait without reading to EAGAIN waits for the next edge.
    EXPECT_EQ(watch->wait(Interest::read, deadline_after(20ms)), errc::timeout);
    After push(10ms, [&] { put(p.b, "b"); });
    EXPECT_FALSE(watch->wait(Interest::read, deadline_after(2s)));
    EXPECT_EQ(drain(p.a), "ab");
  });
}

TEST_P(FdWatchTest, WriteWaitEndsWhenThePeerMakesRoom) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch);
    EXPECT_FALSE(watch->wait(Interest::write, deadline_after(2s)));  // room now
    fill(p.a);
    EXPECT_EQ(watch->wait(Interest::write, deadline_after(20ms)), errc::timeout);
    After room(10ms, [&] { drain(p.b); });
    EXPECT_FALSE(watch->wait(Interest::write, deadline_after(5s)));
  });
}

TEST_P(FdWatchTest, DeadlinesFireOnTime) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch);
    std::vector<double> samples;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      EXPECT_EQ(watch->wait(Interest::read, t0 + 30ms), errc::timeout);
      samples.push_back(ms_since(t0));
    }
    expect_on_time(samples, 30);
    // A deadline in the past fails at once, even with data waiting.
    put(p.b, "x");
    EXPECT_EQ(watch->wait(Interest::read, Clock::now() - 1ms), errc::timeout);
    EXPECT_FALSE(watch->wait(Interest::read));
  });
}

TEST_P(FdWatchTest, ContextCancellationWakesOnlyThatWait) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch);
    fill(p.a);
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::WaitGroup wg;
    wg.add(2);
    std::error_code read_result, write_result;
    std::atomic<bool> reader_done{false}, writer_done{false};
    goro::go([&, ctx = ctx] {
      read_result = watch->wait(Interest::read, ctx);
      reader_done = true;
      wg.done();
    });
    goro::go([&] {
      // The writer of the same descriptor waits on, until the peer makes room.
      write_result = watch->wait(Interest::write, deadline_after(5s));
      writer_done = true;
      wg.done();
    });
    goro::sleep(20ms);
    EXPECT_FALSE(reader_done.load());
    cancel();
    for (int i = 0; i < 1000 && !reader_done.load(); ++i) goro::sleep(1ms);
    EXPECT_TRUE(reader_done.load());
    goro::sleep(20ms);
    EXPECT_FALSE(writer_done.load());
    drain(p.b);
    wg.wait();
    EXPECT_EQ(read_result, goro::context_errc::canceled);
    EXPECT_FALSE(write_result) << write_result.message();
    // Already cancelled: at once, even when ready.
    put(p.b, "x");
    EXPECT_EQ(watch->wait(Interest::read, ctx), goro::context_errc::canceled);
    // A context's deadline.
    drain(p.a);
    auto [timed, stop] = goro::with_timeout(goro::background(), 30ms);
    const auto t0 = Clock::now();
    // The edge of the "x" may be reported once more, drained or not, whenever a poll
    // (any P polls between its work) took it: a wake-up may be spurious, as the header
    // says. A caller then finds nothing to read and waits again, as this does.
    std::error_code timed_result;
    int spurious = 0;
    while (!(timed_result = watch->wait(Interest::read, timed)) && spurious < 2) {
      char c;
      EXPECT_EQ(::read(p.a, &c, 1), -1) << "no data was sent after the drain";
      ++spurious;
    }
    EXPECT_LE(spurious, 1) << "the old edge is reported at most once";
    EXPECT_EQ(timed_result, goro::context_errc::deadline_exceeded);
    EXPECT_GE(ms_since(t0), 29);
    stop();
    // The watch is still good.
    put(p.b, "y");
    EXPECT_FALSE(watch->wait(Interest::read, goro::background()));
  });
}

TEST_P(FdWatchTest, ReleaseWakesParkedWaitersAndLeavesTheDescriptorOpen) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch);
    fill(p.a);
    goro::WaitGroup wg;
    std::array<std::error_code, 2> results;
    wg.add(2);
    goro::go([&] {
      results[0] = watch->wait(Interest::read);
      wg.done();
    });
    goro::go([&] {
      results[1] = watch->wait(Interest::write);
      wg.done();
    });
    goro::sleep(20ms);
    const auto t0 = Clock::now();
    EXPECT_EQ(watch->release(), p.a);
    wg.wait();
    EXPECT_LT(ms_since(t0), 500);
    EXPECT_EQ(results[0], errc::closed);
    EXPECT_EQ(results[1], errc::closed);
    EXPECT_EQ(watch->wait(Interest::read), errc::closed);
    EXPECT_EQ(watch->fd(), -1);
    EXPECT_EQ(watch->release(), -1);
    // Unregistered, still open: it can be watched again and used.
    auto again = FdWatch::open(p.a);
    ASSERT_TRUE(again) << again.error().message();
    put(p.b, "z");
    EXPECT_FALSE(again->wait(Interest::read, deadline_after(2s)));
    EXPECT_EQ(drain(p.a).back(), 'z');
  });
}

TEST_P(FdWatchTest, TwoWaitersOfOneDirectionAreBothServed) {
  run_with(GetParam(), [] {
    Pair p;
    auto watch = FdWatch::open(p.a);
    ASSERT_TRUE(watch);
    std::atomic<int> got{0};
    goro::WaitGroup wg;
    for (int i = 0; i < 2; ++i) {
      wg.add(1);
      goro::go([&] {
        // Each takes one byte; the one that finds none (the other took it) waits again.
        char c;
        while (::read(p.a, &c, 1) != 1) {
          if (watch->wait(Interest::read, deadline_after(5s))) break;
        }
        got.fetch_add(1);
        wg.done();
      });
    }
    goro::sleep(20ms);
    put(p.b, "x");
    goro::sleep(20ms);
    put(p.b, "y");
    wg.wait();
    EXPECT_EQ(got.load(), 2);
  });
}

TEST_P(FdWatchTest, ManyWaitersOnOneP) {
  // The claim of docs/hooks.md: waiting on a library's descriptor costs a goroutine,
  // not a thread.
  run_with(GetParam(), [] {
    constexpr int kPairs = 200;
    raise_fd_limit(4 * kPairs + 64);
    std::vector<std::unique_ptr<Pair>> pairs;
    for (int i = 0; i < kPairs; ++i) pairs.push_back(std::make_unique<Pair>());
    goro::WaitGroup wg;
    std::atomic<int> ok{0};
    const auto t0 = Clock::now();
    for (auto& pair : pairs) {
      wg.add(1);
      goro::go([&, fd = pair->a] {
        {
          auto watch = FdWatch::open(fd);
          if (watch && !watch->wait(Interest::read, deadline_after(10s)) && drain(fd) == "go") {
            ok.fetch_add(1);
          }
        }  // released before the descriptor may be closed
        wg.done();
      });
    }
    goro::sleep(100ms);
    for (auto& pair : pairs) put(pair->b, "go");
    wg.wait();
    EXPECT_EQ(ok.load(), kPairs);
    EXPECT_LT(ms_since(t0), 2000);
    EXPECT_LE(goro::stats().threads, goro::maxprocs() + 4);
  });
}

TEST_P(FdWatchTest, PipesToo) {
  run_with(GetParam(), [] {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    {
      auto watch = FdWatch::open(fds[0]);
      ASSERT_TRUE(watch);
      {
        After write(10ms, [w = fds[1]] { put(w, "p"); });
        EXPECT_FALSE(watch->wait(Interest::read, deadline_after(2s)));
      }
      EXPECT_EQ(drain(fds[0]), "p");
      ::close(fds[1]);
      // The writer went: the end of the stream is readiness too.
      EXPECT_FALSE(watch->wait(Interest::read, deadline_after(2s)));
    }
    ::close(fds[0]);
  });
}

TEST(FdWatch, OneWatchPerDescriptor) {
  run_with(2, [] {
    Pair p;
    auto first = FdWatch::open(p.a);
    ASSERT_TRUE(first);
    auto second = FdWatch::open(p.a);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error(), std::errc::file_exists);
    // wait_fd watches a duplicate, so it works beside the watch.
    put(p.b, "x");
    EXPECT_FALSE(wait_fd(p.a, Interest::read, deadline_after(2s)));

    // A socket goro owns is registered already.
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto conn = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(conn);
    auto own = FdWatch::open(conn->fd());
    ASSERT_FALSE(own);
    EXPECT_EQ(own.error(), std::errc::file_exists);
    EXPECT_FALSE(wait_fd(conn->fd(), Interest::write, deadline_after(2s)));
  });
}

TEST(FdWatch, RegularFilesAndMisuseFailClearly) {
  char path[] = "/tmp/goro-wait-fd-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::unlink(path);
  // Outside goro::run there is no netpoller to register with.
  auto outside = FdWatch::open(file);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error(), std::errc::operation_not_permitted);
  run_with(1, [file] {
    auto watch = FdWatch::open(file);
    ASSERT_FALSE(watch);
    EXPECT_EQ(watch.error(), std::errc::operation_not_permitted) << watch.error().message();
    // A regular file is always ready, as poll(2) says.
    EXPECT_FALSE(wait_fd(file, Interest::read, deadline_after(1s)));
    EXPECT_EQ(wait_fd(-1, Interest::read), std::errc::bad_file_descriptor);
    FdWatch none;
    EXPECT_EQ(none.wait(Interest::read), std::errc::bad_file_descriptor);
    EXPECT_EQ(none.release(), -1);
    // From a thread outside the runtime, a wait cannot park.
    Pair p;
    auto w = FdWatch::open(p.a);
    ASSERT_TRUE(w);
    std::error_code off;
    std::thread([&] { off = w->wait(Interest::read); }).join();
    EXPECT_EQ(off, std::errc::operation_not_permitted);
  });
  ::close(file);
}

TEST(FdWatch, LibraryClosedTheDescriptorAndReusedItsNumber) {
  run_with(2, [] {
    auto first = std::make_unique<Pair>();
    const int number = first->a;
    auto stale = FdWatch::open(number);
    ASSERT_TRUE(stale);
    // The library closes its socket behind the watch's back and opens another, which
    // gets the same (lowest free) number: epoll dropped the old registration.
    ::close(first->a);
    first->a = -1;
    Pair second;
    const int reused = second.a == number ? second.a : second.b;
    ASSERT_EQ(reused, number) << "the kernel hands out the lowest free number";
    const int peer = reused == second.a ? second.b : second.a;
    EXPECT_FALSE(stale->watches(number));
    auto fresh = FdWatch::open(number);
    ASSERT_TRUE(fresh) << fresh.error().message();
    EXPECT_TRUE(fresh->watches(number));
    // Forgetting the stale watch must not unregister the new socket's.
    EXPECT_EQ(stale->release(), number);
    {
      After write(10ms, [peer] { put(peer, "new"); });
      EXPECT_FALSE(fresh->wait(Interest::read, deadline_after(5s)));
    }
    EXPECT_EQ(drain(number), "new");
    // And the edge-triggered path, which asks the kernel nothing, sees it as well.
    fresh->release();
    auto edge = FdWatch::open(number, Trigger::edge);
    ASSERT_TRUE(edge);
    {
      After write(10ms, [peer] { put(peer, "again"); });
      EXPECT_FALSE(edge->wait(Interest::read, deadline_after(5s)));
    }
    EXPECT_EQ(drain(number), "again");
  });
}

// forget_closed(): the owner says the descriptor is closed, so the watch goes without
// looking at the number again (no fstat: under TSan, looking at a number another thread
// has just been given is a race on it); a waiter on it is woken, and the new file under
// the number keeps its own registration.
TEST(FdWatch, ForgetClosedLeavesTheNumbersNewFileAlone) {
  run_with(2, [] {
    auto first = std::make_unique<Pair>();
    const int number = first->a;
    auto stale = FdWatch::open(number);
    ASSERT_TRUE(stale);
    std::error_code woken;
    goro::WaitGroup waiter;
    waiter.add(1);
    goro::go([&, w = &*stale] {
      woken = w->wait(Interest::read, deadline_after(5s));
      waiter.done();
    });
    while (goro::stats().netpoll_waiters == 0) goro::sleep(1ms);
    ::close(first->a);
    first->a = -1;
    Pair second;
    const int reused = second.a == number ? second.a : second.b;
    ASSERT_EQ(reused, number) << "the kernel hands out the lowest free number";
    const int peer = reused == second.a ? second.b : second.a;
    auto fresh = FdWatch::open(number);
    ASSERT_TRUE(fresh) << fresh.error().message();
    stale->forget_closed();
    waiter.wait();
    EXPECT_EQ(woken, errc::closed);
    EXPECT_EQ(stale->fd(), -1);
    stale->forget_closed();  // once is enough; again does nothing
    {
      After write(10ms, [peer] { put(peer, "new"); });
      EXPECT_FALSE(fresh->wait(Interest::read, deadline_after(5s)));
    }
    EXPECT_EQ(drain(number), "new");
    FdWatch none;
    none.forget_closed();
  });
}

TEST(FdWatch, DestroyedOutsideTheRuntimeWhileAGoroutineWaits) {
  // The destructor on a plain thread cannot wait for the waiter to leave; the waiter,
  // woken with errc::closed, finishes the release and frees what is left.
  run_with(2, [] {
    Pair p;
    auto opened = FdWatch::open(p.a);
    ASSERT_TRUE(opened);
    auto watch = std::make_unique<FdWatch>(std::move(*opened));
    std::error_code result;
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&, w = watch.get()] {
      result = w->wait(Interest::read);
      wg.done();
    });
    while (goro::stats().netpoll_waiters == 0) goro::sleep(1ms);
    std::thread([&] { watch.reset(); }).join();
    wg.wait();
    EXPECT_EQ(result, errc::closed);
    EXPECT_TRUE(FdWatch::open(p.a)) << "still registered";
  });
}

TEST_P(FdWatchTest, WaitFdOnce) {
  run_with(GetParam(), [] {
    Pair p;
    // Ready now: no registration at all.
    EXPECT_FALSE(wait_fd(p.a, Interest::write, deadline_after(1s)));
    {
      After write(10ms, [b = p.b] { put(b, "1"); });
      const auto t0 = Clock::now();
      EXPECT_FALSE(wait_fd(p.a, Interest::read, deadline_after(5s)));
      EXPECT_GE(ms_since(t0), 5);
    }
    // Level-triggered by construction: unread data makes every call return at once.
    EXPECT_FALSE(wait_fd(p.a, Interest::read, deadline_after(1s)));
    EXPECT_EQ(drain(p.a), "1");
    EXPECT_EQ(wait_fd(p.a, Interest::read, deadline_after(20ms)), errc::timeout);
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::go([cancel = cancel] {
      goro::sleep(10ms);
      cancel();
    });
    EXPECT_EQ(wait_fd(p.a, Interest::read, ctx), goro::context_errc::canceled);
    // Every registration was undone: the descriptor can be watched.
    EXPECT_TRUE(FdWatch::open(p.a));
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, FdWatchTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::net::testing
