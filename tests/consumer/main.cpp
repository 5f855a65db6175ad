// Uses an installed goro: a few goroutines, a channel, a sleep. Prints "consumer: ok"
// and exits 0 when the runtime behaves.
#if defined(CONSUMER_HAS_FRAMEWORK)
#include <goro/goro.hpp>
#else
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#endif

#include <chrono>
#include <cstdio>

int main() {
  int rc = goro::run([]() -> int {
    constexpr int kN = 100;
    goro::Chan<int> results;  // unbuffered: every send meets a receive
    for (int i = 0; i < kN; i++) {
      goro::go([i, results]() mutable {
        if (i % 10 == 0) goro::sleep(std::chrono::milliseconds(1));
        results.send(i);
      });
    }
    long sum = 0;
    for (int i = 0; i < kN; i++) sum += results.recv().value_or(-1'000'000);
    const long want = kN * (kN - 1) / 2;
    if (sum != want) {
      std::printf("consumer: sum %ld, want %ld\n", sum, want);
      return 1;
    }
    std::printf("consumer: %d goroutines on %d Ps, goid of main %llu\n", kN, goro::maxprocs(),
                static_cast<unsigned long long>(goro::goid()));
    return 0;
  });
  if (rc == 0) std::printf("consumer: ok\n");
  return rc;
}
