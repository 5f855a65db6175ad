// The network layer together with the scheduler: blocking calls on one P do not stall
// network round trips, and an idle server with many connections uses no CPU.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

// GORO_MAXPROCS=1: 32 goroutines each sit 500 ms in a real blocking system call
// (nanosleep, inside goro::blocking) while an echo client measures round trips on the
// same single P. The hand-off keeps the P running: p99 <= 5 ms (slack_ms()), and all 32
// calls end in < 1.5 s (they overlap on their own threads).
TEST(Runtime, BlockingCallsDoNotStallNetworkOnOneP) {
  run_with(1, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    auto c = dial("tcp", server.addr());
    ASSERT_TRUE(c);
    char buf[64] = {};
    ASSERT_TRUE(c->write(buf, sizeof buf));  // warm up
    ASSERT_TRUE(c->read_full(buf, sizeof buf));

    goro::WaitGroup blocked;
    std::atomic<int> finished{0};
    Clock::time_point last_done;
    goro::Mutex mu;
    auto t0 = Clock::now();
    for (int i = 0; i < 32; ++i) {
      blocked.add(1);
      goro::go([&] {
        goro::blocking([] {
          timespec ts{0, 500'000'000};
          while (nanosleep(&ts, &ts) != 0) {
          }
        });
        finished.fetch_add(1);
        {
          std::lock_guard lock(mu);
          last_done = Clock::now();
        }
        blocked.done();
      });
    }
    std::vector<double> rtts;
    while (finished.load() < 32 && ms_since(t0) < 3000) {
      auto s = Clock::now();
      ASSERT_TRUE(c->write(buf, sizeof buf));
      auto r = c->read_full(buf, sizeof buf);
      ASSERT_TRUE(r && *r == sizeof buf);
      rtts.push_back(ms_since(s));
      goro::sleep(1ms);
    }
    blocked.wait();
    double total_ms = std::chrono::duration<double, std::milli>(last_done - t0).count();
    ASSERT_GT(rtts.size(), 50u);
    std::sort(rtts.begin(), rtts.end());
    double p99 = rtts[rtts.size() * 99 / 100];
    std::printf(
        "[figure] echo beside 32 x blocking(500 ms) on 1 P: %zu round trips, p99 %.3f ms, "
        "max %.3f ms; the 32 calls done in %.0f ms\n",
        rtts.size(), p99, rtts.back(), total_ms);
    EXPECT_LE(p99, slack_ms()) << "round trips: " << rtts.size() << ", max " << rtts.back()
                               << " ms";
    EXPECT_LT(total_ms, 1500.0);
  });
}

// 1,000 idle connections (1,000 server goroutines parked in read) cost no CPU.
TEST(Runtime, IdleServerUsesNoCpu) {
  raise_fd_limit(8192);
  run_with(2, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    std::vector<Conn> clients;
    for (int i = 0; i < 1000; ++i) {
      auto c = dial("tcp", server.addr());
      ASSERT_TRUE(c) << c.error().message();
      clients.push_back(std::move(*c));
    }
    // One round trip on each so that every server goroutine exists and is parked.
    for (auto& c : clients) {
      char b = 'x';
      ASSERT_TRUE(c.write(&b, 1));
      ASSERT_TRUE(c.read(&b, 1));
    }
    goro::sleep(100ms);
    auto cpu0 = cpu_time();
    auto t0 = Clock::now();
    goro::sleep(1s);
    auto cpu = cpu_time() - cpu0;
    double wall_us = ms_since(t0) * 1000;
    double share = static_cast<double>(cpu.count()) / wall_us;
    std::printf("[figure] 1,000 idle connections (2 Ps): %.3f%% of a core over 1 s\n", share * 100);
    EXPECT_LT(share, 0.03) << "CPU " << cpu.count() << " us over " << wall_us << " us";
    for (auto& c : clients) c.close();
  });
}

}  // namespace
}  // namespace goro::net::testing
