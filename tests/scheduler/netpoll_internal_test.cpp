// White-box checks of the netpoller's wake-up protocol, on its internal interface
// (scheduler/src/proc.hpp), with no runtime running: the test thread plays both the
// M blocked in the poller and the Ms that poll without blocking.

#include "proc.hpp"

#include <gtest/gtest.h>

#include <chrono>

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

}  // namespace
