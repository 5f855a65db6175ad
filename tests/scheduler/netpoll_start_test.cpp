// poll_start_on_read (detail/netpoll.hpp): a descriptor waited on with no goroutine.
// Readiness, an edge that came first, a deadline (ahead or past) and eviction each
// start exactly one goroutine; none runs before; an armed descriptor alone keeps the
// runtime polling (an idle M must block in epoll for it, not sleep on its note); a
// thousand armed descriptors hold no goroutine and all start. Run with 1, 2, 4, 8 Ps.

#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "netpoll_test_util.hpp"
#include "sync_test_util.hpp"
#include "watchdog_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro::detail::IoMode;
using goro::detail::nanotime;
using goro::detail::PollStatus;
using goro_test::kMs;
using goro_test::Pipe;
using goro_test::wait_until;
using goro_test::WithProcs;

// A pipe, and what the goroutine its read end starts saw: when it ran, on which
// goroutine, what a wait on the descriptor then said, and what it read.
struct Started {
  Pipe pipe_;
  Pipe* pipe = &pipe_;
  std::atomic<int> runs{0};
  std::atomic<std::int64_t> at{0};
  std::atomic<bool> on_goroutine{false};
  std::atomic<int> status{-1};  // a PollStatus from a wait after the start; -1: none made
  std::atomic<int> byte{-1};
  bool wait_after = false;      // read_byte, else poll_wait first (deadline, evict)

  static void start(void* self) {
    auto* s = static_cast<Started*>(self);
    s->on_goroutine.store(goro::detail::current_g() != nullptr);
    if (s->wait_after) {
      s->status.store(static_cast<int>(goro::detail::poll_wait(s->pipe->pd, IoMode::read)));
    } else {
      s->byte.store(s->pipe->read_byte());
    }
    s->at.store(nanotime());
    s->runs.fetch_add(1);
  }
  Started() = default;
  Started(const Started&) = delete;
  Started& operator=(const Started&) = delete;
  bool open() { return pipe->open(); }
  void arm() { goro::detail::poll_start_on_read(pipe->pd, &Started::start, this, 0, "start test"); }
};

class NetpollStart : public WithProcs {};
GORO_INSTANTIATE_PROCS(NetpollStart);

TEST_P(NetpollStart, ReadinessStartsOneGoroutine) {
  run([] {
    Started s;
    ASSERT_TRUE(s.open());
    Pipe& p = *s.pipe;
    const int before = goro::num_goroutine();
    s.arm();
    goro::sleep(30ms);
    EXPECT_EQ(s.runs.load(), 0) << "started with nothing to read";
    EXPECT_EQ(goro::num_goroutine(), before) << "an armed descriptor holds a goroutine";
    const std::int64_t written = nanotime();
    p.write_byte('a');
    EXPECT_TRUE(wait_until([&] { return s.runs.load() == 1; }, 2000ms));
    EXPECT_TRUE(s.on_goroutine.load());
    EXPECT_EQ(s.byte.load(), 'a');
    EXPECT_LT(s.at.load() - written, 50 * kMs);
    // One start per arm: more bytes start nothing more.
    p.write_byte('b');
    goro::sleep(20ms);
    EXPECT_EQ(s.runs.load(), 1);
    p.close();
  });
}

TEST_P(NetpollStart, EdgeBeforeTheArmIsNotLost) {
  run([] {
    Started s;
    ASSERT_TRUE(s.open());
    Pipe& p = *s.pipe;
    // A first wait takes the first byte's edge; the second byte's edge then arrives
    // with nobody waiting, kept in the descriptor's slot or still in epoll.
    p.write_byte('a');
    ASSERT_EQ(goro::detail::poll_wait(p.pd, IoMode::read), PollStatus::ready);
    ASSERT_EQ(p.read_byte(), 'a');
    p.write_byte('b');
    goro::sleep(20ms);  // the netpoller records the edge meanwhile, or on its next poll
    s.arm();
    EXPECT_TRUE(wait_until([&] { return s.runs.load() == 1; }, 2000ms))
        << "an edge that arrived before the arm was lost";
    EXPECT_EQ(s.byte.load(), 'b');
    p.close();
  });
}

TEST_P(NetpollStart, DeadlineStartsItOnTime) {
  run([] {
    Started s;
    ASSERT_TRUE(s.open());
    Pipe& p = *s.pipe;
    s.wait_after = true;
    const std::int64_t t0 = nanotime();
    goro::detail::poll_set_deadline(p.pd, t0 + 40 * kMs, IoMode::read);
    s.arm();
    EXPECT_TRUE(wait_until([&] { return s.runs.load() == 1; }, 2000ms));
    EXPECT_EQ(s.status.load(), static_cast<int>(PollStatus::timeout));
    EXPECT_GE(s.at.load() - t0, 40 * kMs);
    EXPECT_LT(s.at.load() - t0, 140 * kMs);
    p.close();
  });
}

TEST_P(NetpollStart, PastDeadlineOrEvictedStartsAtOnce) {
  run([] {
    Started sa, sb;
    ASSERT_TRUE(sa.open());
    ASSERT_TRUE(sb.open());
    Pipe& a = *sa.pipe;
    Pipe& b = *sb.pipe;
    sa.wait_after = sb.wait_after = true;
    goro::detail::poll_set_deadline(a.pd, nanotime() - 1, IoMode::read);
    sa.arm();
    goro::detail::poll_evict(b.pd);
    sb.arm();
    EXPECT_TRUE(wait_until([&] { return sa.runs.load() == 1 && sb.runs.load() == 1; }, 2000ms));
    EXPECT_EQ(sa.status.load(), static_cast<int>(PollStatus::timeout));
    EXPECT_EQ(sb.status.load(), static_cast<int>(PollStatus::closed));
    a.close();
    b.close();
  });
}

TEST_P(NetpollStart, EvictOfAnArmedDescriptorStartsIt) {
  run([] {
    Started s;
    ASSERT_TRUE(s.open());
    Pipe& p = *s.pipe;
    s.wait_after = true;
    s.arm();
    goro::sleep(10ms);
    EXPECT_EQ(s.runs.load(), 0);
    const std::int64_t t0 = nanotime();
    goro::detail::poll_evict(p.pd);
    EXPECT_TRUE(wait_until([&] { return s.runs.load() == 1; }, 2000ms));
    EXPECT_EQ(s.status.load(), static_cast<int>(PollStatus::closed));
    EXPECT_LT(s.at.load() - t0, 50 * kMs);
    p.close();
  });
}

// With every goroutine parked without a timer, the armed descriptor is all there is to
// wait for: an M must block in epoll for it. Were an armed descriptor not counted as a
// waiter, every M would sleep on its note and the byte written by a plain thread would
// start nothing.
TEST_P(NetpollStart, ArmedDescriptorAloneKeepsTheRuntimePolling) {
  run([] {
    Pipe p;
    ASSERT_TRUE(p.open());
    goro::WaitGroup wg;
    wg.add(1);
    struct Ctx {
      Pipe* pipe;
      goro::WaitGroup* wg;
      std::atomic<int> byte{-1};
    } ctx{&p, &wg};
    goro::detail::poll_start_on_read(
        p.pd,
        [](void* arg) {
          auto* c = static_cast<Ctx*>(arg);
          c->byte.store(c->pipe->read_byte());
          c->wg->done();
        },
        &ctx, 0, "start test");
    std::thread writer([&] {
      std::this_thread::sleep_for(100ms);
      p.write_byte('z');
    });
    wg.wait();  // parks with no timer anywhere
    writer.join();
    EXPECT_EQ(ctx.byte.load(), 'z');
    p.close();
  });
}

TEST_P(NetpollStart, ThousandArmedHoldNoGoroutineAndAllStart) {
  static constexpr int kPipes = 1000;
  if (std::string why = goro_test::raise_descriptor_limit(2 * kPipes + 64); !why.empty())
    GTEST_SKIP() << why;
  run([] {
    std::vector<Started> started(kPipes);
    for (Started& s : started) ASSERT_TRUE(s.open());
    const int before = goro::num_goroutine();
    for (Started& s : started) s.arm();
    goro::sleep(20ms);
    EXPECT_EQ(goro::num_goroutine(), before);
    EXPECT_EQ(goro::stats().netpoll_waiters, 0) << "armed descriptors counted as parked goroutines";
    for (int i = 0; i < kPipes; ++i) started[i].pipe->write_byte(static_cast<char>('a' + i % 26));
    auto all = [&] {
      for (const Started& s : started)
        if (s.runs.load() != 1) return false;
      return true;
    };
    EXPECT_TRUE(wait_until(all, 10'000ms));
    int good = 0;
    for (int i = 0; i < kPipes; ++i)
      good += started[i].byte.load() == static_cast<char>('a' + i % 26) ? 1 : 0;
    EXPECT_EQ(good, kPipes);
    for (Started& s : started) s.pipe->close();
  });
}

}  // namespace
