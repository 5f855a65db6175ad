// libgoro_hooks.so preloaded (LD_PRELOAD) into a program that did not link goro::hooks,
// only goro::hooks_preloadable: the hooks bind to the program's runtime and park its
// goroutines. tests/hooks/CMakeLists.txt runs this binary with LD_PRELOAD set.
#include <dlfcn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void run_at_one_p(const std::function<void()>& body) {
  goro::Config config;
  config.maxprocs = 1;
  goro::run(body, config);
}

TEST(HooksPreload, TheLibraryIsPreloaded) {
  ASSERT_NE(::dlsym(RTLD_DEFAULT, "goro_hooks_linked"), nullptr)
      << "run with LD_PRELOAD=<build>/hooks/libgoro_hooks.so";
}

TEST(HooksPreload, SleepsParkGoroutines) {
  run_at_one_p([] {
    std::atomic<int> ok{0};
    goro::WaitGroup wg;
    const auto t0 = Clock::now();
    for (int i = 0; i < 200; ++i) {
      wg.add(1);
      goro::go([&] {
        if (::usleep(100'000) == 0) ok.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    const double ms = ms_since(t0);
    std::printf("preloaded: 200 sleeps of 100 ms at 1 P: %.0f ms, %d threads\n", ms,
                goro::stats().threads);
    EXPECT_EQ(ok.load(), 200);
    EXPECT_LT(ms, 1000);
    EXPECT_LE(goro::stats().threads, 5);
  });
}

TEST(HooksPreload, ABlockingReadParksTheGoroutine) {
  run_at_one_p([] {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    std::atomic<bool> ran{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(20ms);
      ran.store(true);
      EXPECT_EQ(::write(fds[1], "x", 1), 1);
      wg.done();
    });
    char c;
    EXPECT_EQ(::read(fds[0], &c, 1), 1);
    EXPECT_TRUE(ran.load());
    wg.wait();
    ::close(fds[0]);
    ::close(fds[1]);
  });
}

}  // namespace
