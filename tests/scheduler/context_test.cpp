// goro::Context: cancellation and deadlines through the tree, done() in select, values,
// and the blocking calls that take a context (sleep, Mutex::lock, WaitGroup::wait)
// returning promptly when it is cancelled. Every test runs with 1, 2, 4 and 8 Ps.

#include <goro/scheduler/context.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro::context_errc;
using goro_test::seconds_since;
using goro_test::WithProcs;

class ContextTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(ContextTest);

const goro::ContextKey<std::string> user_key{"user"};
const goro::ContextKey<int> depth_key{"depth"};

TEST(ContextErrors, MessagesAreGos) {
  EXPECT_EQ(std::error_code(context_errc::canceled).message(), "context canceled");
  EXPECT_EQ(std::error_code(context_errc::deadline_exceeded).message(),
            "context deadline exceeded");
}

TEST(ContextBackground, IsNeverCancelledAndHasNothing) {
  goro::Context bg = goro::background();
  EXPECT_FALSE(bg.err());
  EXPECT_FALSE(bg.can_cancel());
  EXPECT_FALSE(bg.deadline().has_value());
  EXPECT_EQ(bg.value(user_key), nullptr);
}

TEST_P(ContextTest, CancelReachesChildrenAndGrandchildrenButNotTheParent) {
  run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    auto [child, cancel_child] = goro::with_cancel(parent);
    goro::Context valued = goro::with_value(child, user_key, "ana");
    auto [grandchild, cancel_grandchild] = goro::with_cancel(valued);

    cancel_child();
    EXPECT_FALSE(parent.err());
    EXPECT_EQ(child.err(), context_errc::canceled);
    EXPECT_EQ(valued.err(), context_errc::canceled);
    EXPECT_EQ(grandchild.err(), context_errc::canceled);

    cancel_parent();
    EXPECT_EQ(parent.err(), context_errc::canceled);
    cancel_parent();  // a second call does nothing
    EXPECT_EQ(parent.err(), context_errc::canceled);

    // A child of a cancelled context is born cancelled.
    auto [late, cancel_late] = goro::with_cancel(parent);
    EXPECT_EQ(late.err(), context_errc::canceled);
    (void)cancel_late;
    (void)cancel_grandchild;
  });
}

TEST_P(ContextTest, DoneWakesEveryGoroutineWaitingInSelect) {
  run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    constexpr int waiters = 50;
    std::atomic<int> woken{0};
    goro::WaitGroup wg;
    for (int i = 0; i < waiters; ++i) {
      wg.add(1);
      goro::go([&, ctx = ctx] {
        goro::Chan<int> never;
        if (goro::select(goro::recv_case(never), goro::recv_case(ctx.done())) == 1) ++woken;
        wg.done();
      });
    }
    goro::sleep(20ms);
    EXPECT_EQ(woken.load(), 0);
    const auto start = std::chrono::steady_clock::now();
    cancel();
    wg.wait();
    EXPECT_EQ(woken.load(), waiters);
    EXPECT_LT(seconds_since(start), 0.5);
    // done() of a cancelled context is already closed.
    EXPECT_EQ(goro::select(goro::recv_case(ctx.done()), goro::default_case), 0);
  });
}

TEST_P(ContextTest, DeadlineCancelsWithDeadlineExceededOnTime) {
  run([] {
    const auto start = std::chrono::steady_clock::now();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 60ms);
    ASSERT_TRUE(ctx.deadline().has_value());
    EXPECT_FALSE(ctx.err());
    goro::select(goro::recv_case(ctx.done()));
    const double took = seconds_since(start);
    EXPECT_EQ(ctx.err(), context_errc::deadline_exceeded);
    EXPECT_GE(took, 0.055);
    EXPECT_LT(took, 0.5);
    cancel();  // after the deadline: the error stays deadline_exceeded
    EXPECT_EQ(ctx.err(), context_errc::deadline_exceeded);
  });
}

TEST_P(ContextTest, TheEarlierDeadlineOfParentAndChildWins) {
  run([] {
    auto [parent, cancel_parent] = goro::with_timeout(goro::background(), 40ms);
    auto [child, cancel_child] = goro::with_timeout(parent, 10s);
    EXPECT_EQ(child.deadline(), parent.deadline());
    goro::select(goro::recv_case(child.done()));
    EXPECT_EQ(child.err(), context_errc::deadline_exceeded);

    auto [outer, cancel_outer] = goro::with_timeout(goro::background(), 10s);
    auto [inner, cancel_inner] = goro::with_timeout(outer, 30ms);
    EXPECT_LT(*inner.deadline(), *outer.deadline());
    goro::select(goro::recv_case(inner.done()));
    EXPECT_EQ(inner.err(), context_errc::deadline_exceeded);
    EXPECT_FALSE(outer.err());
    cancel_outer();
    (void)cancel_parent;
    (void)cancel_child;
    (void)cancel_inner;
  });
}

TEST_P(ContextTest, APastDeadlineIsExceededAtOnce) {
  run([] {
    auto [ctx, cancel] =
        goro::with_deadline(goro::background(), std::chrono::steady_clock::now() - 1s);
    EXPECT_EQ(ctx.err(), context_errc::deadline_exceeded);
    EXPECT_EQ(goro::select(goro::recv_case(ctx.done()), goro::default_case), 0);
    (void)cancel;
  });
}

TEST_P(ContextTest, ValuesAreFoundUpTheTreeNearestFirst) {
  run([] {
    goro::Context a = goro::with_value(goro::background(), user_key, std::string("ana"));
    auto [b, cancel] = goro::with_cancel(a);
    goro::Context c = goro::with_value(b, depth_key, 3);
    goro::Context d = goro::with_value(c, user_key, std::string("bob"));
    ASSERT_NE(c.value(user_key), nullptr);
    EXPECT_EQ(*c.value(user_key), "ana");
    EXPECT_EQ(*d.value(user_key), "bob");
    EXPECT_EQ(*d.value(depth_key), 3);
    EXPECT_EQ(a.value(depth_key), nullptr);
    cancel();
    EXPECT_EQ(d.err(), context_errc::canceled);  // values follow the parent's cancellation
  });
}

TEST_P(ContextTest, SleepReturnsAtCancelNotAtTheEnd) {
  run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::go([cancel = cancel] {
      goro::sleep(30ms);
      cancel();
    });
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(goro::sleep(10s, ctx), context_errc::canceled);
    EXPECT_LT(seconds_since(start), 1.0);
    EXPECT_EQ(goro::sleep(1ms, ctx), context_errc::canceled);  // at once when cancelled

    auto [short_ctx, c2] = goro::with_timeout(goro::background(), 10s);
    EXPECT_FALSE(goro::sleep(5ms, short_ctx));  // the full time: no error
    EXPECT_FALSE(goro::sleep(1ms, goro::background()));
    (void)c2;
  });
}

// A sleep's end and its context's cancel racing, thousands of times over: each sleep
// returns exactly once, with no error only after its full time, with the context's error
// only once the context is cancelled, and never later than shortly after either.
TEST_P(ContextTest, SleepRacingItsCancelReturnsOnceWithTheRightAnswer) {
  run([] {
    constexpr int kSleepers = 400;
    constexpr int kRounds = 10;
    std::atomic<int> full{0}, cut{0}, wrong{0}, late{0};
    for (int round = 0; round < kRounds; ++round) {
      goro::WaitGroup wg;
      wg.add(kSleepers);
      for (int i = 0; i < kSleepers; ++i) {
        // Deadline timers of 0-2 ms race the sleep of 1 ms; half are also cancelled by
        // hand at about the same time, from another goroutine.
        auto [ctx, cancel] = goro::with_timeout(goro::background(),
                                                std::chrono::microseconds(50 * (i % 40)));
        if (i % 2 == 0) {
          goro::go([cancel = cancel, i] {
            goro::sleep(std::chrono::microseconds(25 * (i % 80)));
            cancel();
          });
        }
        goro::go([&, ctx = ctx, cancel = cancel] {
          const auto start = std::chrono::steady_clock::now();
          const std::error_code ec = goro::sleep(1ms, ctx);
          const double took = seconds_since(start);
          if (!ec) {
            full.fetch_add(1);
            if (took < 0.001) wrong.fetch_add(1);
          } else {
            cut.fetch_add(1);
            if (ec != ctx.err()) wrong.fetch_add(1);
          }
          if (took > 1.0) late.fetch_add(1);
          cancel();
          wg.done();
        });
      }
      wg.wait();
    }
    EXPECT_EQ(full.load() + cut.load(), kSleepers * kRounds);
    EXPECT_GT(full.load(), 0);
    EXPECT_GT(cut.load(), 0);
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(late.load(), 0);
  });
}

TEST_P(ContextTest, MutexLockGivesUpWhenCancelledAndTheMutexStaysUsable) {
  run([] {
    goro::Mutex mu;
    mu.lock();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 30ms);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(mu.lock(ctx), context_errc::deadline_exceeded);
    EXPECT_LT(seconds_since(start), 1.0);
    // Another waiter still gets the mutex when it is unlocked.
    goro::Chan<int> got(1);
    goro::go([&] {
      mu.lock();
      got.send(1);
      mu.unlock();
    });
    goro::sleep(5ms);
    mu.unlock();
    EXPECT_EQ(got.recv(), 1);
    auto [ok_ctx, c2] = goro::with_cancel(goro::background());
    EXPECT_FALSE(mu.lock(ok_ctx));
    mu.unlock();
    EXPECT_TRUE(mu.try_lock());
    mu.unlock();
    (void)cancel;
    (void)c2;
  });
}

TEST_P(ContextTest, MutexStaysExclusiveWhileWaitersGiveUpUnderContention) {
  run([] {
    // Half the goroutines lock with short timeouts and give up often; the others must
    // all get through, and nobody may ever be inside twice.
    constexpr int workers = 16;
    const auto until = std::chrono::steady_clock::now() + 300ms;
    goro::Mutex mu;
    std::atomic<int> inside{0}, overlaps{0}, gave_up{0};
    long plain_counter = 0;
    std::atomic<long> entered{0};
    goro::WaitGroup wg;
    for (int w = 0; w < workers; ++w) {
      wg.add(1);
      goro::go([&, w] {
        int i = 0;
        while (std::chrono::steady_clock::now() < until) {
          if (w % 2 == 0) {
            auto [ctx, cancel] = goro::with_timeout(goro::background(), 50us);
            if (mu.lock(ctx)) {
              ++gave_up;
              continue;
            }
          } else {
            mu.lock();
          }
          if (inside.fetch_add(1) != 0) ++overlaps;
          ++plain_counter;
          ++entered;
          if (++i % 8 == 0) goro::yield();
          inside.fetch_sub(1);
          mu.unlock();
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(plain_counter, entered.load());
    mu.lock();  // still usable after all that
    mu.unlock();
  });
}

TEST_P(ContextTest, WaitGroupWaitGivesUpWhenCancelled) {
  run([] {
    goro::WaitGroup wg;
    wg.add(1);
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 20ms);
    EXPECT_EQ(wg.wait(ctx), context_errc::deadline_exceeded);
    // A plain waiter is still woken by the count reaching zero.
    goro::Chan<int> woke(1);
    goro::go([&] {
      wg.wait();
      woke.send(1);
    });
    goro::sleep(5ms);
    wg.done();
    EXPECT_EQ(woke.recv(), 1);
    auto [ok_ctx, c2] = goro::with_cancel(goro::background());
    EXPECT_FALSE(wg.wait(ok_ctx));  // count is zero: returns at once
    (void)cancel;
    (void)c2;
  });
}

TEST_P(ContextTest, CancelFromAPlainThreadWakesAGoroutine) {
  run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    std::thread canceller([cancel = cancel] {
      std::this_thread::sleep_for(20ms);
      cancel();
    });
    EXPECT_EQ(goro::sleep(10s, ctx), context_errc::canceled);
    canceller.join();
  });
}

TEST_P(ContextTest, ManyShortLivedContextsUnderALongLivedParentLeaveNothingBehind) {
  run([] {
    auto [root, cancel_root] = goro::with_cancel(goro::background());
    goro::WaitGroup wg;
    for (int g = 0; g < 8; ++g) {
      wg.add(1);
      goro::go([&wg, root = root] {
        for (int i = 0; i < 2000; ++i) {
          auto [ctx, cancel] = goro::with_timeout(root, 1h);
          if (i % 2 == 0) cancel();  // the rest just go out of scope
        }
        wg.done();
      });
    }
    wg.wait();
    // The children unlinked themselves: cancelling the root now reaches none of them
    // (a dangling one would crash or hang here under ASan).
    cancel_root();
    EXPECT_EQ(root.err(), context_errc::canceled);
  });
}

}  // namespace
