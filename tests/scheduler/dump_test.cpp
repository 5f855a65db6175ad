// Goroutine dumps: states and wait reasons, stacks read from parked goroutines (with the
// test's own function names in them), creators, grouping of identical stacks, JSON,
// dumps taken while goroutines are being woken, and SIGQUIT.
#include <goro/scheduler/debug.hpp>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/cond.hpp>
#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

class Dump : public WithProcs {};
GORO_INSTANTIATE_PROCS(Dump);

// Named, not inlined: the dump must show them.
[[gnu::noinline]] void dump_test_wait_on_channel(goro::Chan<int> ch) {
  ch.recv();
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void dump_test_start_waiters(goro::Chan<int> ch, int n, goro::WaitGroup& wg) {
  for (int i = 0; i < n; ++i) {
    wg.add(1);
    goro::go([ch, &wg] {
      dump_test_wait_on_channel(ch);
      wg.done();
    });
  }
}

const goro::debug::Goroutine* find_state(const std::vector<goro::debug::Goroutine>& all,
                                         std::string_view state) {
  for (const auto& g : all)
    if (g.state.rfind(state, 0) == 0) return &g;
  return nullptr;
}

bool has_frame(const goro::debug::Goroutine& g, std::string_view function) {
  for (const auto& f : g.frames)
    if (f.find(function) != std::string::npos) return true;
  return false;
}

TEST_P(Dump, ShowsWhatEachGoroutineWaitsOnWithItsStackAndCreator) {
  run([] {
    goro::Chan<int> ch;
    goro::WaitGroup wg;
    dump_test_start_waiters(ch, 1, wg);
    goro::Mutex mu;
    mu.lock();
    wg.add(2);
    goro::go(goro::GoOptions{.name = "sleeper"}, [&] {
      goro::sleep(10s);
      wg.done();
    });
    goro::go([&] {
      mu.lock();
      mu.unlock();
      wg.done();
    });
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    goro::detail::PollDesc* pd = goro::detail::poll_open(fds[0]);
    ASSERT_NE(pd, nullptr);
    wg.add(1);
    goro::go([&] {
      goro::detail::poll_wait(pd, goro::detail::IoMode::read);
      wg.done();
    });
    goro::sleep(30ms);

    auto all = goro::debug::goroutines();
    const auto* recv = find_state(all, "chan receive");
    ASSERT_NE(recv, nullptr) << goro::debug::goroutine_dump();
#if defined(__x86_64__)
    EXPECT_TRUE(has_frame(*recv, "dump_test_wait_on_channel")) << goro::debug::goroutine_dump();
    EXPECT_NE(recv->created_by.find("dump_test_start_waiters"), std::string::npos)
        << recv->created_by;
#endif
    EXPECT_EQ(recv->parent_id, goro::goid());
    const auto* sleeper = find_state(all, "sleep");
    ASSERT_NE(sleeper, nullptr);
    EXPECT_EQ(sleeper->name, "sleeper");
    EXPECT_GE(sleeper->waiting_ns, 0);
    EXPECT_NE(find_state(all, "sync.Mutex.Lock"), nullptr) << goro::debug::goroutine_dump();
    const auto* io = find_state(all, "IO wait read fd " + std::to_string(fds[0]));
    EXPECT_NE(io, nullptr) << goro::debug::goroutine_dump();
    // The caller itself is running: shown, and said why there is no stack.
    bool self_seen = false;
    for (const auto& g : all) {
      if (g.id != goro::goid()) continue;
      self_seen = true;
      EXPECT_EQ(g.state, "running");
      EXPECT_TRUE(g.frames.empty());
      EXPECT_NE(g.stack_note.find("running"), std::string::npos);
    }
    EXPECT_TRUE(self_seen);

    std::string text = goro::debug::goroutine_dump(2);
    EXPECT_NE(text.find("goroutine " + std::to_string(sleeper->id) + " \"sleeper\" [sleep]:"),
              std::string::npos)
        << text;
    std::string json = goro::debug::goroutine_dump_json();
    EXPECT_EQ(json.rfind("{\"goroutines\":[{\"id\":", 0), 0u) << json.substr(0, 200);
    EXPECT_NE(json.find("\"state\":\"chan receive\""), std::string::npos);

    // Everything resumes normally after being dumped.
    ch.close();
    mu.unlock();
    const char b = 1;
    ASSERT_EQ(write(fds[1], &b, 1), 1);
    goro::detail::poll_evict(pd);
    // the sleeper stays: it is abandoned at the end of run, as Go's main abandons
    wg.done();
    wg.wait();
    goro::detail::poll_close(pd);
    close(fds[0]);
    close(fds[1]);
  });
}

// The other kinds of wait, each parked in a function of its own that the stack names.
[[gnu::noinline]] void dump_test_select(goro::Chan<int> a, goro::Chan<int> b) {
  goro::select(goro::recv_case(a), goro::recv_case(b));
  asm volatile("" ::: "memory");
}
[[gnu::noinline]] void dump_test_send(goro::Chan<int> ch) {
  ch.send(1);
  asm volatile("" ::: "memory");
}
[[gnu::noinline]] void dump_test_waitgroup(goro::WaitGroup& wg) {
  wg.wait();
  asm volatile("" ::: "memory");
}
[[gnu::noinline]] void dump_test_cond(goro::Mutex& mu, goro::Cond& cond, bool& go_on) {
  std::unique_lock lock(mu);
  while (!go_on) cond.wait(lock);
  asm volatile("" ::: "memory");
}

TEST_P(Dump, EveryKindOfWaitShowsItsStateAndItsFunction) {
  run([] {
    goro::Chan<int> a, b, unbuffered;
    goro::WaitGroup never_done, finished;
    never_done.add(1);
    goro::Mutex mu;
    goro::Cond cond;
    bool go_on = false;
    finished.add(4);
    goro::go([&] {
      dump_test_select(a, b);
      finished.done();
    });
    goro::go([&] {
      dump_test_send(unbuffered);
      finished.done();
    });
    goro::go([&] {
      dump_test_waitgroup(never_done);
      finished.done();
    });
    goro::go([&] {
      dump_test_cond(mu, cond, go_on);
      finished.done();
    });
    goro::sleep(30ms);
    auto all = goro::debug::goroutines();
    struct Want {
      const char* state;
      const char* function;
    };
    for (Want want : {Want{"select", "dump_test_select"}, Want{"chan send", "dump_test_send"},
                      Want{"sync.WaitGroup.Wait", "dump_test_waitgroup"},
                      Want{"sync.Cond.Wait", "dump_test_cond"}}) {
      const auto* g = find_state(all, want.state);
      ASSERT_NE(g, nullptr) << want.state << "\n" << goro::debug::goroutine_dump();
      EXPECT_GE(g->waiting_ns, 0);
#if defined(__x86_64__)
      EXPECT_TRUE(has_frame(*g, want.function)) << want.state << "\n"
                                                << goro::debug::goroutine_dump();
#endif
    }
    a.close();
    unbuffered.recv();
    never_done.done();
    {
      std::lock_guard lock(mu);
      go_on = true;
    }
    cond.broadcast();
    finished.wait();
  });
}

TEST_P(Dump, GroupsIdenticalStacksWithACount) {
  run([] {
    goro::Chan<int> ch;
    goro::WaitGroup wg;
    dump_test_start_waiters(ch, 1000, wg);
    goro::sleep(50ms);
    std::string grouped = goro::debug::goroutine_dump(1);
    EXPECT_NE(grouped.find("1000 [chan receive]:"), std::string::npos) << grouped.substr(0, 2000);
    EXPECT_LT(grouped.size(), 20'000u) << "1000 identical goroutines make one entry";
    ch.close();
    wg.wait();
  });
}

TEST(DumpWait, SaysHowLongAGoroutineHasWaited) {
  goro::run([] {
    goro::Chan<int> ch;
    goro::go([ch] { ch.recv(); });
    goro::sleep(1300ms);
    std::string text = goro::debug::goroutine_dump(2);
    EXPECT_NE(text.find("[chan receive, 1 s]"), std::string::npos) << text;
    ch.close();
  });
}

// Dumps while goroutines keep parking and being woken: a waker that meets a goroutine
// being read waits for the read; nothing is lost, nothing crashes.
TEST_P(Dump, DumpingWhileGoroutinesAreWokenLosesNothing) {
  run([] {
    constexpr int kPairs = 8;
    std::atomic<bool> stop{false};
    std::atomic<long> exchanged{0};
    goro::WaitGroup wg;
    for (int i = 0; i < kPairs; ++i) {
      goro::Chan<int> ping, pong;
      wg.add(2);
      goro::go([ping, pong, &stop, &wg, &exchanged] {
        while (!stop.load()) {
          ping.send(1);
          pong.recv();
          ++exchanged;
        }
        ping.close();
        wg.done();
      });
      goro::go([ping, pong, &wg] {
        while (ping.recv()) pong.send(1);
        wg.done();
      });
    }
    std::thread dumper([&] {
      const auto until = std::chrono::steady_clock::now() + 300ms;
      int dumps = 0;
      while (std::chrono::steady_clock::now() < until) {
        (void)goro::debug::goroutine_dump(2);
        ++dumps;
      }
      EXPECT_GT(dumps, 0);
    });
    dumper.join();
    const long before = exchanged.load();
    goro::sleep(20ms);
    EXPECT_GT(exchanged.load(), before) << "the goroutines still run after the dumps";
    stop = true;
    wg.wait();
  });
}

// A trace window while goroutines ping-pong: the JSON has their run slices, and the
// tracer is off again afterwards (a second window works the same).
TEST_P(Dump, TraceWindowRecordsWhatRanMeanwhile) {
  run([] {
    std::atomic<bool> stop{false};
    goro::Chan<int> ping, pong;
    goro::WaitGroup wg;
    wg.add(2);
    goro::go(goro::GoOptions{.name = "pinger"}, [&] {
      while (!stop.load()) {
        ping.send(1);
        pong.recv();
      }
      ping.close();
      wg.done();
    });
    goro::go([&] {
      while (ping.recv()) pong.send(1);
      wg.done();
    });
    for (int round = 0; round < 2; ++round) {
      // On a loaded machine the pair may not run a whole slice within one 50 ms window:
      // up to 10 windows, each well-formed, until one holds the pinger's slices.
      std::string json;
      for (int window = 0; window < 10; ++window) {
        json = goro::debug::trace_json(50ms);
        EXPECT_EQ(json.rfind("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", 0), 0u)
            << json.substr(0, 200);
        EXPECT_EQ(json.substr(json.size() - 4), "\n]}\n");
        if (json.find("\"ph\":\"X\"") != std::string::npos &&
            json.find(" pinger\"") != std::string::npos)
          break;
      }
      EXPECT_NE(json.find("\"ph\":\"X\""), std::string::npos) << "run slices";
      EXPECT_NE(json.find(" pinger\""), std::string::npos) << "the goroutine's name";
    }
    stop = true;
    wg.wait();
  });
}

TEST(DumpSigquit, PrintsTheDumpAndExitsWithCode2) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::Chan<int> ch;
          goro::go([ch] { dump_test_wait_on_channel(ch); });
          goro::sleep(20ms);
          kill(getpid(), SIGQUIT);
          goro::sleep(10s);
        });
      },
      ::testing::ExitedWithCode(2), "SIGQUIT: quit(.|\n)*goroutine [0-9]+ \\[chan receive\\]:");
}

}  // namespace
