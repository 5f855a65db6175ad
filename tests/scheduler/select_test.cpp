// goro::select: ready cases, default, timeout, fairness, send/recv mixes, closed and
// nil channels, and races between channel wakers and the timeout, with 1..8 Ps.

#include <goro/scheduler/select.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::seconds_since;
using goro_test::WithProcs;

class SelectTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(SelectTest);

TEST_P(SelectTest, PicksTheReadyCase) {
  run([] {
    goro::Chan<int> empty;
    goro::Chan<std::string> full(1);
    full.send("x");
    std::optional<int> a;
    std::optional<std::string> b;
    EXPECT_EQ(goro::select(goro::recv_case(empty, a), goro::recv_case(full, b)), 1);
    EXPECT_EQ(b, "x");
    EXPECT_EQ(a, std::nullopt);

    goro::Chan<int> room(1);
    EXPECT_EQ(goro::select(goro::recv_case(empty, a), goro::send_case(room, 5)), 1);
    EXPECT_EQ(room.recv(), 5);
  });
}

TEST_P(SelectTest, DefaultRunsOnlyWhenNothingIsReady) {
  run([] {
    goro::Chan<int> ch(1);
    std::optional<int> v;
    EXPECT_EQ(goro::select(goro::recv_case(ch, v), goro::default_case), goro::select_default);
    EXPECT_EQ(goro::select(goro::default_case), goro::select_default);
    ch.send(3);
    EXPECT_EQ(goro::select(goro::default_case, goro::recv_case(ch, v)), 0);
    EXPECT_EQ(v, 3);
    // A full buffer: the send case is not ready.
    ch.send(4);
    EXPECT_EQ(goro::select(goro::send_case(ch, 5), goro::default_case), goro::select_default);
    EXPECT_EQ(ch.recv(), 4);
  });
}

TEST_P(SelectTest, TimeoutFiresWhenNothingArrives) {
  run([] {
    goro::Chan<int> never;
    std::optional<int> v;
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(goro::select(goro::recv_case(never, v), goro::timeout_case(50ms)),
              goro::select_timeout);
    const double elapsed = seconds_since(start);
    EXPECT_GE(elapsed, 0.050);
    EXPECT_LT(elapsed, 2.0);

    // Only a timeout, no channel cases: a sleep.
    start = std::chrono::steady_clock::now();
    EXPECT_EQ(goro::select(goro::timeout_case(20ms)), goro::select_timeout);
    EXPECT_GE(seconds_since(start), 0.020);

    // Zero and negative timeouts expire at once, but a ready case still wins the poll.
    EXPECT_EQ(goro::select(goro::recv_case(never, v), goro::timeout_case(0ns)),
              goro::select_timeout);
    EXPECT_EQ(goro::select(goro::recv_case(never, v), goro::timeout_case(-5ms)),
              goro::select_timeout);
    goro::Chan<int> ready(1);
    ready.send(1);
    EXPECT_EQ(goro::select(goro::recv_case(ready, v), goro::timeout_case(0ns)), 0);
  });
}

TEST_P(SelectTest, CaseThatBecomesReadyBeatsALongTimeout) {
  run([] {
    goro::Chan<int> ch;
    goro::go([ch]() mutable {
      goro::sleep(10ms);
      ch.send(9);
    });
    std::optional<int> v;
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(goro::select(goro::recv_case(ch, v), goro::timeout_case(10s)), 0);
    EXPECT_EQ(v, 9);
    EXPECT_LT(seconds_since(start), 5.0);
  });
}

TEST_P(SelectTest, ReadyCasesAreChosenFairly) {
  run([] {
    goro::Chan<int> a(1);
    goro::Chan<int> b(1);
    a.close();  // closed channels are always ready
    b.close();
    constexpr int rounds = 20000;
    int chose[2] = {0, 0};
    for (int i = 0; i < rounds; ++i) {
      const int fired = goro::select(goro::recv_case(a), goro::recv_case(b));
      ASSERT_TRUE(fired == 0 || fired == 1);
      ++chose[fired];
    }
    EXPECT_GT(chose[0], rounds * 4 / 10);
    EXPECT_GT(chose[1], rounds * 4 / 10);

    // Three buffered channels kept full by their producers.
    goro::Chan<int> c[3] = {goro::Chan<int>(4), goro::Chan<int>(4), goro::Chan<int>(4)};
    for (auto& ch : c)
      for (int i = 0; i < 4; ++i) ch.send(i);
    int counts[3] = {0, 0, 0};
    for (int i = 0; i < 9000; ++i) {
      const int fired =
          goro::select(goro::recv_case(c[0]), goro::recv_case(c[1]), goro::recv_case(c[2]));
      ++counts[fired];
      c[fired].send(0);
    }
    for (int k = 0; k < 3; ++k) EXPECT_GT(counts[k], 2400) << "case " << k;
  });
}

// Two goroutines that each offer to send and to receive at once; the nil channel turns
// a finished direction off, as in Go.
TEST_P(SelectTest, SendAndRecvCasesInOneSelect) {
  run([] {
    constexpr int n = 30000;
    goro::Chan<int> a;  // left -> right
    goro::Chan<int> b;  // right -> left
    auto side = [](goro::Chan<int> out, goro::Chan<int> in, std::vector<int>* got) {
      int sent = 0;
      while (sent < n || static_cast<int>(got->size()) < n) {
        auto out_or_nil = sent < n ? out : goro::Chan<int>::nil();
        auto in_or_nil = static_cast<int>(got->size()) < n ? in : goro::Chan<int>::nil();
        std::optional<int> v;
        switch (goro::select(goro::send_case(out_or_nil, sent), goro::recv_case(in_or_nil, v))) {
          case 0: ++sent; break;
          case 1: got->push_back(*v); break;
          default: ADD_FAILURE() << "impossible case"; return;
        }
      }
    };
    std::vector<int> left_got;
    std::vector<int> right_got;
    goro::WaitGroup wg;
    wg.add(2);
    goro::go([&] {
      side(a, b, &left_got);
      wg.done();
    });
    goro::go([&] {
      side(b, a, &right_got);
      wg.done();
    });
    wg.wait();
    ASSERT_EQ(left_got.size(), static_cast<std::size_t>(n));
    ASSERT_EQ(right_got.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(left_got[i], i);
      ASSERT_EQ(right_got[i], i);
    }
  });
}

TEST_P(SelectTest, ClosedChannelCaseFiresWithNothing) {
  run([] {
    goro::Chan<int> open;
    goro::Chan<int> closed;
    closed.close();
    std::optional<int> v = 1;
    EXPECT_EQ(goro::select(goro::recv_case(open), goro::recv_case(closed, v)), 1);
    EXPECT_EQ(v, std::nullopt);
    int value = 5;
    bool ok = true;
    EXPECT_EQ(goro::select(goro::recv_case(closed, value, ok)), 0);
    EXPECT_FALSE(ok);
    EXPECT_EQ(value, 0);

    goro::Chan<int> one(1);
    one.send(8);
    EXPECT_EQ(goro::select(goro::recv_case(one, value, ok)), 0);
    EXPECT_TRUE(ok);
    EXPECT_EQ(value, 8);
  });
}

TEST_P(SelectTest, ChosenSendOnClosedChannelThrows) {
  run([] {
    goro::Chan<int> closed;
    closed.close();
    goro::Chan<int> never;
    EXPECT_THROW(goro::select(goro::send_case(closed, 1), goro::recv_case(never)),
                 goro::ChanClosed);
    EXPECT_THROW(goro::select(goro::send_case(closed, 1), goro::default_case), goro::ChanClosed);

    // A select parked on a send is woken by the close and throws.
    goro::Chan<int> ch;
    goro::Chan<bool> threw(1);
    goro::go([ch, never, threw]() mutable {
      try {
        goro::select(goro::send_case(ch, 1), goro::recv_case(never));
        threw.send(false);
      } catch (const goro::ChanClosed&) {
        threw.send(true);
      }
    });
    goro::sleep(20ms);
    ch.close();
    EXPECT_EQ(threw.recv(), true);
  });
}

TEST_P(SelectTest, CloseWakesAParkedSelect) {
  run([] {
    goro::Chan<int> a;
    goro::Chan<int> b;
    goro::Chan<int> result(1);
    goro::go([a, b, result]() mutable {
      std::optional<int> va = 1;
      std::optional<int> vb = 1;
      const int fired = goro::select(goro::recv_case(a, va), goro::recv_case(b, vb));
      result.send(fired == 1 && !vb.has_value() ? 1 : -1);
    });
    goro::sleep(20ms);
    b.close();
    EXPECT_EQ(result.recv(), 1);
    // a still works: the select's stale waiter on it was removed.
    goro::go([a]() mutable { a.send(4); });
    EXPECT_EQ(a.recv(), 4);
  });
}

TEST_P(SelectTest, NilChannelCaseIsNeverReady) {
  run([] {
    auto nil = goro::Chan<int>::nil();
    std::optional<int> v;
    EXPECT_EQ(goro::select(goro::recv_case(nil, v), goro::send_case(nil, 1), goro::default_case),
              goro::select_default);
    EXPECT_EQ(goro::select(goro::recv_case(nil, v), goro::timeout_case(10ms)),
              goro::select_timeout);
  });
}

TEST_P(SelectTest, SameChannelInSeveralCases) {
  run([] {
    goro::Chan<int> ch;
    goro::go([ch]() mutable {
      for (int i = 0; i < 100; ++i) ch.send(i);
    });
    std::optional<int> x;
    std::optional<int> y;
    int sum = 0;
    for (int i = 0; i < 100; ++i) {
      x.reset();
      y.reset();
      const int fired = goro::select(goro::recv_case(ch, x), goro::recv_case(ch, y));
      sum += fired == 0 ? *x : *y;
    }
    EXPECT_EQ(sum, 4950);

    // A send and a receive on one channel: only another goroutine can complete it.
    goro::Chan<int> both;
    goro::go([both]() mutable { both.send(1); });
    std::optional<int> v;
    EXPECT_EQ(goro::select(goro::send_case(both, 2), goro::recv_case(both, v)), 1);
    EXPECT_EQ(v, 1);
  });
}

// Senders and receivers that both give up on short timeouts and retry: every value
// must arrive exactly once and in order, whichever of the channel or the timer wins.
TEST_P(SelectTest, TimeoutsRacingWithChannelOperationsLoseNothing) {
  run([] {
    constexpr int n = 20000;
    goro::Chan<int> ch;
    goro::go([ch]() mutable {
      for (int i = 0; i < n;) {
        if (goro::select(goro::send_case(ch, i), goro::timeout_case(20us)) == 0) ++i;
      }
    });
    int expected = 0;
    while (expected < n) {
      std::optional<int> v;
      if (goro::select(goro::recv_case(ch, v), goro::timeout_case(20us)) == 0) {
        EXPECT_EQ(v, expected);
        expected = *v + 1;
      }
    }
    EXPECT_EQ(expected, n);
    std::optional<int> extra;
    EXPECT_EQ(goro::select(goro::recv_case(ch, extra), goro::timeout_case(20ms)),
              goro::select_timeout)
        << "a value was delivered twice";
  });
}

TEST_P(SelectTest, ManySelectorsOverManyChannels) {
  run([] {
    constexpr int producers = 6;
    constexpr int consumers = 6;
    constexpr int per_producer = 30000;
    goro::Chan<int> c0;
    goro::Chan<int> c1(1);
    goro::Chan<int> c2(16);
    goro::Chan<int> quit;
    std::atomic<long> sum{0};
    std::atomic<int> count{0};
    goro::WaitGroup producing;
    goro::WaitGroup consuming;
    for (int p = 0; p < producers; ++p) {
      producing.add(1);
      goro::go([&, p] {
        for (int i = 0; i < per_producer; ++i) {
          const int v = p * per_producer + i;
          goro::select(goro::send_case(c0, v), goro::send_case(c1, v), goro::send_case(c2, v));
        }
        producing.done();
      });
    }
    for (int c = 0; c < consumers; ++c) {
      consuming.add(1);
      goro::go([&] {
        for (;;) {
          std::optional<int> v;
          const int fired = goro::select(goro::recv_case(c0, v), goro::recv_case(c1, v),
                                         goro::recv_case(c2, v), goro::recv_case(quit));
          if (fired == 3) break;
          sum.fetch_add(*v, std::memory_order_relaxed);
          count.fetch_add(1, std::memory_order_relaxed);
        }
        consuming.done();
      });
    }
    producing.wait();
    // Drain what is still buffered before telling the consumers to stop.
    while (c1.len() + c2.len() != 0) goro::sleep(1ms);
    quit.close();
    consuming.wait();
    const long n = producers * per_producer;
    EXPECT_EQ(count.load(), n);
    EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  });
}

TEST_P(SelectTest, EmptySelectParksForever) {
  run([] {
    std::atomic<bool> returned{false};
    goro::go([&] {
      goro::select();
      returned.store(true);
    });
    goro::sleep(30ms);
    EXPECT_FALSE(returned.load());
  });
}

}  // namespace
