// A goroutine and descriptor leak check for any test: construct a LeakCheck when the
// process is at rest (the runtime and any server already started), do the work, and at
// the end of the scope (or at verify()) it waits, bounded, for the live goroutine count
// and the number of open descriptors to come back to what they were, and fails the
// test with both figures otherwise. Connections closing, goroutines unwinding and the
// kernel releasing sockets all take a moment after the client side is done, so it
// polls rather than compares once.
#pragma once

#include <dirent.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <goro/scheduler/runtime.hpp>

namespace goro::test {

// Entries of /proc/self/fd, the descriptor opendir itself uses not counted.
inline int open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;
}

// VmRSS of /proc/self/status in KiB; -1 when it cannot be read.
inline long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class LeakCheck {
 public:
  // where: names the scenario in a failure message. Callable from any thread while a
  // goro::run runs (goro::num_goroutine() reads one counter).
  explicit LeakCheck(std::string where,
                     std::chrono::milliseconds patience = std::chrono::seconds(5))
      : where_(std::move(where)),
        patience_(patience),
        goroutines_(goro::num_goroutine()),
        descriptors_(open_descriptors()) {}

  ~LeakCheck() {
    if (!verified_) verify();
  }
  LeakCheck(const LeakCheck&) = delete;
  LeakCheck& operator=(const LeakCheck&) = delete;

  // Waits up to the patience for goroutines and descriptors to return to the baseline
  // (fewer is fine: the baseline may have held a connection still closing); a failure
  // of the test otherwise. Returns whether they did.
  bool verify() {
    verified_ = true;
    auto until = std::chrono::steady_clock::now() + patience_;
    int goroutines = 0;
    int descriptors = 0;
    for (;;) {
      goroutines = goro::num_goroutine();
      descriptors = open_descriptors();
      if (goroutines <= goroutines_ && descriptors <= descriptors_) return true;
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    goro::RuntimeStats s = goro::stats();
    ADD_FAILURE() << where_ << ": leak after " << patience_.count() << " ms: goroutines "
                  << goroutines_ << " -> " << goroutines << " (waiting " << s.waiting
                  << ", on sockets " << s.netpoll_waiters << ", runnable " << s.runnable
                  << ", in syscalls " << s.syscall << "), descriptors " << descriptors_ << " -> "
                  << descriptors;
    return false;
  }

  int baseline_goroutines() const { return goroutines_; }
  int baseline_descriptors() const { return descriptors_; }

 private:
  std::string where_;
  std::chrono::milliseconds patience_;
  int goroutines_;
  int descriptors_;
  bool verified_ = false;
};

}  // namespace goro::test
