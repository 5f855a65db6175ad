// What the fuzz targets share: read_steps and the process-wide runtime of on_goroutine.
#include <openssl/ssl.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <goro/scheduler/runtime.hpp>

#include "harness.hpp"

namespace goro::fuzz {

std::vector<std::size_t> read_steps(std::uint8_t settings) {
  switch (settings % 4) {
    case 0: return {static_cast<std::size_t>(-1)};
    case 1: return {1};
    case 2: return {7};
    default: break;
  }
  std::vector<std::size_t> steps;
  std::uint32_t state = settings * 2654435761u + 1;
  for (int i = 0; i < 16; ++i) {
    state = state * 1664525u + 1013904223u;
    steps.push_back((state >> 24) + 1);
  }
  return steps;
}

namespace {

// The runtime thread and the one job it is handed at a time.
struct Runtime {
  std::mutex mu;  // guards job, done and quit
  std::condition_variable cv;
  const std::function<void()>* job = nullptr;
  bool done = false;
  bool quit = false;
  std::thread thread;
};

Runtime* the_runtime = nullptr;

void run_job(Runtime& r, const std::function<void()>& fn) {
  std::unique_lock lock(r.mu);
  r.job = &fn;
  r.done = false;
  r.cv.notify_all();
  r.cv.wait(lock, [&r] { return r.done; });
}

// At exit the main goroutine returns and goro::run with it, so that the runtime's
// threads are gone before static destructors run.
void stop_runtime() {
  {
    std::lock_guard lock(the_runtime->mu);
    the_runtime->quit = true;
  }
  the_runtime->cv.notify_all();
  the_runtime->thread.join();
}

Runtime& runtime() {
  static Runtime* r = [] {
    // OpenSSL registers its own clean-up at exit when it is first initialised, and it
    // must run after stop_runtime: the runtime's threads free their OpenSSL state as
    // they exit, which they cannot once OpenSSL is cleaned up.
    OPENSSL_init_ssl(0, nullptr);
    auto* r = new Runtime;
    r->thread = std::thread([r] {
      goro::run(
          [r] {
            for (;;) {
              // The wait parks in the kernel: blocking_long hands the P over at once.
              const std::function<void()>* job = goro::blocking_long([r] {
                std::unique_lock lock(r->mu);
                r->cv.wait(lock, [r] { return r->job != nullptr || r->quit; });
                return r->quit ? nullptr : r->job;
              });
              if (job == nullptr) return;
              (*job)();
              {
                std::lock_guard lock(r->mu);
                r->job = nullptr;
                r->done = true;
              }
              r->cv.notify_all();
            }
          },
          goro::Config{.maxprocs = 1});
    });
    // Registered once the runtime has run a job, so after everything it set up for
    // itself: atexit handlers and static destructors run in reverse order.
    run_job(*r, [] {});
    the_runtime = r;
    std::atexit(stop_runtime);
    return r;
  }();
  return *r;
}

}  // namespace

void on_goroutine(const std::function<void()>& fn) {
  if (goro::goid() != 0) {
    fn();
    return;
  }
  run_job(runtime(), fn);
}

}  // namespace goro::fuzz
