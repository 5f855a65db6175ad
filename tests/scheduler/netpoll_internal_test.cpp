// White-box checks on the runtime's internal interfaces (scheduler/src), with no
// runtime running: the netpoller's wake-up protocol (the test thread plays both the M
// blocked in the poller and the Ms that poll without blocking), and stack guards.

#include <goro/scheduler/detail/netpoll.hpp>

#include "netpoll.hpp"
#include "stack.hpp"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A break is for the M blocked in epoll_wait: a poll that does not block (find_runnable
// looking for network work, sysmon) must leave it there. It used to read it, and the
// blocked M, woken by the eventfd, found it empty and slept on past the timer it had
// been woken for.
TEST(NetpollInternal, OnlyABlockingPollTakesTheBreak) {
  using namespace goro::detail;
  ASSERT_FALSE(netpoll_inited()) << "a runtime is running";
  netpoll_init();
  int n = -1;
  netpoll_break();
  EXPECT_EQ(netpoll(0, &n), nullptr);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(netpoll(0, &n), nullptr);  // a second look leaves it too

  auto t0 = Clock::now();
  EXPECT_EQ(netpoll(2'000'000'000, &n), nullptr);  // returns at once for the break
  EXPECT_LT(ms_since(t0), 1000.0);

  // Taken now: the next blocking poll sleeps its full time, and a new break ends it.
  t0 = Clock::now();
  netpoll(50'000'000, &n);
  EXPECT_GE(ms_since(t0), 40.0);
  netpoll_break();
  t0 = Clock::now();
  netpoll(2'000'000'000, &n);
  EXPECT_LT(ms_since(t0), 1000.0);
  netpoll_shutdown();
}

// An event epoll returned for a descriptor that was closed before the poller looked at
// it must not reach the descriptor that reuses the PollDesc: here a hang-up, which would
// otherwise stay stuck to the new connection (every read of it would then pay for an
// extra recv), or a readiness that is not its own.
TEST(NetpollInternal, AnEventOfAClosedDescriptorDoesNotReachItsSuccessor) {
  using namespace goro::detail;
  ASSERT_FALSE(netpoll_inited()) << "a runtime is running";
  netpoll_init();
  int a[2], b[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b), 0);

  PollDesc* first = poll_open(a[0]);
  ASSERT_NE(first, nullptr);
  epoll_event late{};
  late.events = EPOLLIN | EPOLLRDHUP;
  late.data.u64 = poll_event_data(first);  // what epoll_wait had returned for a[0]
  poll_close(first);

  PollDesc* second = poll_open(b[0]);
  ASSERT_EQ(second, first) << "the free list should hand the same PollDesc back";
  int n = -1;
  EXPECT_EQ(netpoll_ready(&late, 1, false, &n), nullptr);
  EXPECT_EQ(n, 0);
  EXPECT_FALSE(poll_hangup_or_urgent_seen(second)) << "the closed descriptor's hang-up leaked";

  // The same event for the registration in force does count.
  struct epoll_event own = late;
  own.data.u64 = poll_event_data(second);
  EXPECT_EQ(netpoll_ready(&own, 1, false, &n), nullptr);  // nobody waits: nothing to run
  EXPECT_TRUE(poll_hangup_or_urgent_seen(second));

  poll_close(second);
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
  netpoll_shutdown();
}

// The PROT_NONE region below a guarded stack must be wider than a large frame: with a
// single page, a function with a 6 KB local array on a full stack stepped over it into
// the stack mapped below (another goroutine's), silently.
TEST(StackGuard, GuardRegionIsWiderThanLargeFrames) {
  using namespace goro::detail;
  Stack s = stack_alloc(64 * 1024, false);
  ASSERT_NE(s.map_base, nullptr);
  const auto lo = reinterpret_cast<std::uintptr_t>(s.lo);
  // The mapping that ends at lo, from /proc/self/maps: inaccessible, and 64 KiB or more.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool found = false;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    const std::uintptr_t start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const std::uintptr_t end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (end != lo) continue;
    found = true;
    EXPECT_EQ(perms.substr(0, 3), "---") << line;
    EXPECT_GE(end - start, 64u * 1024) << line;
  }
  EXPECT_TRUE(found) << "no guard mapping right below the stack";
  stack_free(s);
}

}  // namespace
