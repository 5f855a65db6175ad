// Helpers of the netpoller tests (netpoll_test, netpoll_start_test): a pipe whose read
// end is registered with the netpoller, a wait for a condition, and the descriptor
// limit a test of many pipes needs.
#pragma once

#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <gtest/gtest.h>

namespace goro_test {

inline constexpr std::int64_t kMs = 1'000'000;

inline const char* status_name(goro::detail::PollStatus s) {
  using goro::detail::PollStatus;
  switch (s) {
    case PollStatus::ready: return "ready";
    case PollStatus::timeout: return "timeout";
    case PollStatus::closed: return "closed";
    case PollStatus::interrupted: return "interrupted";
  }
  return "?";
}

// A non-blocking pipe whose read end is registered with the netpoller.
struct Pipe {
  int rd = -1, wr = -1;
  goro::detail::PollDesc* pd = nullptr;

  bool open() {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
    rd = fds[0];
    wr = fds[1];
    pd = goro::detail::poll_open(rd);
    return pd != nullptr;
  }
  void write_byte(char c = 'x') const { EXPECT_EQ(::write(wr, &c, 1), 1); }
  int read_byte() const {
    char c;
    return ::read(rd, &c, 1) == 1 ? c : -1;
  }
  // Evicts any waiter, unregisters and closes. Only when no G is inside poll_wait.
  void close() {
    if (pd) {
      goro::detail::poll_evict(pd);
      goro::detail::poll_close(pd);
      pd = nullptr;
    }
    if (rd >= 0) ::close(rd);
    if (wr >= 0) ::close(wr);
    rd = wr = -1;
  }
};

// Parks the calling goroutine until pred() holds or `timeout` passes.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const std::int64_t end = goro::detail::nanotime() + std::chrono::nanoseconds(timeout).count();
  while (!pred()) {
    if (goro::detail::nanotime() > end) return false;
    goro::sleep(std::chrono::milliseconds(1));
  }
  return true;
}

// Raises the soft descriptor limit to `want` if needed; an empty string when that
// worked, else why not (for GTEST_SKIP).
inline std::string raise_descriptor_limit(rlim_t want) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur >= want) return {};
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
    return "needs " + std::to_string(want) + " descriptors; the hard limit is " +
           std::to_string(rl.rlim_max);
  rl.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return "setrlimit failed";
  return {};
}

}  // namespace goro_test
