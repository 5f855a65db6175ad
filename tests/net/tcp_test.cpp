// TCP and Unix stream sockets: echo under load, deadlines, half-close, resets, close
// waking parked operations.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

// 1,000 client goroutines, each with its own connection, do 10 round trips of 64 bytes
// against one echo server, all at once.
TEST_P(ProcsTest, EchoThousandConcurrentClients) {
  raise_fd_limit(8192);
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln) << ln.error().message();
    EchoServer server(std::move(*ln));
    const std::string addr = server.addr();
    constexpr int kClients = 1000;
    constexpr int kRounds = 10;
    goro::WaitGroup wg;
    std::atomic<int> succeeded{0};
    for (int i = 0; i < kClients; ++i) {
      wg.add(1);
      goro::go([&, i] {
        auto c = dial("tcp", addr);
        if (!c) {
          ADD_FAILURE() << "dial: " << c.error().message();
          wg.done();
          return;
        }
        bool ok = true;
        for (int round = 0; round < kRounds && ok; ++round) {
          char out[64], in[64];
          std::memset(out, 'a' + (i + round) % 26, sizeof out);
          std::snprintf(out, sizeof out, "%d/%d", i, round);
          auto w = c->write(out, sizeof out);
          auto r = w ? c->read_full(in, sizeof in) : Result<std::size_t>(w.error());
          ok = r && *r == sizeof in && std::memcmp(in, out, sizeof in) == 0;
          if (!ok)
            ADD_FAILURE() << "client " << i << " round " << round << ": "
                          << (r ? "wrong data" : r.error().message());
        }
        if (ok) succeeded.fetch_add(1);
        c->close();
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(succeeded.load(), kClients);
    EXPECT_EQ(server.accepted(), kClients);
  });
}

// A reader and a writer goroutine on one connection at the same time, 4 MiB each way.
TEST_P(ProcsTest, FullDuplexBulkTransfer) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    auto c = dial("tcp", server.addr());
    ASSERT_TRUE(c) << c.error().message();
    constexpr std::size_t kTotal = 4 << 20;
    std::vector<unsigned char> sent(kTotal);
    for (std::size_t i = 0; i < kTotal; ++i)
      sent[i] = static_cast<unsigned char>(i * 7 + (i >> 12));
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      for (std::size_t off = 0; off < kTotal; off += 100'000) {
        std::size_t n = std::min<std::size_t>(100'000, kTotal - off);
        auto w = c->write(sent.data() + off, n);
        if (!w) {
          ADD_FAILURE() << w.error().message();
          break;
        }
      }
      wg.done();
    });
    std::vector<unsigned char> got(kTotal);
    auto r = c->read_full(got.data(), kTotal);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, kTotal);
    EXPECT_TRUE(got == sent);
    wg.wait();
  });
}

TEST(Tcp, WritevSendsEveryBufferInOrder) {
  run_with(2, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    auto c = dial("tcp", server.addr());
    ASSERT_TRUE(c);
    std::string a = "GET / HTTP/1.1\r\n", b, d(300'000, 'x');
    struct iovec iov[3] = {{a.data(), a.size()}, {b.data(), 0}, {d.data(), d.size()}};
    std::string got(a.size() + d.size(), '\0');
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      auto r = c->read_full(got.data(), got.size());
      EXPECT_TRUE(r && *r == got.size());
      wg.done();
    });
    auto w = c->writev(iov, 3);
    ASSERT_TRUE(w) << w.error().message();
    EXPECT_EQ(*w, a.size() + d.size());
    wg.wait();
    EXPECT_EQ(got, a + d);
  });
}

// Deadlines fire within slack_ms() (5 ms) of when they were set for (expect_on_time).
constexpr double kDeadlineMs = 50;
constexpr auto kDeadline = std::chrono::milliseconds(50);
constexpr int kSamples = 5;

TEST_P(ProcsTest, ReadDeadlineFires) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    auto c = dial("tcp", server.addr());
    ASSERT_TRUE(c);
    char buf[16];
    std::vector<double> samples;
    for (int i = 0; i < kSamples; ++i) {
      auto t0 = Clock::now();
      ASSERT_FALSE(c->set_read_deadline(t0 + kDeadline));
      auto r = c->read(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error(), errc::timeout);
      EXPECT_TRUE(is_timeout(r.error()));
      EXPECT_TRUE(r.error() == std::errc::timed_out);
    }
    expect_on_time(samples, kDeadlineMs);
    // An expired deadline fails at once, even with data waiting; a later one lifts it.
    ASSERT_TRUE(c->write("x", 1));
    goro::sleep(10ms);
    auto r = c->read(buf, sizeof buf);
    EXPECT_EQ(r.error(), errc::timeout);
    ASSERT_FALSE(c->set_read_deadline(no_deadline));
    r = c->read(buf, sizeof buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 1u);
  });
}

// A deadline set by another goroutine applies to a read already parked.
TEST_P(ProcsTest, DeadlineSetWhileParked) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    auto c = dial("tcp", server.addr());
    ASSERT_TRUE(c);
    std::vector<double> samples;
    for (int i = 0; i < 3; ++i) {
      ASSERT_FALSE(c->set_read_deadline(no_deadline));
      auto t0 = Clock::now();
      goro::WaitGroup wg;
      wg.add(1);
      goro::go([&] {
        goro::sleep(20ms);
        (void)c->set_read_deadline(t0 + 40ms);
        wg.done();
      });
      char buf[16];
      auto r = c->read(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      wg.wait();
      EXPECT_EQ(r.error(), errc::timeout);
    }
    expect_on_time(samples, 40);
  });
}

// The write deadline fires while the writer is parked on a full socket buffer.
TEST_P(ProcsTest, WriteDeadlineFiresOnFullBuffer) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    // A peer that accepts and never reads.
    Conn peer;
    goro::WaitGroup accepted;
    accepted.add(1);
    goro::go([&] {
      auto c = ln->accept();
      if (c) peer = std::move(*c);
      accepted.done();
    });
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    accepted.wait();
    ASSERT_TRUE(peer.is_open());
    ASSERT_FALSE(peer.set_read_buffer(16 * 1024));
    ASSERT_FALSE(c->set_write_buffer(16 * 1024));
    std::vector<char> big(8 << 20, 'w');  // far more than both buffers hold
    std::vector<double> samples;
    for (int i = 0; i < kSamples; ++i) {  // the buffers stay full: every write parks
      auto t0 = Clock::now();
      ASSERT_FALSE(c->set_write_deadline(t0 + kDeadline));
      auto w = c->write(big.data(), big.size());
      samples.push_back(ms_since(t0));
      ASSERT_FALSE(w);
      EXPECT_EQ(w.error(), errc::timeout);
    }
    expect_on_time(samples, kDeadlineMs);
  });
}

TEST_P(ProcsTest, AcceptDeadlineFires) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    std::vector<double> samples;
    for (int i = 0; i < kSamples; ++i) {
      auto t0 = Clock::now();
      ASSERT_FALSE(ln->set_deadline(t0 + kDeadline));
      auto c = ln->accept();
      samples.push_back(ms_since(t0));
      ASSERT_FALSE(c);
      EXPECT_EQ(c.error(), errc::timeout);
    }
    expect_on_time(samples, kDeadlineMs);
  });
}

// shutdown_write: the peer reads everything then end of stream, and can still answer.
TEST(Tcp, HalfClose) {
  run_with(2, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      auto c = ln->accept();
      if (!c) {
        ADD_FAILURE() << c.error().message();
        wg.done();
        return;
      }
      std::string got;
      char buf[64];
      for (;;) {
        auto n = c->read(buf, sizeof buf);
        if (!n) {
          ADD_FAILURE() << n.error().message();
          break;
        }
        if (*n == 0) break;  // the client's FIN
        got.append(buf, *n);
      }
      EXPECT_EQ(got, "request");
      EXPECT_TRUE(c->write("response", 8));
      c->close();
      wg.done();
    });
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->write("request", 7));
    ASSERT_FALSE(c->shutdown_write());
    char buf[64];
    auto r = c->read_full(buf, sizeof buf);  // stops at the server's close
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::string(buf, *r), "response");
    wg.wait();
  });
}

// SO_LINGER 0 then close sends RST: the peer's read fails with connection_reset.
TEST(Tcp, ResetByPeer) {
  run_with(2, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    auto s = ln->accept();
    ASSERT_TRUE(s);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(20ms);  // let the client park in read first
      EXPECT_FALSE(s->set_linger(0));
      s->close();
      wg.done();
    });
    char buf[16];
    auto r = c->read(buf, sizeof buf);
    wg.wait();
    ASSERT_FALSE(r) << "read " << *r << " bytes";
    EXPECT_EQ(r.error(), std::errc::connection_reset) << r.error().message();
  });
}

TEST(Tcp, DialRefused) {
  run_with(1, [] {
    // A port that was just free: bind, note it, close.
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    std::string addr = ln->addr().to_string();
    ln->close();
    auto c = dial("tcp", addr);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::errc::connection_refused) << c.error().message();
  });
}

// close() from a third goroutine wakes a parked reader and a parked writer at once.
TEST_P(ProcsTest, CloseWakesParkedReaderAndWriter) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    Conn peer;  // accepts, never reads or writes
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    auto a = ln->accept();
    ASSERT_TRUE(a);
    peer = std::move(*a);
    ASSERT_FALSE(c->set_write_buffer(16 * 1024));
    ASSERT_FALSE(peer.set_read_buffer(16 * 1024));
    goro::WaitGroup wg;
    std::error_code read_error, write_error;
    std::vector<char> big(8 << 20, 'w');  // far more than both buffers hold
    std::atomic<int> started{0};
    wg.add(2);
    goro::go([&] {
      char buf[16];
      started.fetch_add(1);
      auto r = c->read(buf, sizeof buf);
      read_error = r ? std::error_code() : r.error();
      wg.done();
    });
    goro::go([&] {
      started.fetch_add(1);
      auto w = c->write(big.data(), big.size());
      write_error = w ? std::error_code() : w.error();
      wg.done();
    });
    while (started.load() < 2) goro::sleep(1ms);
    goro::sleep(30ms);  // both park: nothing to read, the send buffer fills at once
    auto t0 = Clock::now();
    EXPECT_FALSE(c->close());
    wg.wait();
    EXPECT_LE(ms_since(t0), 4 * slack_ms());
    EXPECT_EQ(read_error, errc::closed);
    EXPECT_EQ(write_error, errc::closed);
    EXPECT_EQ(c->close(), errc::closed);  // a second close
    char buf[4];
    EXPECT_EQ(c->read(buf, 4).error(), errc::closed);
  });
}

TEST_P(ProcsTest, ListenerCloseWakesAccept) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    goro::WaitGroup wg;
    std::error_code accept_error;
    Clock::time_point woke;
    wg.add(1);
    goro::go([&] {
      auto c = ln->accept();
      accept_error = c ? std::error_code() : c.error();
      woke = Clock::now();
      wg.done();
    });
    goro::sleep(30ms);
    auto t0 = Clock::now();
    EXPECT_FALSE(ln->close());
    wg.wait();
    EXPECT_EQ(accept_error, errc::closed);
    EXPECT_LE((std::chrono::duration<double, std::milli>(woke - t0).count()), 4 * slack_ms());
    EXPECT_EQ(ln->accept().error(), errc::closed);
  });
}

// Go's Close waits until no call is inside the socket any more; so does ours, which
// makes destroying the object right after close() safe while a goroutine is just
// waking up from accept() or read() on it. (Freed too early, the waking call's unlock
// hits freed memory: ASan reports it, and the FdMutex check aborts.)
TEST_P(ProcsTest, DestroyRightAfterCloseWhileCallsWakeUp) {
  run_with(GetParam(), [] {
    for (int round = 0; round < 200; ++round) {
      auto ln = std::make_unique<Listener>(std::move(*listen("tcp", "127.0.0.1:0")));
      auto addr = ln->addr();
      auto client = dial("tcp", addr.to_string());
      ASSERT_TRUE(client);
      auto accepted = ln->accept();
      ASSERT_TRUE(accepted);
      auto conn = std::make_unique<Conn>(std::move(*accepted));
      goro::WaitGroup wg;
      wg.add(2);
      goro::go([&wg, l = ln.get()] {
        auto c = l->accept();  // only the result is looked at once it returns
        EXPECT_EQ(c.error(), errc::closed);
        wg.done();
      });
      goro::go([&wg, c = conn.get()] {
        char buf[16];
        auto n = c->read(buf, sizeof buf);
        EXPECT_EQ(n.error(), errc::closed);
        wg.done();
      });
      goro::sleep(1ms);  // both are parked inside their calls now; close wakes them, and
                         // with one P neither has run its way out before close returns
      EXPECT_FALSE(ln->close());
      EXPECT_FALSE(ln->is_open());
      EXPECT_EQ(ln->fd(), -1);
      ln.reset();
      EXPECT_FALSE(conn->close());
      EXPECT_EQ(conn->fd(), -1);
      conn.reset();
      wg.wait();
    }
  });
}

TEST(Tcp, WritevRejectsANegativeCount) {
  run_with(1, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    iovec one{const_cast<char*>("x"), 1};
    EXPECT_EQ(c->writev(&one, -1).error(), std::errc::invalid_argument);
    EXPECT_TRUE(c->writev(&one, 1));  // the connection still works
  });
}

// close() with SO_LINGER set waits in the kernel for unsent data: that wait must not
// hold the only P, and must not be cut short.
TEST(Tcp, LingeringCloseDoesNotStallOtherGoroutines) {
  run_with(1, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    auto peer = ln->accept();  // never reads: what c writes stays unsent
    ASSERT_TRUE(peer);
    ASSERT_FALSE(c->set_write_buffer(4096));
    ASSERT_FALSE(c->set_write_deadline(deadline_after(200ms)));
    std::string block(1 << 20, 'x');
    (void)c->write(block.data(), block.size());  // fills the buffers, then times out
    ASSERT_FALSE(c->set_linger(1));
    std::atomic<bool> closed{false};
    double close_ms = 0;
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      auto t0 = Clock::now();
      (void)c->close();
      close_ms = ms_since(t0);
      closed = true;
      wg.done();
    });
    int ticks = 0;
    while (!closed) {
      goro::sleep(10ms);
      ++ticks;
    }
    wg.wait();
    EXPECT_GE(close_ms, 900.0) << "the linger was cut short";
    EXPECT_GE(ticks, 50) << "the lingering close held the only P";
  });
}

TEST(Tcp, AddressesAndOptions) {
  run_with(1, [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EXPECT_EQ(ln->addr().network(), "tcp");
    EXPECT_EQ(ln->addr().host(), "127.0.0.1");
    EXPECT_NE(ln->addr().port(), 0);
    auto c = dial("tcp4", ln->addr().to_string());
    ASSERT_TRUE(c);
    auto s = ln->accept();
    ASSERT_TRUE(s);
    EXPECT_EQ(c->remote_addr(), ln->addr());
    EXPECT_EQ(s->local_addr(), ln->addr());
    EXPECT_EQ(s->remote_addr(), c->local_addr());
    int nodelay = 0;
    socklen_t len = sizeof nodelay;
    ASSERT_EQ(getsockopt(s->fd(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
    EXPECT_NE(nodelay, 0);
    EXPECT_FALSE(c->set_nodelay(false));
    EXPECT_FALSE(c->set_keepalive(true, 30s));
    int fl = fcntl(c->fd(), F_GETFL);
    EXPECT_NE(fl & O_NONBLOCK, 0);
    EXPECT_NE(fcntl(c->fd(), F_GETFD) & FD_CLOEXEC, 0);
  });
}

TEST(Tcp, Ipv6Loopback) {
  run_with(1, [] {
    auto ln = listen("tcp6", "[::1]:0");
    if (!ln) GTEST_SKIP() << "no IPv6 loopback: " << ln.error().message();
    EchoServer server(std::move(*ln));
    EXPECT_EQ(server.addr().substr(0, 6), "[::1]:");
    auto c = dial("tcp", server.addr());
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_TRUE(c->write("six", 3));
    char buf[3];
    auto r = c->read_full(buf, 3);
    ASSERT_TRUE(r);
    EXPECT_EQ(std::string(buf, 3), "six");
  });
}

// ":port" on "tcp" listens on IPv4 and IPv6 (one dual-stack socket).
TEST(Tcp, WildcardListenTakesBothFamilies) {
  run_with(1, [] {
    auto ln = listen("tcp", ":0");
    ASSERT_TRUE(ln) << ln.error().message();
    std::uint16_t port = ln->addr().port();
    EchoServer server(std::move(*ln));
    auto c4 = dial("tcp", join_host_port("127.0.0.1", port));
    EXPECT_TRUE(c4) << c4.error().message();
    auto c6 = dial("tcp", join_host_port("::1", port));
    if (c6 || c6.error() != std::errc::address_family_not_supported) {
      EXPECT_TRUE(c6) << c6.error().message();
    }
  });
}

TEST(Unix, EchoAndCleanup) {
  run_with(2, [] {
    char dir[] = "/tmp/goro-net-unix-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string path = std::string(dir) + "/echo.sock";
    auto ln = listen("unix", path);
    ASSERT_TRUE(ln) << ln.error().message();
    EXPECT_EQ(ln->addr().network(), "unix");
    EXPECT_EQ(ln->addr().to_string(), path);
    {
      EchoServer server(std::move(*ln));
      goro::WaitGroup wg;
      for (int i = 0; i < 50; ++i) {
        wg.add(1);
        goro::go([&, i] {
          auto c = dial("unix", path);
          if (!c) {
            ADD_FAILURE() << c.error().message();
            wg.done();
            return;
          }
          std::string msg = "unix-" + std::to_string(i);
          EXPECT_TRUE(c->write(msg.data(), msg.size()));
          std::string got(msg.size(), '\0');
          auto r = c->read_full(got.data(), got.size());
          EXPECT_TRUE(r && got == msg);
          wg.done();
        });
      }
      wg.wait();
    }
    EXPECT_NE(access(path.c_str(), F_OK), 0) << "socket file left behind";
    rmdir(dir);

    // The abstract namespace: no file at all.
    std::string name = "@goro-net-test-" + std::to_string(getpid());
    auto abs = listen("unix", name);
    ASSERT_TRUE(abs) << abs.error().message();
    EchoServer server(std::move(*abs));
    auto c = dial("unix", name);
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_TRUE(c->write("abc", 3));
    char buf[3];
    EXPECT_TRUE(c->read_full(buf, 3));
  });
}

INSTANTIATE_TEST_SUITE_P(Net, ProcsTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::net::testing
