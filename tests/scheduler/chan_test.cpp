// goro::Chan: rendezvous, buffering, FIFO order, close, non-blocking operations, range
// iteration and a many-to-many stress, each with 1, 2, 4 and 8 Ps.

#include <goro/scheduler/chan.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

class ChanTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(ChanTest);

TEST_P(ChanTest, UnbufferedSendWaitsForReceiver) {
  run([] {
    goro::Chan<int> ch;
    EXPECT_EQ(ch.cap(), 0u);
    std::atomic<bool> sent{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      ch.send(7);
      sent.store(true);
      wg.done();
    });
    goro::sleep(30ms);
    EXPECT_FALSE(sent.load()) << "an unbuffered send returned with no receiver";
    EXPECT_EQ(ch.len(), 0u);
    EXPECT_EQ(ch.recv(), 7);
    wg.wait();
    EXPECT_TRUE(sent.load());
  });
}

TEST_P(ChanTest, UnbufferedRecvWaitsForSender) {
  run([] {
    goro::Chan<std::string> ch;
    std::atomic<bool> received{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      EXPECT_EQ(ch.recv(), "hello");
      received.store(true);
      wg.done();
    });
    goro::sleep(30ms);
    EXPECT_FALSE(received.load());
    ch.send("hello");
    wg.wait();
    EXPECT_TRUE(received.load());
  });
}

TEST_P(ChanTest, UnbufferedKeepsOrder) {
  run([] {
    constexpr int n = 200000;
    goro::Chan<int> ch;
    goro::go([ch]() mutable {
      for (int i = 0; i < n; ++i) ch.send(i);
      ch.close();
    });
    int expected = 0;
    for (int v : ch) {
      ASSERT_EQ(v, expected);
      ++expected;
    }
    EXPECT_EQ(expected, n);
  });
}

TEST_P(ChanTest, BufferedIsFifoAndBlocksOnlyWhenFull) {
  run([] {
    goro::Chan<int> ch(8);
    EXPECT_EQ(ch.cap(), 8u);
    for (int i = 0; i < 8; ++i) EXPECT_TRUE(ch.try_send(i)) << i;
    EXPECT_FALSE(ch.try_send(8)) << "send into a full buffer";
    EXPECT_EQ(ch.len(), 8u);

    std::atomic<bool> ninth_sent{false};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      ch.send(8);  // parks: the buffer is full
      ninth_sent.store(true);
      wg.done();
    });
    goro::sleep(30ms);
    EXPECT_FALSE(ninth_sent.load());
    for (int i = 0; i <= 8; ++i) EXPECT_EQ(ch.recv(), i);
    wg.wait();
    EXPECT_TRUE(ninth_sent.load());
    EXPECT_EQ(ch.len(), 0u);
  });
}

TEST_P(ChanTest, BlockedReceiversAreServedInArrivalOrder) {
  run([] {
    constexpr int n = 5;
    goro::Chan<int> ch;
    std::vector<int> got(n, -1);
    std::atomic<int> started{0};
    goro::WaitGroup wg;
    for (int k = 0; k < n; ++k) {
      wg.add(1);
      goro::go([&, k] {
        started.store(k + 1);
        got[k] = *ch.recv();
        wg.done();
      });
      // Let receiver k park before k + 1 starts: wait until it runs, then a while more.
      while (started.load() != k + 1) goro::sleep(1ms);
      goro::sleep(10ms);
    }
    for (int k = 0; k < n; ++k) ch.send(k);
    wg.wait();
    for (int k = 0; k < n; ++k) EXPECT_EQ(got[k], k);
  });
}

TEST_P(ChanTest, RecvDrainsClosedChannelThenGetsNothing) {
  run([] {
    goro::Chan<int> ch(4);
    ch.send(1);
    ch.send(2);
    ch.send(3);
    ch.close();
    EXPECT_EQ(ch.len(), 3u);
    EXPECT_EQ(ch.recv(), 1);
    EXPECT_EQ(ch.recv2(), std::make_pair(2, true));
    EXPECT_EQ(ch.try_recv(), 3);
    EXPECT_EQ(ch.recv(), std::nullopt);
    EXPECT_EQ(ch.recv2(), std::make_pair(0, false));
    EXPECT_EQ(ch.try_recv(), std::nullopt);
    EXPECT_EQ(ch.recv(), std::nullopt) << "a closed channel stays ready";
  });
}

TEST_P(ChanTest, SendAndCloseOnClosedChannelThrow) {
  run([] {
    goro::Chan<int> ch(1);
    ch.close();
    EXPECT_THROW(ch.send(1), goro::ChanClosed);
    EXPECT_THROW(ch.try_send(1), goro::ChanClosed);
    EXPECT_THROW(ch.close(), goro::ChanClosed);
    try {
      ch.send(1);
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "send on closed channel");
    }
    EXPECT_THROW(goro::Chan<int>::nil().close(), goro::ChanClosed);
  });
}

TEST_P(ChanTest, CloseWakesEveryBlockedReceiver) {
  run([] {
    constexpr int n = 16;
    goro::Chan<int> ch;
    std::atomic<int> got_nothing{0};
    goro::WaitGroup wg;
    for (int i = 0; i < n; ++i) {
      wg.add(1);
      goro::go([&] {
        if (!ch.recv().has_value()) got_nothing.fetch_add(1);
        wg.done();
      });
    }
    goro::sleep(30ms);
    ch.close();
    wg.wait();
    EXPECT_EQ(got_nothing.load(), n);
  });
}

TEST_P(ChanTest, CloseMakesEveryBlockedSenderThrow) {
  run([] {
    constexpr int n = 16;
    goro::Chan<int> ch(2);
    ch.send(-1);
    ch.send(-2);
    std::atomic<int> threw{0};
    goro::WaitGroup wg;
    for (int i = 0; i < n; ++i) {
      wg.add(1);
      goro::go([&, i] {
        try {
          ch.send(i);
        } catch (const goro::ChanClosed&) {
          threw.fetch_add(1);
        }
        wg.done();
      });
    }
    goro::sleep(30ms);
    ch.close();
    wg.wait();
    EXPECT_EQ(threw.load(), n);
    // What was buffered before the close is still delivered.
    EXPECT_EQ(ch.recv(), -1);
    EXPECT_EQ(ch.recv(), -2);
    EXPECT_EQ(ch.recv(), std::nullopt);
  });
}

TEST_P(ChanTest, TryOperationsNeverBlock) {
  run([] {
    goro::Chan<int> ch;
    EXPECT_FALSE(ch.try_send(1)) << "no receiver is waiting";
    EXPECT_EQ(ch.try_recv(), std::nullopt) << "no sender is waiting";

    // A parked receiver makes try_send succeed.
    goro::Chan<int> got(1);
    goro::go([ch, got]() mutable { got.send(*ch.recv()); });
    auto start = std::chrono::steady_clock::now();
    while (!ch.try_send(42)) {
      ASSERT_LT(goro_test::seconds_since(start), 5.0);
      goro::sleep(1ms);
    }
    EXPECT_EQ(got.recv(), 42);

    // A parked sender makes try_recv succeed.
    goro::go([ch]() mutable { ch.send(43); });
    std::optional<int> v;
    start = std::chrono::steady_clock::now();
    while (!(v = ch.try_recv())) {
      ASSERT_LT(goro_test::seconds_since(start), 5.0);
      goro::sleep(1ms);
    }
    EXPECT_EQ(v, 43);
  });
}

TEST_P(ChanTest, RangeForReceivesUntilClosed) {
  run([] {
    goro::Chan<int> ch(3);
    goro::go([ch]() mutable {
      for (int i = 1; i <= 100; ++i) ch.send(i);
      ch.close();
    });
    int sum = 0;
    int count = 0;
    for (int v : ch) {
      sum += v;
      ++count;
    }
    EXPECT_EQ(count, 100);
    EXPECT_EQ(sum, 5050);
  });
}

TEST_P(ChanTest, MoveOnlyValues) {
  run([] {
    goro::Chan<std::unique_ptr<int>> ch;
    auto p = std::make_unique<int>(5);
    EXPECT_FALSE(ch.try_send(std::move(p)));
    ASSERT_NE(p, nullptr) << "a failed try_send must not consume the value";
    goro::go([ch, p = std::move(p)]() mutable { ch.send(std::move(p)); });
    auto got = ch.recv();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(**got, 5);
  });
}

TEST_P(ChanTest, BufferedValuesAreDestroyedWithTheChannel) {
  run([] {
    auto token = std::make_shared<int>(0);
    {
      goro::Chan<std::shared_ptr<int>> ch(4);
      ch.send(token);
      ch.send(token);
      ch.recv();
      EXPECT_EQ(token.use_count(), 2);
    }
    EXPECT_EQ(token.use_count(), 1);
  });
}

TEST_P(ChanTest, NilChannel) {
  run([] {
    auto nil = goro::Chan<int>::nil();
    EXPECT_FALSE(nil.try_send(1));
    EXPECT_EQ(nil.try_recv(), std::nullopt);
    EXPECT_EQ(nil.len(), 0u);
    EXPECT_EQ(nil.cap(), 0u);
    EXPECT_TRUE(nil == goro::Chan<int>::nil());
    goro::Chan<int> a;
    goro::Chan<int> b = a;
    EXPECT_TRUE(a == b);
    EXPECT_FALSE(a == goro::Chan<int>());
  });
}

TEST_P(ChanTest, ManyProducersManyConsumers) {
  for (std::size_t capacity : {std::size_t{0}, std::size_t{1}, std::size_t{64}}) {
    run([capacity] {
      constexpr int producers = 8;
      constexpr int consumers = 8;
      constexpr int per_producer = 40000;
      goro::Chan<int> ch(capacity);
      std::vector<std::atomic<int>> seen(producers * per_producer);
      std::atomic<long> sum{0};
      goro::WaitGroup producing;
      goro::WaitGroup consuming;
      for (int p = 0; p < producers; ++p) {
        producing.add(1);
        goro::go([&, p] {
          for (int i = 0; i < per_producer; ++i) ch.send(p * per_producer + i);
          producing.done();
        });
      }
      for (int c = 0; c < consumers; ++c) {
        consuming.add(1);
        goro::go([&] {
          for (int v : ch) {
            seen[v].fetch_add(1, std::memory_order_relaxed);
            sum.fetch_add(v, std::memory_order_relaxed);
          }
          consuming.done();
        });
      }
      producing.wait();
      ch.close();
      consuming.wait();
      const long n = producers * per_producer;
      EXPECT_EQ(sum.load(), n * (n - 1) / 2) << "capacity " << capacity;
      for (long v = 0; v < n; ++v)
        ASSERT_EQ(seen[v].load(), 1) << "value " << v << ", capacity " << capacity;
    });
  }
}

TEST_P(ChanTest, PerProducerOrderIsKept) {
  run([] {
    constexpr int producers = 4;
    constexpr int per_producer = 50000;
    goro::Chan<std::pair<int, int>> ch(16);
    goro::WaitGroup wg;
    for (int p = 0; p < producers; ++p) {
      wg.add(1);
      goro::go([&, p] {
        for (int i = 0; i < per_producer; ++i) ch.send({p, i});
        wg.done();
      });
    }
    goro::go([&] {
      wg.wait();
      ch.close();
    });
    std::vector<int> next(producers, 0);
    int out_of_order = 0;
    for (auto [p, i] : ch) {
      if (i != next[p]) ++out_of_order;
      next[p] = i + 1;
    }
    EXPECT_EQ(out_of_order, 0);
    for (int p = 0; p < producers; ++p) EXPECT_EQ(next[p], per_producer);
  });
}

// A Chan is a handle: a const copy sends, receives, iterates and closes the same channel,
// so a lambda that captures it by value needs no `mutable`.
TEST_P(ChanTest, ConstHandlesOperateOnTheSameChannel) {
  run([] {
    const goro::Chan<int> ch(4);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([ch, &wg] {  // not mutable: the captured copy is const
      ch.send(1);
      EXPECT_TRUE(ch.try_send(2));
      ch.close();
      wg.done();
    });
    wg.wait();
    std::vector<int> got;
    for (int v : ch) got.push_back(v);
    EXPECT_EQ(got, (std::vector<int>{1, 2}));
    EXPECT_EQ(ch.recv(), std::nullopt);
    EXPECT_EQ(ch.try_recv(), std::nullopt);
    EXPECT_EQ(ch.recv2().second, false);
  });
}

}  // namespace
