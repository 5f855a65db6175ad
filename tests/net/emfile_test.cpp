// Accept survives running out of file descriptors: it backs off instead of spinning,
// logs once, and serves again when descriptors are freed; close() ends a backoff.
//
// The scenario runs in a child process (this test binary, re-executed with
// GORO_NET_EMFILE_CHILD=1) because it lowers RLIMIT_NOFILE and eats every descriptor.
// The child's exit code is the verdict; its stderr goes to a file the parent reads.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

enum ChildResult {
  kPassed = 0,
  kSetupFailed = 10,
  kNotExhausted = 11,
  kDialFailed = 12,
  kAcceptedWhileExhausted = 13,
  kSpun = 14,
  kNoRecovery = 15,
  kEchoFailed = 16,
  kSlowClose = 17,
};

int child_scenario() {
  int result = kSetupFailed;
  run_with(1, [&] {
    auto ln = listen("tcp", "127.0.0.1:0");
    if (!ln) return;
    std::atomic<int> accepted{0};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {  // an echo server that counts accepted connections
      for (;;) {
        auto c = ln->accept();
        if (!c) break;
        accepted.fetch_add(1);
        char buf[64];
        auto n = c->read(buf, sizeof buf);
        if (n && *n > 0) (void)c->write(buf, *n);
      }
      wg.done();
    });
    // One round trip first: the server works, and every code path the scenario uses
    // has run once while descriptors were plentiful (UBSan's vptr check needs a free
    // descriptor the first time it meets a type, and reports a false error without).
    {
      auto warm = dial("tcp", ln->addr().to_string());
      char buf[4];
      if (!warm || !warm->write("warm", 4) || !warm->read_full(buf, 4)) return;
    }
    while (accepted.load() != 1) goro::sleep(1ms);
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 256;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    // Eats every descriptor, then gives one back for a client's socket. False if the
    // limit was not what ran out.
    std::vector<int> hoard;
    auto exhaust = [&hoard] {
      for (;;) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) break;
        hoard.push_back(fd);
      }
      if (errno != EMFILE || hoard.empty()) return false;
      close(hoard.back());
      hoard.pop_back();
      return true;
    };
    if (!exhaust()) {
      result = kNotExhausted;
      return;
    }
    auto client = dial("tcp", ln->addr().to_string());
    if (!client) {
      result = kDialFailed;
      return;
    }
    // The server's accept now fails with EMFILE: it must back off, not spin.
    auto cpu0 = cpu_time();
    goro::sleep(700ms);
    auto cpu = cpu_time() - cpu0;
    if (accepted.load() != 1) {
      result = kAcceptedWhileExhausted;
      return;
    }
    if (cpu > 50ms) {
      std::fprintf(stderr, "cpu while exhausted: %lld us\n", static_cast<long long>(cpu.count()));
      result = kSpun;
      return;
    }
    for (int fd : hoard) close(fd);
    hoard.clear();
    // The backoff is at most 1 s; the pending connection is served after it.
    auto t0 = Clock::now();
    while (accepted.load() == 1 && ms_since(t0) < 2000) goro::sleep(5ms);
    if (accepted.load() == 1) {
      result = kNoRecovery;
      return;
    }
    char buf[4];
    auto w = client->write("ping", 4);
    auto r = w ? client->read_full(buf, 4) : Result<std::size_t>(w.error());
    if (!r || *r != 4) {
      result = kEchoFailed;
      return;
    }
    client->close();
    // A second episode, long enough for the backoff to reach its 1 s ceiling; then
    // close() must end the accept at once, not after the sleep in progress.
    if (!exhaust()) {
      result = kNotExhausted;
      return;
    }
    auto client2 = dial("tcp", ln->addr().to_string());
    if (!client2) {
      result = kDialFailed;
      return;
    }
    goro::sleep(1500ms);  // sleeps of 5, 10, ... 640 ms, then one of 1 s from ~1.3 s
    t0 = Clock::now();
    ln->close();
    wg.wait();
    auto close_ms = ms_since(t0);
    for (int fd : hoard) close(fd);
    if (close_ms > 300) {
      std::fprintf(stderr, "accept ended %lld ms after close\n", static_cast<long long>(close_ms));
      result = kSlowClose;
      return;
    }
    result = kPassed;
  });
  return result;
}

TEST(Emfile, Child) {
  if (std::getenv("GORO_NET_EMFILE_CHILD") == nullptr)
    GTEST_SKIP() << "runs only as the child of Emfile.AcceptBacksOffAndRecovers";
  std::fflush(nullptr);
  std::_Exit(child_scenario());
}

TEST(Emfile, AcceptBacksOffAndRecovers) {
  char log_path[] = "/tmp/goro-net-emfile-XXXXXX";
  int log_fd = mkstemp(log_path);
  ASSERT_GE(log_fd, 0);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  // Prepared before fork: the child only calls async-signal-safe functions until exec.
  std::string filter = "--gtest_filter=Emfile.Child";
  char* argv[] = {self, filter.data(), nullptr};
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) env_store.emplace_back(*e);
  env_store.emplace_back("GORO_NET_EMFILE_CHILD=1");
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    execve(self, argv, envp.data());
    _exit(127);
  }
  close(log_fd);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream in(log_path);
  std::stringstream log;
  log << in.rdbuf();
  unlink(log_path);
  ASSERT_TRUE(WIFEXITED(status)) << "child died; stderr:\n" << log.str();
  EXPECT_EQ(WEXITSTATUS(status), kPassed) << "stderr:\n" << log.str();
  // One log line per episode (the child has two), however many retries each took.
  std::string text = log.str();
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = text.find("goro::net: accept", at)) != std::string::npos; ++at)
    ++lines;
  EXPECT_EQ(lines, 2u) << text;
}

}  // namespace
}  // namespace goro::net::testing
