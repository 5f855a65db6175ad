// goro-hello: ten goroutines sleep for different times and report back over a channel.
// The sleeps overlap, so the whole program takes about as long as the longest one
// (100 ms), though each goroutine is written as plain blocking code.
//
//   $ ./goro-hello
//   goroutine 2 woke after 10 ms
//   ...
//   10 goroutines, 100 ms of sleep each at most, done in 101 ms on 2 Ps
#include <goro/goro.hpp>

#include <chrono>
#include <cstdio>

int main() {
  return goro::run([]() -> int {
    using namespace std::chrono;
    const auto start = steady_clock::now();
    constexpr int kWorkers = 10;

    goro::Chan<int> done(kWorkers);  // buffered: the workers never wait on main
    for (int i = 1; i <= kWorkers; i++) {
      goro::go([i, done] {
        goro::sleep(milliseconds(10 * i));  // parks this goroutine, not the thread
        std::printf("goroutine %llu woke after %d ms\n",
                    static_cast<unsigned long long>(goro::goid()), 10 * i);
        done.send(i);
      });
    }
    int sum = 0;
    for (int n = 0; n < kWorkers; n++) sum += done.recv().value_or(0);

    const auto ms = duration_cast<milliseconds>(steady_clock::now() - start).count();
    std::printf("%d goroutines, %d ms of sleep each at most, done in %lld ms on %d Ps\n", kWorkers,
                10 * kWorkers, static_cast<long long>(ms), goro::maxprocs());
    return sum == kWorkers * (kWorkers + 1) / 2 ? 0 : 1;
  });
}
