// The pool for connection objects (goro/base/object_pool.hpp): every size up to the limit
// gets memory that is 16-byte aligned and its own; a freed object's memory serves the
// next of its class; goroutines on several Ps allocating and freeing at once never get
// one object twice. Run with 1, 2, 4, 8 Ps.

#include <goro/base/object_pool.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "sync_test_util.hpp"

namespace {

using goro::kMaxPooled;
using goro::pool_alloc;
using goro::pool_free;
using goro_test::WithProcs;

TEST(ObjectPool, EverySizeIsAlignedWritableAndDistinct) {
  std::vector<std::pair<void*, std::size_t>> held;
  std::set<std::uintptr_t> starts;
  for (std::size_t size = 1; size <= kMaxPooled; size += 7) {
    for (int i = 0; i < 3; ++i) {
      void* p = pool_alloc(size);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << size;
      std::memset(p, static_cast<int>(size & 0xff), size);
      EXPECT_TRUE(starts.insert(reinterpret_cast<std::uintptr_t>(p)).second) << size;
      held.emplace_back(p, size);
    }
  }
  // Nothing written to one object reached another.
  for (auto [p, size] : held) {
    const auto* bytes = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], size & 0xff) << size;
  }
  for (auto [p, size] : held) pool_free(p, size);
}

#if !defined(GORO_ASAN)
// (ASan builds take memory from operator new, which need not reuse it.)
TEST(ObjectPool, FreedMemoryServesTheNextOfItsClass) {
  void* a = pool_alloc(200);
  pool_free(a, 200);
  void* b = pool_alloc(193);  // the same 16-byte class as 200
  EXPECT_EQ(a, b);
  pool_free(b, 193);
}
#endif

struct Pooled : goro::Pooled {
  std::uint64_t words[30];
};

class ObjectPoolOnPs : public WithProcs {};
GORO_INSTANTIATE_PROCS(ObjectPoolOnPs);

// 16 goroutines each keep 64 live objects, writing their own mark in each and checking
// it before freeing, 2,000 rounds: an object handed out twice would carry another's mark.
TEST_P(ObjectPoolOnPs, ConcurrentUseNeverSharesAnObject) {
  std::atomic<int> bad{0};
  run([&] {
    goro::WaitGroup wg;
    for (int w = 0; w < 16; ++w) {
      wg.add(1);
      goro::go([&, w] {
        std::vector<Pooled*> live;
        for (int round = 0; round < 2000; ++round) {
          auto* o = new Pooled;
          const std::uint64_t mark = (static_cast<std::uint64_t>(w) << 32) | round;
          for (auto& word : o->words) word = mark;
          live.push_back(o);
          if (live.size() > 64 || round % 7 == 0) {
            Pooled* old = live.front();
            live.erase(live.begin());
            for (auto word : old->words)
              if (word >> 32 != static_cast<std::uint64_t>(w)) bad.fetch_add(1);
            delete old;
          }
          if (round % 50 == 0) goro::yield();
        }
        for (Pooled* o : live) delete o;
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
