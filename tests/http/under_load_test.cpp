// Faults and abuse while clients keep a server busy: descriptors running out (EMFILE),
// 1,000 slowloris connections and a graceful shutdown in the middle of the load (TLS
// abuse beside the same load: tls_abuse_test.cpp). The load is plain blocking sockets on threads of the test, outside the
// goro runtime, sending `GET /` and counting what comes back: a whole response, a close
// before any byte of one (clean), part of one (truncated), nothing in time, or no
// connection at all. Figures are printed with a `[figure]` prefix; tests/HARDENING.md
// records them.
#include "under_load_util.hpp"

namespace goro::http::test {
namespace {

// ---------------------------------------------------------------------------------
// EMFILE under load. The server runs in a child process (this binary re-executed with
// GORO_HTTP_EMFILE_CHILD=1), which is what runs out of descriptors; the clients stay in
// the test's process. The child reads commands on stdin and answers on stdout:
// "exhaust" (lower the soft limit to 512, open /dev/null until EMFILE, and keep taking
// any descriptor that frees up), "cpu", "release" (close them all), "quit" (or end of
// input); each answer carries the child's CPU time in µs.

int emfile_server_child() {
  TestServer server(handler, quiet_options(), 2);
  std::printf("port %u\n", server.port());
  std::fflush(stdout);
  std::mutex mu;
  std::vector<int> hoard;  // guarded by mu
  // While hoarding, whatever a closing connection frees is taken again within a
  // millisecond, so the server stays out of descriptors (its accept retries less
  // often). The thread is made while descriptors are plentiful: UBSan's vptr check of
  // a new type needs one.
  std::atomic<bool> hoarding{false};
  std::atomic<bool> quit{false};
  std::thread hoarder([&] {
    while (!quit.load()) {
      int fd = hoarding.load() ? ::open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
      if (fd >= 0) {
        std::lock_guard lock(mu);
        hoard.push_back(fd);
      } else {
        std::this_thread::sleep_for(1ms);
      }
    }
  });
  int result = 0;
  std::string command;
  while (result == 0 && std::getline(std::cin, command)) {
    if (command == "exhaust") {
      rlimit rl{};
      ::getrlimit(RLIMIT_NOFILE, &rl);
      rl.rlim_cur = 512;
      if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        result = 2;
        break;
      }
      std::size_t taken = 0;
      {
        std::lock_guard lock(mu);
        for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) hoard.push_back(fd);
        if (errno != EMFILE) result = 3;
        taken = hoard.size();
      }
      hoarding.store(true);
      std::printf("exhausted %zu %lld\n", taken, static_cast<long long>(cpu_time().count()));
    } else if (command == "release") {
      hoarding.store(false);
      std::size_t released = 0;
      {
        std::lock_guard lock(mu);
        for (int fd : hoard) ::close(fd);
        released = hoard.size();
        hoard.clear();
      }
      std::printf("released %zu %lld\n", released, static_cast<long long>(cpu_time().count()));
    } else if (command == "cpu") {
      std::printf("cpu %lld\n", static_cast<long long>(cpu_time().count()));
    } else {
      break;
    }
    std::fflush(stdout);
  }
  quit.store(true);
  hoarder.join();
  server.stop();
  return result;
}

TEST(UnderLoadChild, EmfileServer) {
  if (std::getenv("GORO_HTTP_EMFILE_CHILD") == nullptr)
    GTEST_SKIP() << "runs only as the child of UnderLoad.EmfileServerStaysUpAndRecovers";
  std::fflush(nullptr);
  std::_Exit(emfile_server_child());
}

// The server process out of descriptors while 3 client threads keep opening new
// connections (a request each) and one sends a request every 5 ms on a keep-alive
// connection: the existing connection is served throughout, the listener backs off
// (the server's CPU stays low), and new connections are served again once descriptors
// are free (within the back-off's 1 s ceiling).
TEST(UnderLoad, EmfileServerStaysUpAndRecovers) {
  ::signal(SIGPIPE, SIG_IGN);  // a write to the pipe of a child that died fails instead
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_child, O_CLOEXEC), 0);
  char self[4096];
  ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(len, 0);
  self[len] = '\0';
  // Prepared before fork: the child only calls async-signal-safe functions until exec.
  std::string filter = "--gtest_filter=UnderLoadChild.EmfileServer";
  char* argv[] = {self, filter.data(), nullptr};
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) env_store.emplace_back(*e);
  env_store.emplace_back("GORO_HTTP_EMFILE_CHILD=1");
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    ::execve(self, argv, envp.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  FILE* replies = ::fdopen(from_child[0], "r");
  ASSERT_NE(replies, nullptr);
  // Sends a command; the child's answer line, without "\n" ("" when it died).
  auto ask = [&](const char* command) -> std::string {
    if (command != nullptr) {
      std::string line = std::string(command) + "\n";
      if (::write(to_child[1], line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        return "";
    }
    char answer[256];
    // The gtest banner lines of the child come first: skip to the answer.
    while (std::fgets(answer, sizeof answer, replies) != nullptr) {
      std::string s(answer);
      if (!s.empty() && s.back() == '\n') s.pop_back();
      if (s.starts_with("port ") || s.starts_with("exhausted ") || s.starts_with("released ") ||
          s.starts_with("cpu "))
        return s;
    }
    return "";
  };
  auto number_at = [](const std::string& s, int index) {
    std::size_t at = 0;
    for (int i = 0; i < index; ++i) at = s.find(' ', at) + 1;
    return std::strtoll(s.c_str() + at, nullptr, 10);
  };
  std::string port_line = ask(nullptr);
  ASSERT_FALSE(port_line.empty()) << "the server child did not start";
  auto port = static_cast<std::uint16_t>(number_at(port_line, 1));

  Load fresh(port, 3, 1, 2000ms);
  Load kept(port, 1, 1 << 30, 2000ms, 5000us);
  std::this_thread::sleep_for(1000ms);
  fresh.set_phase(1);
  kept.set_phase(1);
  std::string exhausted = ask("exhaust");
  ASSERT_FALSE(exhausted.empty()) << "the child died exhausting its descriptors";
  std::this_thread::sleep_for(2000ms);
  std::string cpu = ask("cpu");
  fresh.set_phase(2);
  kept.set_phase(2);
  std::string released = ask("release");
  auto released_at = Clock::now();
  std::this_thread::sleep_for(2000ms);
  fresh.stop();
  kept.stop();
  ::close(to_child[1]);  // "quit"
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  std::fclose(replies);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the server child failed: " << status;

  const double cpu_ms = static_cast<double>(number_at(cpu, 1) - number_at(exhausted, 2)) / 1000.0;
  Tally before = fresh.tally(0), during = fresh.tally(1), after = fresh.tally(2);
  Tally kept_during = kept.tally(1);
  std::optional<double> recovered_ms;
  for (int phase = 1; phase <= 2; ++phase) {
    for (Clock::time_point t : fresh.tally(phase).done) {
      if (t > released_at && (!recovered_ms || ms_between(released_at, t) < *recovered_ms))
        recovered_ms = ms_between(released_at, t);
    }
  }
  std::printf(
      "[figure] EMFILE: %lld descriptors hoarded (%lld by the release); new connections before %ld "
      "ok, during 2 s "
      "%ld ok / %ld timed out / %ld no connection, after %ld ok; keep-alive during %ld ok "
      "/ %ld failed; server CPU while exhausted %.1f ms in 2 s; first new connection "
      "served %.0f ms after release\n",
      number_at(exhausted, 1), number_at(released, 1), before.complete, during.complete,
      during.timed_out, during.refused, after.complete, kept_during.complete,
      kept_during.clean + kept_during.truncated + kept_during.timed_out, cpu_ms,
      recovered_ms.value_or(-1));
  EXPECT_GT(before.complete, 0);
  EXPECT_GT(kept_during.complete, 50) << "the keep-alive connection was not served meanwhile";
  EXPECT_EQ(kept_during.truncated, 0);
  // A spinning accept loop would take a whole core (2,000 ms); the back-off and the
  // keep-alive requests take a fraction of one (more under a sanitizer).
  EXPECT_LT(cpu_ms, kTimingMeaningful ? 500.0 : 1000.0)
      << "the server spun while out of descriptors";
  EXPECT_GT(after.complete, 0) << "no new connection served after the release";
  ASSERT_TRUE(recovered_ms.has_value());
  EXPECT_LT(*recovered_ms, 1500.0);
  EXPECT_EQ(before.truncated + during.truncated + after.truncated, 0);
}

// ---------------------------------------------------------------------------------
// Slowloris: connections that send a request line and Host, then one byte of a header
// line that never ends every 100 ms. Driven by one thread over non-blocking sockets.

struct SlowlorisResult {
  int opened = 0;
  int closed = 0;                    // by the server (end of stream or reset)
  int answered_408 = 0;              // a 408 came before the close
  std::vector<double> cut_after_ms;  // connect to close, per closed connection
  Clock::time_point all_open;        // when the last connection was open
};

// all_open: set once every connection is open and has sent its first bytes.
SlowlorisResult slowloris(std::uint16_t port, int count, std::chrono::milliseconds give_up,
                          std::atomic<bool>& all_open) {
  SlowlorisResult result;
  struct Slow {
    int fd = -1;
    Clock::time_point connected;
    bool got_408 = false;
  };
  std::vector<Slow> conns;
  conns.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    int fd = connect_to(port, 2000ms);
    if (fd < 0) break;
    Slow s{fd, Clock::now(), false};
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    static constexpr std::string_view kStart = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    (void)::send(fd, kStart.data(), kStart.size(), MSG_NOSIGNAL);
    conns.push_back(s);
  }
  result.opened = static_cast<int>(conns.size());
  result.all_open = Clock::now();
  all_open.store(true);
  auto until = Clock::now() + give_up;
  auto next_byte = Clock::now();
  std::vector<pollfd> polled;
  std::vector<std::size_t> which;
  while (result.closed < result.opened && Clock::now() < until) {
    auto close_one = [&](Slow& s) {
      result.cut_after_ms.push_back(ms_between(s.connected, Clock::now()));
      result.answered_408 += s.got_408 ? 1 : 0;
      ++result.closed;
      ::close(s.fd);
      s.fd = -1;
    };
    if (Clock::now() >= next_byte) {
      next_byte += 100ms;
      for (Slow& s : conns) {
        if (s.fd < 0) continue;
        if (::send(s.fd, "a", 1, MSG_NOSIGNAL) < 0 && errno != EAGAIN) close_one(s);
      }
    }
    polled.clear();
    which.clear();
    for (std::size_t i = 0; i < conns.size(); ++i) {
      if (conns[i].fd < 0) continue;
      polled.push_back({conns[i].fd, POLLIN | POLLRDHUP, 0});
      which.push_back(i);
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_byte - Clock::now());
    if (::poll(polled.data(), polled.size(), static_cast<int>(std::max<long>(wait.count(), 0))) <=
        0)
      continue;
    for (std::size_t k = 0; k < polled.size(); ++k) {
      if (polled[k].revents == 0) continue;
      Slow& s = conns[which[k]];
      char buf[1024];
      ssize_t n;
      while ((n = ::recv(s.fd, buf, sizeof buf, 0)) > 0) {
        if (std::string_view(buf, static_cast<std::size_t>(n)).starts_with("HTTP/1.1 408"))
          s.got_408 = true;
      }
      if (n == 0 || (n < 0 && errno != EAGAIN)) close_one(s);
    }
  }
  for (Slow& s : conns) {
    if (s.fd >= 0) ::close(s.fd);
  }
  return result;
}

// 1,000 slowloris connections while two keep-alive clients measure the plaintext rate:
// the server cuts every one of them at the header timeout (2.5 s here), with a 408,
// and the rate with them is at least 80% of the rate without (measured just before and
// just after, side by side). Other work on a shared machine can halve a rate for a
// second, so the scenario runs up to 3 times and the best ratio counts; each run's
// cuts are checked.
TEST(UnderLoad, SlowlorisDuringPlaintextLoad) {
  constexpr int kSlow = 1000;
  constexpr auto kHeaderTimeout = 2500ms;
  DescriptorLimit limit(4 * kSlow + 200);
  ASSERT_TRUE(limit.ok()) << "RLIMIT_NOFILE too low for 1,000 connections on each side";
  ServerOptions o = quiet_options();
  o.read_header_timeout = kHeaderTimeout;
  DualServer server(o, std::nullopt);
  warm_up(server);
  goro::test::LeakCheck leaks("slowloris");
  double best = 0;
  for (int attempt = 1; attempt <= 3 && best < 0.8; ++attempt) {
    SlowlorisResult slow;
    double rate_before = 0, rate_during = 0, rate_after = 0;
    Tally during;
    {
      Load load(server.port(), 2, 1 << 30);
      std::this_thread::sleep_for(200ms);  // connections made, warmed up
      load.set_phase(1);
      auto t0 = Clock::now();
      std::this_thread::sleep_for(1000ms);
      load.set_phase(2);
      auto t1 = Clock::now();
      std::atomic<bool> all_open{false};
      std::thread attacker(
          [&] { slow = slowloris(server.port(), kSlow, kHeaderTimeout + 3000ms, all_open); });
      // The rate while all 1,000 are open, for 1 s from when the last is open: over
      // before the first is cut (the header timeout after its accept, which came after
      // t1) as long as opening them took under 1.5 s.
      while (!all_open.load() && ms_between(t1, Clock::now()) < 5000)
        std::this_thread::sleep_for(1ms);
      load.set_phase(3);
      auto t2 = Clock::now();
      std::this_thread::sleep_for(1000ms);
      load.set_phase(4);
      auto t3 = Clock::now();
      attacker.join();
      load.set_phase(5);
      auto t4 = Clock::now();
      std::this_thread::sleep_for(1000ms);
      load.set_phase(6);
      auto t5 = Clock::now();
      load.stop();
      rate_before = static_cast<double>(load.tally(1).complete) / (ms_between(t0, t1) / 1000);
      during = load.tally(3);
      rate_during = static_cast<double>(during.complete) / (ms_between(t2, t3) / 1000);
      rate_after = static_cast<double>(load.tally(5).complete) / (ms_between(t4, t5) / 1000);
      for (int phase = 1; phase <= 5; ++phase) EXPECT_EQ(load.tally(phase).truncated, 0);
      EXPECT_TRUE(all_open.load());
      EXPECT_LT(ms_between(t1, t3), static_cast<double>(kHeaderTimeout.count()))
          << "opening the 1,000 connections took so long that the measurement met the cuts";
    }
    std::sort(slow.cut_after_ms.begin(), slow.cut_after_ms.end());
    const double ratio = rate_during / ((rate_before + rate_after) / 2);
    best = std::max(best, ratio);
    std::printf(
        "[figure] slowloris, run %d: %d connections opened, %d cut by the server (%d with a 408) "
        "after %.0f / %.0f / %.0f ms (min / median / max; header timeout %lld ms); plaintext "
        "rate %.0f req/s before, %.0f with the 1,000 open (p99 %.2f ms), %.0f after: %.0f%% of "
        "the rate without\n",
        attempt, slow.opened, slow.closed, slow.answered_408,
        slow.cut_after_ms.empty() ? -1.0 : slow.cut_after_ms.front(),
        slow.cut_after_ms.empty() ? -1.0 : slow.cut_after_ms[slow.cut_after_ms.size() / 2],
        slow.cut_after_ms.empty() ? -1.0 : slow.cut_after_ms.back(),
        static_cast<long long>(kHeaderTimeout.count()), rate_before, rate_during,
        during.percentile(0.99), rate_after, 100 * ratio);
    EXPECT_EQ(slow.opened, kSlow);
    EXPECT_EQ(slow.closed, kSlow) << "slowloris connections outlived the header timeout";
    EXPECT_EQ(slow.answered_408, kSlow);
    ASSERT_FALSE(slow.cut_after_ms.empty());
    // The client notes a connection open when its connect() returns, the server starts
    // the clock at its accept(), later; a client thread descheduled in between (the
    // machine is shared) notes it late, hence the allowance below the limit.
    EXPECT_GE(slow.cut_after_ms.front(), static_cast<double>(kHeaderTimeout.count()) - 100);
    EXPECT_LE(slow.cut_after_ms.back(), static_cast<double>(kHeaderTimeout.count()) + 1000);
  }
  if (kTimingMeaningful) {
    EXPECT_GE(best, 0.8) << "the plaintext rate with 1,000 slowloris connections, best of 3";
  }
  EXPECT_TRUE(leaks.verify());
}

// ---------------------------------------------------------------------------------
// Graceful shutdown in the middle of a load: 2 threads on keep-alive connections, 2
// opening a new connection per request, and one request whose handler never returns.
// Every request the handler of "/" took got its whole response; a client otherwise sees
// a close before any byte of a response, or no connection; none sees part of one. The
// handler that never returns holds shutdown only to its deadline.
TEST(UnderLoad, ShutdownLosesNoAcceptedRequest) {
  handled.store(0);
  hanging.store(0);
  release_hang.store(false);
  DualServer server(quiet_options(), std::nullopt);
  Load kept(server.port(), 2, 1 << 30, 3000ms);
  Load fresh(server.port(), 2, 1, 3000ms);
  RawConn hung(server.port());
  ASSERT_TRUE(hung.send("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(800ms);
  ASSERT_EQ(hanging.load(), 1);
  const auto grace = 500ms;
  std::error_code result = server.stop(grace);
  std::this_thread::sleep_for(300ms);  // the clients meet the closed listener
  kept.stop();
  fresh.stop();
  Tally k = kept.tally(0);
  Tally f = fresh.tally(0);
  const double took_ms = std::chrono::duration<double, std::milli>(server.shutdown_took()).count();
  std::printf(
      "[figure] shutdown under load: %ld requests handled, %ld whole responses (keep-alive "
      "%ld, new connections %ld), %ld closed before any response byte, %ld truncated, %ld "
      "timed out, %ld connects refused; shutdown returned \"%s\" after %.0f ms (deadline "
      "%lld ms, one handler never returns)\n",
      handled.load(), k.complete + f.complete, k.complete, f.complete, k.clean + f.clean,
      k.truncated + f.truncated, k.timed_out + f.timed_out, k.refused + f.refused,
      result.message().c_str(), took_ms, static_cast<long long>(grace.count()));
  EXPECT_EQ(result, errc::shutdown_timeout);
  EXPECT_GE(took_ms, static_cast<double>(grace.count()) - 5);
  EXPECT_LT(took_ms, static_cast<double>(grace.count()) + 300) << "the hung handler held shutdown";
  EXPECT_GT(k.complete, 100);
  EXPECT_GT(f.complete, 100);
  EXPECT_EQ(k.truncated + f.truncated, 0) << "a client saw part of a response";
  EXPECT_EQ(k.timed_out + f.timed_out, 0);
  EXPECT_EQ(handled.load(), k.complete + f.complete)
      << "a request the handler took got no response";
  EXPECT_TRUE(hung.closed_by_peer()) << "the hung request's connection outlived the deadline";
}


}  // namespace
}  // namespace goro::http::test
