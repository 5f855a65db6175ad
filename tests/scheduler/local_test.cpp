// goro::local: each goroutine sees its own value across parks and thread changes, made on
// first use and destroyed when the goroutine returns; off a goroutine, the thread's.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/local.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

goro::local<std::string> name_of_goroutine;
goro::local<int> counter(100);

// Counts the values alive, and when one dies, which goroutine's it was.
std::atomic<int> alive{0};
struct Tracked {
  Tracked() { alive.fetch_add(1); }
  ~Tracked() { alive.fetch_sub(1); }
  int owner = 0;
};
goro::local<Tracked> tracked;

class Local : public WithProcs {};
INSTANTIATE_TEST_SUITE_P(Procs, Local, ::testing::Values(1, 2, 4, 8), goro_test::procs_name);

// 200 goroutines in pairs, each writing its own value, then passing a token back and
// forth with its partner (a goroutine readied by another runs on the readier's P, so on
// several Ps they change threads) and reading its value back after every exchange: none
// sees another's.
TEST_P(Local, EachGoroutineKeepsItsOwnValueAcrossParks) {
  std::atomic<int> wrong{0}, moved{0};
  // Whether a goroutine changes threads is up to the scheduler (and the machine's load):
  // run again, a bounded number of times, until one did, so the check means something.
  auto run_once = [&] {
    goro::run(
        [&] {
          goro::WaitGroup wg;
          for (int pair = 0; pair < 100; ++pair) {
            goro::Chan<int> ping, pong;
            for (int side = 0; side < 2; ++side) {
              const int i = pair * 2 + side;
              wg.add(1);
              goro::go([i, side, ping, pong, &wg, &wrong, &moved] {
                EXPECT_FALSE(name_of_goroutine.has_value());
                name_of_goroutine.get() = "g" + std::to_string(i);
                EXPECT_EQ(counter.get(), 100) << "made from the initial value";
                counter.get() += i;
                // gettid, not std::this_thread::get_id(): pthread_self is declared const,
                // so a compiler may read it once per function, on whatever thread that was.
                const long first_thread = syscall(SYS_gettid);
                for (int round = 0; round < 20; ++round) {
                  if (side == 0) {
                    ping.send(round);
                    pong.recv();
                  } else {
                    ping.recv();
                    pong.send(round);
                  }
                  if (round % 5 == 0) goro::sleep(50us);
                  if (syscall(SYS_gettid) != first_thread) moved.fetch_add(1);
                  if (*name_of_goroutine != "g" + std::to_string(i) || counter.get() != 100 + i)
                    wrong.fetch_add(1);
                }
                wg.done();
              });
            }
          }
          wg.wait();
        },
        goro::Config{.maxprocs = GetParam()});
  };
  run_once();
  for (int attempt = 1; attempt < 50 && GetParam() > 1 && moved.load() == 0; ++attempt) run_once();
  EXPECT_EQ(wrong.load(), 0);
  if (GetParam() > 1) {
    EXPECT_GT(moved.load(), 0) << "no goroutine changed threads: nothing tested";
  }
}

// A goroutine's values are destroyed when it returns, before anyone waiting on it goes on;
// a goroutine that never asks makes none.
TEST_P(Local, ValuesDieWithTheirGoroutine) {
  goro::run(
      [&] {
        const int before = alive.load();
        goro::Chan<int> started(64), finish;
        goro::WaitGroup wg;
        for (int i = 0; i < 50; ++i) {
          wg.add(1);
          goro::go([i, started, finish, &wg] {
            if (i % 2 == 0) tracked->owner = i;
            started.send(i);
            finish.recv();
            wg.done();
          });
        }
        for (int i = 0; i < 50; ++i) started.recv();
        EXPECT_EQ(alive.load(), before + 25);
        finish.close();
        wg.wait();
        // wg.done() ran before each goroutine returned: wait for the last to finish.
        for (int i = 0; i < 1000 && alive.load() != before; ++i) goro::sleep(1ms);
        EXPECT_EQ(alive.load(), before);
      },
      goro::Config{.maxprocs = GetParam()});
}

// Off a goroutine, get() is the calling thread's: two threads do not share it.
TEST(LocalOffGoroutine, PlainThreadsHaveTheirOwn) {
  std::string seen_a, seen_b;
  std::thread a([&] {
    name_of_goroutine.get() = "a";
    std::this_thread::sleep_for(20ms);
    seen_a = name_of_goroutine.get();
  });
  std::thread b([&] {
    name_of_goroutine.get() = "b";
    std::this_thread::sleep_for(20ms);
    seen_b = name_of_goroutine.get();
  });
  a.join();
  b.join();
  EXPECT_EQ(seen_a, "a");
  EXPECT_EQ(seen_b, "b");
}

}  // namespace
