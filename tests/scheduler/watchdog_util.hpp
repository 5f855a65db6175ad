// A per-test watchdog for the scheduler tests that measure time (sysmon, trace,
// netpoll): a runtime bug that loses a wake-up makes goro::run never return, and the
// test binary would then sit until CTest's timeout. The watchdog ends the process
// after kTestLimit with a message naming the test instead.
//
// Include from exactly one source file of a test binary; it registers itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace goro_test {

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  static constexpr std::chrono::seconds kTestLimit{20};

  // The state is leaked on purpose: the watchdog thread may outlive the listener,
  // which the listener list deletes at exit.
  Watchdog() : s_(new State) {
    std::thread([s = s_] { loop(s); }).detach();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> guard(s_->mu);
    s_->name = std::string(info.test_suite_name()) + "." + info.name();
    s_->deadline = std::chrono::steady_clock::now() + kTestLimit;
    s_->armed = true;
    s_->cv.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> guard(s_->mu);
    s_->armed = false;
    s_->cv.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::string name;
    std::chrono::steady_clock::time_point deadline;
    bool armed = false;
  };

  static void loop(State* s) {
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      if (!s->armed) {
        s->cv.wait(lock);
        continue;
      }
      s->cv.wait_until(lock, s->deadline);
      if (s->armed && std::chrono::steady_clock::now() >= s->deadline) {
        std::fprintf(stderr,
                     "[watchdog] %s did not finish within %lld s: the runtime probably lost a "
                     "wake-up (goro::run never returned); aborting the test binary\n",
                     s->name.c_str(), static_cast<long long>(kTestLimit.count()));
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }

  State* s_;
};

// Registered before main() runs (gtest_main's RUN_ALL_TESTS comes later). The listener
// list owns the object.
inline const bool watchdog_registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog());
  return true;
}();

}  // namespace goro_test
