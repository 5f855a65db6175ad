// Helpers for the tests that drive real C client libraries on goroutines: throwaway
// PostgreSQL and Redis servers (scripts/test-servers.sh), and the runtime numbers the
// tests hold them to.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#ifndef GORO_TEST_SERVERS_SCRIPT
#error "GORO_TEST_SERVERS_SCRIPT names scripts/test-servers.sh (tests/clibs/CMakeLists.txt)"
#endif

namespace goro::clibs::testing {

// A server started by scripts/test-servers.sh in a fresh temporary folder, stopped (and
// the folder removed) by the destructor. address() is what the script printed: a libpq
// connection string, the Redis socket's path, MariaDB's host= port= ... line.
class TestServer {
 public:
  // kind: "pg", "redis" or "mariadb"; extra: more arguments for "start".
  explicit TestServer(std::string kind, std::string extra = "")
      : kind_(std::move(kind)), extra_(std::move(extra)) {
    char dir[] = "/tmp/goro-clibs-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      skip_reason_ = "mkdtemp failed";
      return;
    }
    dir_ = dir;
    start();
  }
  ~TestServer() { stop(); }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  // Stops the server and removes its folder; start() makes a new one in the same
  // folder, at the same socket path: a restart, as its clients see it.
  void stop() {
    if (!dir_.empty()) std::system(script(kind_ + " stop " + dir_ + " >/dev/null 2>&1").c_str());
  }
  void start() {
    address_.clear();
    skip_reason_.clear();
    error_.clear();
    const std::string cmd = script(kind_ + " start " + dir_ + " " + extra_);
    FILE* out = ::popen(cmd.c_str(), "r");
    if (out == nullptr) {
      skip_reason_ = "cannot run " GORO_TEST_SERVERS_SCRIPT;
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    char buf[512];
    while (std::fgets(buf, sizeof buf, out) != nullptr) address_ += buf;
    const int status = ::pclose(out);
    while (!address_.empty() && address_.back() == '\n') address_.pop_back();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    // Where a slow test spent its time, in its output.
    std::fprintf(stderr, "%s server start: exit %d after %.1f s\n", kind_.c_str(), code,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (code == 77) {
      skip_reason_ = kind_ + " server not installed (see the message above)";
    } else if (code != 0) {
      error_ =
          kind_ + " server did not start (exit " + std::to_string(code) + "; its log is above)";
    }
  }

  // A restart that keeps the server's data (test-servers.sh's "restart": PostgreSQL
  // only): its sessions end, and after seconds_down it listens again at the same address.
  // Whether it is back.
  bool restart(double seconds_down = 0) {
    const std::string cmd = script(kind_ + " restart " + dir_ + " " + std::to_string(seconds_down));
    return std::system(cmd.c_str()) == 0;
  }

  bool ok() const { return skip_reason_.empty() && error_.empty(); }
  // The server's folder (PostgreSQL's certificate is data/server.crt in it, with "tls").
  const std::string& dir() const { return dir_; }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& error() const { return error_; }
  const std::string& address() const { return address_; }

 private:
  static std::string script(const std::string& args) {
    return std::string(GORO_TEST_SERVERS_SCRIPT) + " " + args;
  }
  std::string kind_, extra_, dir_, address_, skip_reason_, error_;
};

// Skips the test when the server is not installed, fails it when it did not start.
#define GORO_REQUIRE_SERVER(server)                                              \
  do {                                                                           \
    if (!(server).skip_reason().empty()) GTEST_SKIP() << (server).skip_reason(); \
    ASSERT_TRUE((server).ok()) << (server).error();                              \
  } while (0)

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

// Runs fn in a goroutine after delay; the destructor waits for it to end, so that what
// it uses (declared before it) outlives it.
class After {
 public:
  After(std::chrono::milliseconds delay, std::function<void()> fn) {
    done_.add(1);
    goro::go([this, delay, fn = std::move(fn)] {
      goro::sleep(delay);
      fn();
      done_.done();
    });
  }
  ~After() { done_.wait(); }
  After(const After&) = delete;
  After& operator=(const After&) = delete;

 private:
  goro::WaitGroup done_;
};

// What docs/hooks.md promises: waiting on a library's socket costs a goroutine, so the
// runtime never needs more than a few threads beyond its Ps (sysmon, a spinning M, a
// goroutine in goro::blocking): Ps + 4. Under a sanitizer, Ps + 8: the library's code
// and ours run several times slower there, so more goroutines run past sysmon's 2 ms
// while others wait, and each one preempted by signal hands its P to another thread
// (the thread stays, idle, for reuse). A thread per call would still be far past it.
#if defined(GORO_ASAN) || defined(GORO_TSAN)
inline int thread_budget() { return goro::maxprocs() + 8; }
#else
inline int thread_budget() { return goro::maxprocs() + 4; }
#endif

}  // namespace goro::clibs::testing
