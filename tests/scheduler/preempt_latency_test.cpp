// How long a goroutine whose socket became ready waits while hogs (goroutines that
// never call the runtime) hold every P. Nothing else waits for those Ps: only sysmon,
// looking at the network for a P whose goroutine has run 2 ms, can see that the reader
// is ready, and then preempts a hog for it. A server's requests are such readers.

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "hog_util.hpp"
#include "netpoll_test_util.hpp"
#include "sync_test_util.hpp"

namespace {

using goro::detail::nanotime;
using goro_test::hog_cpu;
using goro_test::kMs;
using goro_test::Pipe;

#if defined(GORO_TSAN)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

class PreemptLatency : public goro_test::WithProcs {};
INSTANTIATE_TEST_SUITE_P(Procs, PreemptLatency, ::testing::Values(1, 2, 4),
                         goro_test::procs_name);

// Round after round, in a busy runtime, fresh hogs take every P; 1 ms later a byte
// arrives on a pipe a goroutine is parked on. That goroutine runs about 3 ms after the
// hog started (2 ms of its run, then sysmon's next tick); with Go's 10 ms rule and
// 10 ms poll it waited 10 to 20 ms.
TEST_P(PreemptLatency, ReadySocketWaitsMillisecondsBehindHogs) {
  if (kTsan) GTEST_SKIP() << "TSan delivers the preemption signal only at a libc call";
  constexpr int kRounds = 8;
  const int procs = GetParam();
  std::vector<double> waited_ms;
  run([&] {
    for (int round = 0; round < kRounds; ++round) {
      Pipe p;
      ASSERT_TRUE(p.open());
      std::atomic<int> hogging{0};
      std::atomic<std::int64_t> woken{0};
      goro::WaitGroup wg;
      wg.add(1 + procs);
      goro::go([&] {
        EXPECT_EQ(goro::detail::poll_wait(p.pd, goro::detail::IoMode::read),
                  goro::detail::PollStatus::ready);
        woken.store(nanotime());
        wg.done();
      });
      // Busy for 20 ms, as a loaded server's P is: sysmon, which backs off to a 10 ms
      // tick while the runtime idles, watches running Ps every 1 ms.
      const std::int64_t busy_until = nanotime() + 20 * kMs;
      while (nanotime() < busy_until) goro::yield();  // the reader parks meanwhile
      for (int i = 0; i < procs; ++i) {
        goro::go([&] {
          hogging.fetch_add(1);
          hog_cpu(60 * kMs);
          wg.done();
        });
      }
      std::int64_t written = 0;
      std::thread writer([&] {
        while (hogging.load() < procs) std::this_thread::sleep_for(std::chrono::microseconds(100));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        written = nanotime();
        p.write_byte();
      });
      wg.wait();  // no timer of ours: the reader is the only one who waits
      writer.join();
      waited_ms.push_back(static_cast<double>(woken.load() - written) / 1e6);
      p.close();
    }
  });
  ASSERT_EQ(waited_ms.size(), static_cast<std::size_t>(kRounds));
  std::vector<double> sorted = waited_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::printf("[figure] ready reader behind %d hog(s): waited median %.2f ms, worst %.2f ms\n",
              procs, median, sorted.back());
  // Loose (2 ms with 1 P, 3-5 ms with 4 Ps on 2 cores); the 10 ms rule gave 9-18 ms.
  // With more Ps than cores the reader, once its P is free, also waits for the kernel
  // to give its thread a core among the hogs' threads (several ms under a sanitizer on
  // a busy machine), which no runtime decides.
  const bool oversubscribed = procs > static_cast<int>(std::thread::hardware_concurrency());
  const double limit = oversubscribed ? 9.0 : 7.5;
  EXPECT_LE(median, limit) << "sysmon did not preempt a hog for the ready reader";
}

}  // namespace
