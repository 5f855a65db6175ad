// Helpers for the goro::net tests: running a test body on the runtime, an echo server,
// clocks, descriptor limits.
#pragma once

#include <sys/resource.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <goro/net/net.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::net::testing {

// Runs body as the main goroutine of a runtime with procs Ps.
inline void run_with(int procs, std::function<void()> body) {
  goro::Config config;
  config.maxprocs = procs;
  goro::run(std::move(body), config);
}

// Tests that depend on parallelism run once per P count.
class ProcsTest : public ::testing::TestWithParam<int> {};

inline std::string procs_name(const ::testing::TestParamInfo<int>& info) {
  return "P" + std::to_string(info.param);
}

// Raises the soft descriptor limit to at least want (up to the hard limit), as Go 1.19
// does at startup. Returns the new soft limit.
inline rlim_t raise_fd_limit(rlim_t want) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

// User + system CPU time of this process.
inline std::chrono::microseconds cpu_time() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& tv) {
    return std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
  };
  return std::chrono::duration_cast<std::chrono::microseconds>(us(ru.ru_utime) + us(ru.ru_stime));
}

using Clock = std::chrono::steady_clock;

// How late a deadline may fire, in ms: 5, or GORO_TEST_SLACK_MS for slow builds
// (sanitizers) and busy machines.
inline double slack_ms() {
  const char* env = std::getenv("GORO_TEST_SLACK_MS");
  return env != nullptr ? std::atof(env) : 5.0;
}

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Checks how long several waits on a deadline target_ms away took: never early (a hard
// rule), the median within slack_ms() of the target, none later than a second (a lost
// or badly late timer). The median, not each sample: on a shared machine the OS alone
// sometimes wakes a thread tens of ms late, which says nothing about goro.
inline void expect_on_time(std::vector<double> samples_ms, double target_ms) {
  ASSERT_FALSE(samples_ms.empty());
  std::sort(samples_ms.begin(), samples_ms.end());
  std::string all;
  for (double s : samples_ms) all += std::to_string(s) + " ";
  EXPECT_GE(samples_ms.front(), target_ms - 0.5) << "fired early; samples (ms): " << all;
  EXPECT_LE(samples_ms[samples_ms.size() / 2], target_ms + slack_ms()) << "samples (ms): " << all;
  EXPECT_LE(samples_ms.back(), target_ms + 1000) << "samples (ms): " << all;
}

// An echo server: one goroutine accepts, one goroutine per connection writes back
// whatever it reads. stop() (or the destructor) closes the listener and every live
// connection and waits for all of its goroutines.
class EchoServer {
 public:
  explicit EchoServer(Listener ln) : ln_(std::move(ln)) {
    wg_.add(1);
    goro::go([this] {
      accept_loop();
      wg_.done();
    });
  }
  ~EchoServer() { stop(); }
  EchoServer(const EchoServer&) = delete;
  EchoServer& operator=(const EchoServer&) = delete;

  std::string addr() const { return ln_.addr().to_string(); }
  int accepted() const { return accepted_.load(); }

  void stop() {
    if (wait_done_) return;
    wait_done_ = true;
    ln_.close();
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
      for (Conn* c : live_) c->close();
    }
    wg_.wait();
  }

 private:
  void accept_loop() {
    for (;;) {
      auto c = ln_.accept();
      if (!c) {
        if (is_closed(c.error())) return;
        ADD_FAILURE() << "accept: " << c.error().message();
        return;
      }
      accepted_.fetch_add(1);
      wg_.add(1);
      goro::go([this, conn = std::move(*c)]() mutable {
        {
          std::lock_guard lock(mu_);
          if (stopped_) conn.close();
          live_.push_back(&conn);
        }
        char buf[4096];
        for (;;) {
          auto n = conn.read(buf, sizeof buf);
          if (!n || *n == 0) break;
          if (!conn.write(buf, *n)) break;
        }
        {
          std::lock_guard lock(mu_);
          std::erase(live_, &conn);
        }
        conn.close();
        wg_.done();
      });
    }
  }

  Listener ln_;
  goro::WaitGroup wg_;
  goro::Mutex mu_;
  std::vector<Conn*> live_;  // guarded by mu_
  bool stopped_ = false;     // guarded by mu_
  bool wait_done_ = false;   // stop() has run (owner only)
  std::atomic<int> accepted_{0};
};

}  // namespace goro::net::testing
