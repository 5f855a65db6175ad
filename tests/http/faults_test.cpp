// Faults a client can cause, against a real Server on 127.0.0.1 (two Ps): resets in the
// middle of a request head, a body and a response; a client that half-closes; a client
// that leaves while the handler writes megabytes (EPIPE); and 10,000 connect/close and
// 10,000 reset cycles. After each, the server still answers, the handler saw what a
// handler should see, and no goroutine or descriptor is left behind (LeakCheck).
// Clients are plain blocking sockets on the test's thread.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <goro/http/server.hpp>
#include <goro/scheduler/runtime.hpp>

#include "leak_check.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;
using goro::test::LeakCheck;

// What the handlers saw, for the test to check; reset by each test's fixture.
struct Observed {
  std::atomic<int> requests{0};
  std::atomic<int> handlers_done{0};
  std::atomic<int> body_errors{0};
  std::atomic<int> write_errors{0};
  std::atomic<long> bytes_written{0};
  std::mutex mutex;
  std::error_code last_error;  // guarded by mutex

  void record(std::error_code ec) {
    std::lock_guard lock(mutex);
    last_error = ec;
  }
  std::error_code error() {
    std::lock_guard lock(mutex);
    return last_error;
  }
};
Observed* observed = nullptr;

constexpr std::size_t kSlowChunk = 16 * 1024;
constexpr int kSlowChunks = 2048;  // 32 MiB at 2 ms a chunk: 4 s, if nobody stops it
constexpr std::size_t kBigWrite = 1 << 20;
constexpr int kBigWrites = 8;  // 8 MiB

// Writes one piece of the body; counts it, or records the error and says stop.
bool write_counted(ResponseWriter& w, std::string_view piece, bool flush) {
  std::error_code ec = w.write(piece);
  if (!ec && flush) ec = w.flush();
  if (ec) {
    observed->write_errors.fetch_add(1);
    observed->record(ec);
    return false;
  }
  observed->bytes_written.fetch_add(static_cast<long>(piece.size()));
  return true;
}

void handler(Request& req, ResponseWriter& w) {
  observed->requests.fetch_add(1);
  std::string_view path = req.path();
  if (path == "/body") {
    Result<std::string> body = req.body();
    if (!body) {
      observed->body_errors.fetch_add(1);
      observed->record(body.error());
    } else {
      w.text(std::to_string(body->size()));
    }
  } else if (path == "/slow") {
    const std::string chunk(kSlowChunk, 's');
    for (int i = 0; i < kSlowChunks && write_counted(w, chunk, true); ++i) goro::sleep(2ms);
  } else if (path == "/big") {
    const std::string piece(kBigWrite, 'b');
    for (int i = 0; i < kBigWrites && write_counted(w, piece, false); ++i) {
    }
  } else if (path == "/sleep") {
    goro::sleep(100ms);
    w.text("slept");
  } else if (path == "/throw") {
    throw std::runtime_error("handler broke before writing");
  } else if (path == "/throw-late") {
    w.write("partial");
    w.flush();
    throw std::runtime_error("handler broke after a flush");
  } else {
    w.text("hello");
  }
  observed->handlers_done.fetch_add(1);
}

// Polls cond every millisecond for up to `within`; whether it became true.
template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds within = 5000ms) {
  auto until = std::chrono::steady_clock::now() + within;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Makes the close of fd send a reset (RST) instead of a FIN.
void reset_on_close(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

class Faults : public ::testing::Test {
 protected:
  static ServerOptions options() {
    ServerOptions o;
    o.error_log = [](std::string_view) {};
    return o;
  }

  void SetUp() override {
    observed = &observed_;
    // One request first, so that what the first connection creates once (the
    // netpoller's registration, stacks kept for reuse) is in the baseline.
    ASSERT_TRUE(round_trip(server_.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    settle();
    observed_.requests.store(0);
    observed_.handlers_done.store(0);
  }
  void TearDown() override {
    server_.stop();  // no handler may still run when observed goes
    observed = nullptr;
  }

  // Waits until the server holds no connection (what a client closed is closed there).
  void settle() {
    EXPECT_TRUE(eventually([] { return server_stats().connections_open == 0; }))
        << server_stats().connections_open << " connections still open";
  }

  // The server still answers a plain request on a new connection.
  void expect_serving() {
    auto r = round_trip(server_.port(), "GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(r) << "no answer after the fault";
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello");
  }

  Observed observed_;
  TestServer server_{handler, options()};
};

// The check itself: a connection still open at verify() is reported as a leak (the
// server's goroutine for it, and a descriptor on each side).
TEST_F(Faults, LeakCheckSeesAConnectionLeftOpen) {
  static std::uint16_t port;
  port = server_.port();
  EXPECT_NONFATAL_FAILURE(
      {
        LeakCheck leaks("connection left open", 200ms);
        RawConn held(port);
        EXPECT_TRUE(eventually([] { return server_stats().connections_open == 1; }));
        leaks.verify();
      },
      "connection left open: leak after 200 ms");
  settle();
}

// A reset before the head is complete: no handler runs, the connection's goroutine ends.
TEST_F(Faults, ResetMidRequestHead) {
  LeakCheck leaks("reset mid-head");
  {
    std::uint64_t accepted = server_stats().connections_total;
    RawConn c(server_.port());
    ASSERT_TRUE(c.send("GET /never HTTP/1.1\r\nHost: x\r\nX-Cut: half a val"));
    ASSERT_TRUE(eventually([&] { return server_stats().connections_total > accepted; }));
    // Nothing shows that the server read a partial head (server_stats() publishes bytes
    // per request and at the close): give the connection's goroutine time to read it.
    std::this_thread::sleep_for(50ms);
    reset_on_close(c.fd());
  }
  settle();
  EXPECT_EQ(observed_.requests.load(), 0);
  expect_serving();
  EXPECT_TRUE(leaks.verify());
}

// A reset while the handler reads a body shorter than its Content-Length: the handler's
// read fails (it is not left waiting for bytes that never come), and it returns.
TEST_F(Faults, ResetMidBody) {
  LeakCheck leaks("reset mid-body");
  {
    RawConn c(server_.port());
    ASSERT_TRUE(c.send("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" +
                       std::string(1000, 'x')));
    ASSERT_TRUE(eventually([&] { return observed_.requests.load() == 1; }));
    reset_on_close(c.fd());
  }
  ASSERT_TRUE(eventually([&] { return observed_.handlers_done.load() == 1; }))
      << "the handler is still reading a body whose client reset";
  EXPECT_EQ(observed_.body_errors.load(), 1);
  std::printf("[figure] reset mid-body: the handler's body() failed with \"%s\"\n",
              observed_.error().message().c_str());
  settle();
  expect_serving();
  EXPECT_TRUE(leaks.verify());
}

// A reset while a handler streams a large response slowly: its next write fails, it
// stops long before the 32 MiB it would have sent.
TEST_F(Faults, ResetMidResponse) {
  LeakCheck leaks("reset mid-response");
  auto reset_at = std::chrono::steady_clock::now();
  {
    RawConn c(server_.port());
    ASSERT_TRUE(c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    while (c.pending().size() < 4 * kSlowChunk) ASSERT_TRUE(c.fill()) << "response stalled";
    reset_on_close(c.fd());
    reset_at = std::chrono::steady_clock::now();
  }
  ASSERT_TRUE(eventually([&] { return observed_.handlers_done.load() == 1; }))
      << "the handler still streams to a client that reset";
  auto stopped_after = std::chrono::steady_clock::now() - reset_at;
  EXPECT_EQ(observed_.write_errors.load(), 1);
  EXPECT_LT(observed_.bytes_written.load(), static_cast<long>(kSlowChunk) * kSlowChunks / 4);
  std::printf(
      "[figure] reset mid-response: handler stopped %lld ms after the reset, %ld of %zu "
      "bytes written, error \"%s\"\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(stopped_after).count()),
      observed_.bytes_written.load(), kSlowChunk * kSlowChunks,
      observed_.error().message().c_str());
  settle();
  expect_serving();
  EXPECT_TRUE(leaks.verify());
}

// A client that sends a whole request and then shuts its writing side (SHUT_WR) still
// gets the response, also when the handler takes a while; then the server closes.
TEST_F(Faults, HalfClosedClientGetsItsResponse) {
  LeakCheck leaks("half-closed client");
  for (const char* path : {"/", "/sleep"}) {
    RawConn c(server_.port());
    ASSERT_TRUE(c.send(std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    c.shutdown_write();
    auto r = c.read_response();
    ASSERT_TRUE(r) << path << ": no response after the client's FIN";
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->body, std::string(path) == "/" ? "hello" : "slept") << path;
    EXPECT_TRUE(c.closed_by_peer()) << path << ": the server kept a half-closed connection";
  }
  settle();
  EXPECT_TRUE(leaks.verify());
}

// The client half-closes, reads a little of an 8 MiB response and closes with the rest
// unread (a reset, in CLOSE_WAIT: the server's next send gets EPIPE). The handler's
// write returns the error; the process takes no SIGPIPE and goes on serving.
TEST_F(Faults, BrokenPipeWhileWritingLargeResponse) {
  LeakCheck leaks("EPIPE on write");
  {
    RawConn c(server_.port());
    ASSERT_TRUE(c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n"));
    c.shutdown_write();
    ASSERT_TRUE(c.fill()) << "no response bytes";
  }
  ASSERT_TRUE(eventually([&] { return observed_.handlers_done.load() == 1; }))
      << "the handler still writes to a client that left";
  EXPECT_EQ(observed_.write_errors.load(), 1);
  std::error_code ec = observed_.error();
  EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << ec.message();
  EXPECT_LT(observed_.bytes_written.load(), static_cast<long>(kBigWrite) * kBigWrites);
  std::printf("[figure] EPIPE: handler's write failed with \"%s\" after %ld of %zu bytes\n",
              ec.message().c_str(), observed_.bytes_written.load(), kBigWrite * kBigWrites);
  settle();
  expect_serving();
  EXPECT_TRUE(leaks.verify());
}

// A handler that throws before writing: the client gets a 500 with Connection: close.
// One that throws after part of its response went out: the connection is closed, so
// the client sees a response cut short (a chunked body without its last chunk), never
// one that looks complete. Either way the process lives and serves, nothing leaks.
TEST_F(Faults, ThrowingHandlerGets500AndTheServerLives) {
  LeakCheck leaks("throwing handler");
  for (int i = 0; i < 20; ++i) {
    RawConn c(server_.port());
    ASSERT_TRUE(c.send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.read_response();
    ASSERT_TRUE(r) << "no reply to a request whose handler threw";
    EXPECT_EQ(r->status, 500);
    EXPECT_EQ(r->header("connection"), "close");
    EXPECT_TRUE(c.closed_by_peer());
  }
  {
    RawConn c(server_.port());
    ASSERT_TRUE(c.send("GET /throw-late HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_TRUE(c.closed_by_peer());
    const std::string& got = c.pending();
    EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
    EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
    EXPECT_NE(got.find("partial"), std::string::npos) << got;
    EXPECT_FALSE(got.ends_with("\r\n0\r\n\r\n")) << "the cut response looks complete: " << got;
  }
  EXPECT_EQ(observed_.handlers_done.load(), 0);
  settle();
  expect_serving();
  EXPECT_TRUE(leaks.verify());
}

// A handler that overflows its stack ends the process with a message naming the
// goroutine, as Go's "goroutine stack exceeds" fatal error does: a guard page below
// each stack turns the overflow into a fault the runtime reports, not memory silently
// overwritten.
TEST(FaultsDeathTest, HandlerStackOverflowEndsTheProcessNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        struct Recurse {
          // Unbounded unless the stack is: `limit` is never reached.
          static int down(int n, int limit) {
            volatile char pad[512];
            pad[0] = static_cast<char>(n);
            if (n == limit) return 0;
            return down(n + 1, limit) + pad[0];
          }
        };
        ServerOptions o;
        o.stack_size = 64 * 1024;
        TestServer server(
            [](Request&, ResponseWriter& w) { w.text(std::to_string(Recurse::down(0, -1))); }, o);
        RawConn c(server.port());
        c.send("GET /deep HTTP/1.1\r\nHost: x\r\n\r\n");
        c.read_response();
      },
      "goroutine [0-9]+: stack overflow");
}

// Handlers stuck in goro::blocking (a read of a pipe nobody writes: a backend that
// never answers) on a server with one P: each holds a thread, not the P, so requests
// on other connections are answered as before. Then the pipe is written, the stuck
// handlers answer, and nothing is left behind.
TEST(HandlerFaults, HandlersBlockedInBlockingCallsLeaveOthersServedOnOneP) {
  constexpr int kStuck = 4;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  static std::atomic<int> stuck;
  static int stuck_fd;
  stuck.store(0);
  stuck_fd = pipe_fds[0];
  ServerOptions o;
  o.error_log = [](std::string_view) {};
  TestServer server(
      [](Request& req, ResponseWriter& w) {
        if (req.path() == "/stuck") {
          stuck.fetch_add(1);
          char byte = 0;
          goro::blocking([&] { return ::read(stuck_fd, &byte, 1); });
          w.text("released");
        } else {
          w.text("hello");
        }
      },
      o, 1);
  // Measures round trips of plain requests on new connections.
  auto measure = [&](const char* when, int count) {
    std::vector<double> ms;
    for (int i = 0; i < count; ++i) {
      using Ms = std::chrono::duration<double, std::milli>;
      auto start = std::chrono::steady_clock::now();
      auto r = round_trip(server.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      ms.push_back(Ms(std::chrono::steady_clock::now() - start).count());
      if (!r || r->status != 200) {
        ADD_FAILURE() << when << ": request " << i << " not answered";
        return 0.0;
      }
    }
    std::sort(ms.begin(), ms.end());
    double p99 = ms[ms.size() * 99 / 100];
    std::printf(
        "[figure] 1 P, %s: %d requests on new connections, median %.3f ms, p99 %.3f ms, "
        "max %.3f ms\n",
        when, count, ms[ms.size() / 2], p99, ms.back());
    return p99;
  };
  measure("no handler stuck", 200);  // also starts what the baseline must hold (the accept loop)
  {
    LeakCheck leaks("blocked handlers");
    std::vector<std::unique_ptr<RawConn>> held;
    for (int i = 0; i < kStuck; ++i) {
      held.push_back(std::make_unique<RawConn>(server.port()));
      ASSERT_TRUE(held.back()->send("GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    ASSERT_TRUE(eventually([&] { return stuck.load() == kStuck; }))
        << stuck.load() << " handlers reached the blocking call";
    double p99 = measure("4 handlers stuck in goro::blocking", 200);
    EXPECT_LT(p99, 100.0) << "requests beside the stuck handlers waited";
    ASSERT_EQ(::write(pipe_fds[1], "xxxx", kStuck), kStuck);
    for (auto& c : held) {
      auto r = c->read_response();
      ASSERT_TRUE(r) << "a released handler did not answer";
      EXPECT_EQ(r->body, "released");
    }
  }
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

// A sanitizer's allocator keeps freed memory out of reuse for a while (ASan's quarantine
// holds up to 256 MiB), so RSS says nothing about leaks there: it is printed, not bound.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kRssMeaningful = false;
#else
constexpr bool kRssMeaningful = true;
#endif
#else
constexpr bool kRssMeaningful = true;
#endif

// Opens and closes `cycles` connections one after another, each closed at once (reset:
// with SO_LINGER 0), and checks that the server accepted and let go of each, with
// descriptors, goroutines and RSS back to where they were.
void churn(std::uint16_t port, int cycles, bool reset, const char* name) {
  constexpr long kRssBoundKib = 8 * 1024;
  std::uint64_t accepted_before = server_stats().connections_total;
  long rss_before = goro::test::resident_kib();
  LeakCheck leaks(name);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto start = std::chrono::steady_clock::now();
  int failed = 0;
  for (int i = 0; i < cycles; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) ++failed;
    if (reset) reset_on_close(fd);
    ::close(fd);
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(failed, 0) << "connects refused";
  // Every connection the kernel completed reaches the server (even one reset in the
  // accept queue, which accept() still returns on Linux)...
  bool all_accepted = eventually(
      [&] { return server_stats().connections_total - accepted_before >= std::uint64_t(cycles); });
  std::uint64_t accepted = server_stats().connections_total - accepted_before;
  if (!reset) {
    EXPECT_TRUE(all_accepted) << accepted << " of " << cycles << " accepted";
  }
  // ...and is closed there.
  EXPECT_TRUE(eventually([] { return server_stats().connections_open == 0; }))
      << server_stats().connections_open << " connections still open";
  bool no_leak = leaks.verify();
  long rss_after = goro::test::resident_kib();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();
  std::printf(
      "[figure] %s: %d cycles in %lld ms (%.0f/s), %llu accepted by the server; goroutines %d -> "
      "%d, descriptors %d -> %d; VmRSS %ld -> %ld KiB (+%ld KiB, bound %ld%s)\n",
      name, cycles, static_cast<long long>(ms), cycles * 1000.0 / static_cast<double>(ms + 1),
      static_cast<unsigned long long>(accepted), leaks.baseline_goroutines(), goro::num_goroutine(),
      leaks.baseline_descriptors(), goro::test::open_descriptors(), rss_before, rss_after,
      rss_after - rss_before, kRssBoundKib,
      kRssMeaningful ? "" : ", not applied under a sanitizer");
  EXPECT_TRUE(no_leak);
  if (kRssMeaningful) {
    EXPECT_LT(rss_after - rss_before, kRssBoundKib);
  }
}

TEST_F(Faults, TenThousandConnectCloseCycles) {
  churn(server_.port(), 10000, false, "connect/close churn");
  expect_serving();
}

TEST_F(Faults, TenThousandResetCycles) {
  churn(server_.port(), 10000, true, "RST churn");
  expect_serving();
}

}  // namespace
}  // namespace goro::http::test
