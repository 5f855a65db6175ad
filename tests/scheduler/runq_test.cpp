// The local run queue alone (scheduler/src/runq.hpp), without a runtime: its order,
// its runnext slot, its overflow into a batch, and its contract under contention — one
// owner putting and getting while thieves steal half at a time — as brpc tests its
// work-stealing queue. Gs are opaque to the queue, so the items are addresses in an
// array.

#include "runq.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

using goro::detail::G;
using goro::detail::kRunQueueSize;
using goro::detail::RunQueue;

// Item i is the address of slot i: distinct, never dereferenced.
struct Items {
  explicit Items(std::size_t n) : slots(n) {}
  G* operator[](std::size_t i) { return reinterpret_cast<G*>(&slots[i]); }
  std::size_t index(G* g) const {
    return static_cast<std::size_t>(reinterpret_cast<const std::uint64_t*>(g) - slots.data());
  }
  std::vector<std::uint64_t> slots;
};

const auto kNoSpill = [](G**, std::uint32_t) { FAIL() << "unexpected spill"; };
const auto kNotRunning = [] { return false; };

TEST(RunQueue, RingIsFifoAndRunnextComesFirst) {
  auto q = std::make_unique<RunQueue>();
  Items items(8);
  for (int i = 0; i < 3; ++i) runqput(*q, items[i], false, kNoSpill);
  runqput(*q, items[3], true, kNoSpill);
  bool inherit = false;
  std::uint32_t left = 99;
  EXPECT_EQ(runqget(*q, &inherit, &left), items[3]);
  EXPECT_TRUE(inherit) << "a runnext G inherits the time slice";
  EXPECT_EQ(left, 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(runqget(*q, &inherit, &left), items[i]);
    EXPECT_FALSE(inherit);
    EXPECT_EQ(left, static_cast<std::uint32_t>(2 - i)) << "Gs still behind the one taken";
  }
  EXPECT_EQ(runqget(*q, &inherit), nullptr);
  EXPECT_TRUE(q->empty());
}

TEST(RunQueue, NewRunnextKicksTheOldOneToTheTail) {
  auto q = std::make_unique<RunQueue>();
  Items items(4);
  runqput(*q, items[0], false, kNoSpill);
  runqput(*q, items[1], true, kNoSpill);
  runqput(*q, items[2], true, kNoSpill);
  bool inherit = false;
  EXPECT_EQ(runqget(*q, &inherit), items[2]);
  EXPECT_EQ(runqget(*q, &inherit), items[0]);
  EXPECT_EQ(runqget(*q, &inherit), items[1]);
  EXPECT_EQ(q->size(), 0u);
}

TEST(RunQueue, FullRingSpillsItsOlderHalfAndTheNewG) {
  auto q = std::make_unique<RunQueue>();
  Items items(kRunQueueSize + 1);
  std::vector<G*> spilled;
  auto spill = [&](G** batch, std::uint32_t n) { spilled.assign(batch, batch + n); };
  for (std::uint32_t i = 0; i < kRunQueueSize; ++i) runqput(*q, items[i], false, spill);
  EXPECT_TRUE(spilled.empty());
  EXPECT_EQ(q->size(), kRunQueueSize);
  runqput(*q, items[kRunQueueSize], false, spill);
  ASSERT_EQ(spilled.size(), kRunQueueSize / 2 + 1);
  for (std::uint32_t i = 0; i < kRunQueueSize / 2; ++i) EXPECT_EQ(spilled[i], items[i]);
  EXPECT_EQ(spilled.back(), items[kRunQueueSize]);
  EXPECT_EQ(q->size(), kRunQueueSize / 2);
  bool inherit = false;
  EXPECT_EQ(runqget(*q, &inherit), items[kRunQueueSize / 2]) << "the newer half stays, in order";
}

TEST(RunQueue, StealTakesHalfAndTheRunnextOnlyWhenAsked) {
  auto victim = std::make_unique<RunQueue>();
  auto thief = std::make_unique<RunQueue>();
  Items items(16);
  for (int i = 0; i < 10; ++i) runqput(*victim, items[i], false, kNoSpill);
  std::uint32_t taken = 0;
  G* g = runqsteal(*thief, *victim, false, kNotRunning, &taken);
  EXPECT_EQ(taken, 5u);
  EXPECT_EQ(g, items[4]) << "the last stolen is returned to run";
  EXPECT_EQ(thief->size(), 4u);
  EXPECT_EQ(victim->size(), 5u);

  auto lone = std::make_unique<RunQueue>();
  runqput(*lone, items[12], true, kNoSpill);
  EXPECT_EQ(runqsteal(*thief, *lone, false, kNotRunning, &taken), nullptr);
  EXPECT_EQ(taken, 0u) << "runnext is left alone unless asked";
  EXPECT_EQ(runqsteal(*thief, *lone, true, kNotRunning, &taken), items[12]);
  EXPECT_EQ(taken, 1u);
  EXPECT_TRUE(lone->empty());
}

// One owner puts and gets; thieves steal into queues of their own and drain them. Every
// item comes out exactly once.
class RunQueueContention : public ::testing::TestWithParam<int> {};

TEST_P(RunQueueContention, EveryItemIsTakenExactlyOnce) {
  const int thieves = GetParam();
  constexpr std::size_t kItems = 2'000'000;
  Items items(kItems);
  auto victim = std::make_unique<RunQueue>();
  std::vector<std::atomic<std::uint8_t>> seen(kItems);
  std::atomic<std::size_t> taken_total{0};
  std::atomic<bool> producing{true};
  std::atomic<std::size_t> spilled_total{0};
  std::atomic<std::size_t> stolen_total{0};
  auto take = [&](G* g) {
    const std::size_t i = items.index(g);
    ASSERT_LT(i, kItems);
    EXPECT_EQ(seen[i].fetch_add(1, std::memory_order_relaxed), 0) << "item " << i << " twice";
    taken_total.fetch_add(1, std::memory_order_relaxed);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);

  std::vector<std::thread> threads;
  std::atomic<int> started{0};
  for (int t = 0; t < thieves; ++t) {
    threads.emplace_back([&] {
      auto own = std::make_unique<RunQueue>();
      started.fetch_add(1, std::memory_order_release);
      while (producing.load(std::memory_order_acquire) || !victim->empty()) {
        std::uint32_t n = 0;
        G* g = runqsteal(*own, *victim, true, kNotRunning, &n);
        if (g == nullptr) {
          std::this_thread::yield();
          continue;
        }
        stolen_total.fetch_add(n, std::memory_order_relaxed);
        take(g);
        bool inherit = false;
        while (G* more = runqget(*own, &inherit)) take(more);
        if (std::chrono::steady_clock::now() > deadline) return;
      }
    });
  }
  // The owner: bursts of puts (some into runnext), then takes most of them back itself,
  // so that the ring holds a few dozen Gs for the thieves. A full ring spills, as it
  // would into the global queue: those items count as taken.
  auto spill = [&](G** batch, std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i) take(batch[i]);
    spilled_total.fetch_add(n, std::memory_order_relaxed);
  };
  while (started.load(std::memory_order_acquire) < thieves) std::this_thread::yield();
  std::size_t next = 0;
  for (std::size_t round = 0; next < kItems && std::chrono::steady_clock::now() < deadline;
       ++round) {
    for (int k = 0; k < 32 && next < kItems; ++k, ++next)
      runqput(*victim, items[next], next % 7 == 0, spill);
    // Now and then the ring is left to fill up and spill while thieves take from it;
    // and the owner gives the thieves a chance on a machine with fewer cores than
    // threads.
    if (round % 64 < 8) continue;
    if (round % 16 == 0) std::this_thread::yield();
    bool inherit = false;
    while (victim->size() > 24) {
      G* g = runqget(*victim, &inherit);
      if (g == nullptr) break;
      take(g);
    }
  }
  producing.store(false, std::memory_order_release);
  for (auto& th : threads) th.join();
  bool inherit = false;
  while (G* g = runqget(*victim, &inherit)) take(g);

  ASSERT_EQ(next, kItems) << "the owner did not finish within the time bound";
  EXPECT_EQ(taken_total.load(), kItems);
  for (std::size_t i = 0; i < kItems; ++i) ASSERT_EQ(seen[i].load(), 1) << "item " << i;
  std::printf("[figure] %d thieves: %zu items, %zu stolen, %zu spilled\n", thieves, kItems,
              stolen_total.load(), spilled_total.load());
}

INSTANTIATE_TEST_SUITE_P(Thieves, RunQueueContention, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "T" + std::to_string(info.param); });

}  // namespace
