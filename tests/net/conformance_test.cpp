// Conformance with what a user of Go's net package expects: deadlines changed while a
// goroutine is parked, deadlines in the past, half-close and end of stream, resets told
// apart from the other errors, dial timeouts, IPv6, abstract Unix sockets, UDP, DNS of
// localhost, socket options, large writes, and TLS deadlines, close and bulk data.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <goro/scheduler/chan.hpp>

#include "net_test_util.hpp"
#include "test_certs.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

class Conformance : public ProcsTest {};

// A connected pair over loopback TCP: client (dialed) and server (accepted).
struct Pair {
  Listener ln;
  Conn client;
  Conn server;
};

Pair tcp_pair(std::string_view address = "127.0.0.1:0") {
  Pair p;
  auto ln = listen("tcp", address);
  EXPECT_TRUE(ln) << ln.error().message();
  if (!ln) return p;
  p.ln = std::move(*ln);
  auto c = dial("tcp", p.ln.addr().to_string());
  EXPECT_TRUE(c) << c.error().message();
  if (!c) return p;
  p.client = std::move(*c);
  auto s = p.ln.accept();
  EXPECT_TRUE(s) << s.error().message();
  if (s) p.server = std::move(*s);
  return p;
}

int sockopt_int(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  if (::getsockopt(fd, level, name, &v, &len) != 0) return -1;
  return v;
}

// A deterministic pattern, so a reordered or dropped byte is caught.
std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

// Reads from c until `want` bytes came, the stream ended or a read failed; a failure
// is appended to what was read as " <message>", so one comparison shows both.
std::string read_at_least(Conn& c, std::size_t want) {
  std::string got;
  char buf[64];
  while (got.size() < want) {
    auto n = c.read(buf, sizeof buf);
    if (!n) return got + " <" + n.error().message() + ">";
    if (*n == 0) break;
    got.append(buf, *n);
  }
  return got;
}

// Waits (parking, at most 2 s) until s.peer_closed() is true; returns whether it was.
// A FIN or reset takes a moment to arrive even on loopback.
bool peer_closed_soon(const Stream& s) {
  for (int i = 0; i < 2000; ++i) {
    if (s.peer_closed()) return true;
    goro::sleep(1ms);
  }
  return false;
}

// --- Listener ------------------------------------------------------------------------

// Several goroutines wait in accept() (one parked in the poller, the others on the
// listener's read lock); close() from another goroutine ends every one with closed.
TEST_P(Conformance, ListenerCloseWakesEveryParkedAccept) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    constexpr int kAcceptors = 4;
    goro::Chan<std::error_code> results(kAcceptors);
    for (int i = 0; i < kAcceptors; ++i) {
      goro::go([&ln, results]() mutable {
        auto c = ln->accept();
        results.send(c ? std::error_code() : c.error());
      });
    }
    goro::sleep(30ms);  // let them park; the test holds whether or not they have
    auto t0 = Clock::now();
    EXPECT_FALSE(ln->close());
    for (int i = 0; i < kAcceptors; ++i) {
      auto ec = results.recv();
      ASSERT_TRUE(ec.has_value());
      EXPECT_EQ(*ec, errc::closed) << ec->message();
    }
    EXPECT_LT(ms_since(t0), 1000);
    EXPECT_EQ(ln->close(), errc::closed);  // a second close
  });
}

// An accept deadline extended while accept() is parked: no timeout at the old one.
TEST_P(Conformance, AcceptDeadlineExtendedWhileParked) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto t0 = Clock::now();
    // The old deadline is far enough from the change (140 ms) that a helper goroutine
    // late on a loaded machine or under a sanitizer still moves it in time.
    ASSERT_FALSE(ln->set_deadline(t0 + 150ms));
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(10ms);
      EXPECT_FALSE(ln->set_deadline(t0 + 400ms));
      wg.done();
    });
    auto c = ln->accept();
    double took = ms_since(t0);
    wg.wait();
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), errc::timeout);
    EXPECT_GE(took, 399.5) << "the old deadline fired";
    EXPECT_LT(took, 1400);
  });
}

// --- Deadlines ---------------------------------------------------------------------

// A read deadline extended while the reader is parked takes effect: data that arrives
// after the old deadline but before the new one is read.
TEST_P(Conformance, ReadDeadlineExtendedWhileParked) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    auto t0 = Clock::now();
    ASSERT_FALSE(p.client.set_read_deadline(t0 + 150ms));  // (margins as in the accept test)
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(10ms);
      EXPECT_FALSE(p.client.set_read_deadline(t0 + 2s));
      goro::sleep(200ms);  // past the old deadline
      EXPECT_TRUE(p.server.write("x", 1));
      wg.done();
    });
    char buf[8];
    auto r = p.client.read(buf, sizeof buf);
    double took = ms_since(t0);
    wg.wait();
    ASSERT_TRUE(r) << r.error().message() << " after " << took << " ms";
    EXPECT_EQ(*r, 1u);
    EXPECT_GE(took, 209.0);

    // Extended with nothing arriving: it times out at the new deadline only.
    std::vector<double> samples;
    for (int i = 0; i < 3; ++i) {
      auto t1 = Clock::now();
      ASSERT_FALSE(p.client.set_read_deadline(t1 + 150ms));
      wg.add(1);
      goro::go([&] {
        goro::sleep(10ms);
        EXPECT_FALSE(p.client.set_read_deadline(t1 + 250ms));
        wg.done();
      });
      auto r2 = p.client.read(buf, sizeof buf);
      samples.push_back(ms_since(t1));
      wg.wait();
      ASSERT_FALSE(r2);
      EXPECT_EQ(r2.error(), errc::timeout);
    }
    expect_on_time(samples, 250);
  });
}

// A far deadline shortened while the reader is parked fires at the new time.
TEST_P(Conformance, ReadDeadlineShortenedWhileParked) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    std::vector<double> samples;
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      ASSERT_FALSE(p.client.set_read_deadline(t0 + 10s));
      goro::WaitGroup wg;
      wg.add(1);
      goro::go([&] {
        goro::sleep(10ms);
        EXPECT_FALSE(p.client.set_read_deadline(t0 + 100ms));
        wg.done();
      });
      char buf[8];
      auto r = p.client.read(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      wg.wait();
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error(), errc::timeout);
    }
    expect_on_time(samples, 100);
  });
}

// Clearing the deadline while parked: the read waits for data instead of timing out.
TEST_P(Conformance, ReadDeadlineClearedWhileParked) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    auto t0 = Clock::now();
    ASSERT_FALSE(p.client.set_read_deadline(t0 + 150ms));
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(10ms);
      EXPECT_FALSE(p.client.set_read_deadline(no_deadline));
      goro::sleep(200ms);  // past the old deadline
      EXPECT_TRUE(p.server.write("y", 1));
      wg.done();
    });
    char buf[8];
    auto r = p.client.read(buf, sizeof buf);
    wg.wait();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 1u);
  });
}

// A deadline in the past fails reads and writes at once, even with data waiting (Go's
// rule); a later deadline (or none) makes the connection usable again.
TEST_P(Conformance, DeadlineInThePast) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    ASSERT_TRUE(p.server.write("ab", 2));
    char buf[8];
    // Make sure the bytes have arrived: read one with no deadline.
    auto first = p.client.read(buf, 1);
    ASSERT_TRUE(first);
    ASSERT_EQ(*first, 1u);

    ASSERT_FALSE(p.client.set_deadline(Clock::now() - 1s));
    auto t0 = Clock::now();
    auto r = p.client.read(buf, sizeof buf);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::timeout);
    EXPECT_TRUE(is_timeout(r.error()));
    auto w = p.client.write("z", 1);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), errc::timeout);
    EXPECT_LT(ms_since(t0), 100);

    ASSERT_FALSE(p.client.set_deadline(Clock::now() + 5s));
    r = p.client.read(buf, sizeof buf);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::string(buf, *r), "b");
    ASSERT_FALSE(p.client.set_deadline(no_deadline));
    EXPECT_TRUE(p.client.write("z", 1));
    r = p.server.read(buf, sizeof buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(std::string(buf, *r), "z");
  });
}

// A deadline set in the past by another goroutine wakes a parked reader at once.
TEST_P(Conformance, PastDeadlineWakesParkedReader) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    std::vector<double> samples;
    for (int i = 0; i < 3; ++i) {
      ASSERT_FALSE(p.client.set_read_deadline(no_deadline));
      auto t0 = Clock::now();
      goro::WaitGroup wg;
      wg.add(1);
      goro::go([&] {
        goro::sleep(20ms);
        EXPECT_FALSE(p.client.set_read_deadline(Clock::now() - 1ms));
        wg.done();
      });
      char buf[8];
      auto r = p.client.read(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      wg.wait();
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error(), errc::timeout);
    }
    expect_on_time(samples, 20);
  });
}

// --- Half-close, end of stream, reset ----------------------------------------------

// shutdown_write: the peer reads our bytes then end of stream (again and again, at
// once), answers with more than a socket buffer holds, and we still read all of it.
TEST_P(Conformance, HalfCloseThenReadLargeAnswer) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    const auto answer = pattern(3 << 20, 7);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      std::string got;
      char buf[64];
      for (;;) {
        auto n = p.server.read(buf, sizeof buf);
        if (!n) {
          ADD_FAILURE() << n.error().message();
          break;
        }
        if (*n == 0) break;
        got.append(buf, *n);
      }
      EXPECT_EQ(got, "request");
      for (int i = 0; i < 3; ++i) {  // end of stream is sticky and does not block
        auto n = p.server.read(buf, sizeof buf);
        EXPECT_TRUE(n && *n == 0);
      }
      auto w = p.server.write(answer.data(), answer.size());
      EXPECT_TRUE(w) << w.error().message();
      EXPECT_FALSE(p.server.close());
      wg.done();
    });
    ASSERT_TRUE(p.client.write("request", 7));
    ASSERT_FALSE(p.client.shutdown_write());
    auto w = p.client.write("more", 4);  // writing after shutdown_write fails
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), std::errc::broken_pipe) << w.error().message();
    std::vector<unsigned char> got(answer.size() + 16);
    auto r = p.client.read_full(got.data(), got.size());
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(*r, answer.size());
    got.resize(*r);
    EXPECT_TRUE(got == answer);
    wg.wait();
  });
}

// peer_closed() tells an ended or reset connection from a quiet one, without reading:
// data waiting is not a close, a half-close is, and what came before it is still read.
TEST_P(Conformance, PeerClosedSeesHalfCloseAndReset) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    EXPECT_FALSE(p.client.peer_closed());
    ASSERT_TRUE(p.server.write("bye", 3));
    goro::sleep(20ms);
    EXPECT_FALSE(p.client.peer_closed()) << "unread data is not a close";
    ASSERT_FALSE(p.server.shutdown_write());
    EXPECT_TRUE(peer_closed_soon(p.client));
    EXPECT_FALSE(p.server.peer_closed()) << "our half-close is not the peer's";
    EXPECT_EQ(read_at_least(p.client, 4), "bye");
    EXPECT_FALSE(p.client.close());
    EXPECT_FALSE(p.client.peer_closed()) << "a closed Conn cannot tell";

    Pair q = tcp_pair();
    ASSERT_TRUE(q.client.is_open() && q.server.is_open());
    ASSERT_FALSE(q.server.set_linger(0));
    ASSERT_FALSE(q.server.close());  // a reset
    EXPECT_TRUE(peer_closed_soon(q.client));
  });
}

// The peer sends a few bytes and closes: we read them, then 0, then 0 again.
TEST_P(Conformance, DataThenEofThenEofAgain) {
  run_with(GetParam(), [] {
    for (int round = 0; round < 20; ++round) {
      Pair p = tcp_pair();
      ASSERT_TRUE(p.client.is_open() && p.server.is_open());
      ASSERT_TRUE(p.server.write("abc", 3));
      ASSERT_FALSE(p.server.close());
      std::string got;
      char buf[64];
      for (;;) {
        auto n = p.client.read(buf, round % 2 == 0 ? sizeof buf : 3);
        ASSERT_TRUE(n) << n.error().message();
        if (*n == 0) break;
        got.append(buf, *n);
      }
      EXPECT_EQ(got, "abc");
      auto again = p.client.read(buf, sizeof buf);
      ASSERT_TRUE(again);
      EXPECT_EQ(*again, 0u);
    }
  });
}

// TCP urgent data ends a read early, at the urgent mark, with the rest of the stream
// already queued and no edge to come: the short read proves nothing. A telnet client's
// interrupt (and any peer, on purpose) sends urgent data; the rest must still be read.
TEST_P(Conformance, UrgentDataDoesNotStallTheRestOfTheStream) {
  run_with(GetParam(), [] {
    for (int round = 0; round < 5; ++round) {
      Pair p = tcp_pair();
      ASSERT_TRUE(p.client.is_open() && p.server.is_open());
      ASSERT_FALSE(p.server.set_read_deadline(Clock::now() + 2s));
      goro::Chan<std::string> done(1);
      goro::go([&] {
        // Parked in read before anything arrives, so one readiness edge covers all of
        // it and this reader consumes that edge.
        done.send(read_at_least(p.server, 6));
      });
      goro::sleep(20ms);
      const int fd = p.client.fd();
      ASSERT_EQ(::send(fd, "abc", 3, 0), 3);
      ASSERT_EQ(::send(fd, "X", 1, MSG_OOB), 1);  // out of band: not part of the stream
      ASSERT_EQ(::send(fd, "def", 3, 0), 3);
      EXPECT_EQ(done.recv().value_or("?"), "abcdef") << "round " << round;
    }
  });
}

// shutdown_read: later reads return 0 rather than blocking.
TEST(ConformanceTcp, ShutdownReadMakesReadsReturnZero) {
  run_with(2, [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    ASSERT_TRUE(p.server.write("x", 1));
    char buf[8];
    auto r = p.client.read(buf, sizeof buf);  // a short read
    ASSERT_TRUE(r);
    ASSERT_FALSE(p.client.shutdown_read());
    ASSERT_FALSE(p.client.set_read_deadline(Clock::now() + 2s));
    r = p.client.read(buf, sizeof buf);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 0u);
  });
}

// A reset is connection_reset: not closed, not a timeout, not refused; writes then
// fail too; our own close still succeeds once, then reports closed.
TEST_P(Conformance, ResetIsDistinguishable) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(20ms);
      EXPECT_FALSE(p.server.set_linger(0));
      EXPECT_FALSE(p.server.close());
      wg.done();
    });
    char buf[16];
    auto r = p.client.read(buf, sizeof buf);
    wg.wait();
    ASSERT_FALSE(r);
    std::error_code ec = r.error();
    EXPECT_EQ(ec, std::errc::connection_reset) << ec.message();
    EXPECT_FALSE(is_closed(ec));
    EXPECT_FALSE(is_timeout(ec));
    EXPECT_NE(ec, std::errc::connection_refused);
    auto w = p.client.write("x", 1);
    ASSERT_FALSE(w);
    EXPECT_TRUE(w.error() == std::errc::broken_pipe || w.error() == std::errc::connection_reset)
        << w.error().message();
    EXPECT_FALSE(p.client.close());
    EXPECT_EQ(p.client.close(), errc::closed);
    r = p.client.read(buf, sizeof buf);
    ASSERT_FALSE(r);
    EXPECT_TRUE(is_closed(r.error())) << r.error().message();
  });
}

// A writer parked on a full buffer is woken by the peer's reset with an error.
TEST_P(Conformance, ResetWakesParkedWriter) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    ASSERT_FALSE(p.server.set_read_buffer(16 * 1024));
    ASSERT_FALSE(p.client.set_write_buffer(16 * 1024));
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(50ms);  // let the writer fill both buffers and park
      EXPECT_FALSE(p.server.set_linger(0));
      EXPECT_FALSE(p.server.close());
      wg.done();
    });
    ASSERT_FALSE(p.client.set_write_deadline(Clock::now() + 10s));
    std::vector<char> big(32 << 20, 'r');
    auto t0 = Clock::now();
    auto w = p.client.write(big.data(), big.size());
    double took = ms_since(t0);
    wg.wait();
    ASSERT_FALSE(w);
    EXPECT_TRUE(w.error() == std::errc::connection_reset || w.error() == std::errc::broken_pipe)
        << w.error().message();
    EXPECT_LT(took, 5000) << "the writer was not woken by the reset";
  });
}

// --- Close while others wait -------------------------------------------------------

// Two readers on one Conn (one parked in the poller, one waiting for the read lock)
// and a writer on a full buffer: close() from a fourth goroutine ends all three.
TEST_P(Conformance, CloseWakesQueuedReadersAndWriter) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    ASSERT_FALSE(p.client.set_write_buffer(16 * 1024));
    ASSERT_FALSE(p.server.set_read_buffer(16 * 1024));
    goro::Chan<std::error_code> results(3);
    for (int i = 0; i < 2; ++i) {
      goro::go([&p, results]() mutable {
        char buf[8];
        auto r = p.client.read(buf, sizeof buf);
        results.send(r ? std::error_code() : r.error());
      });
    }
    std::vector<char> big(16 << 20, 'w');
    goro::go([&p, &big, results]() mutable {
      auto w = p.client.write(big.data(), big.size());
      results.send(w ? std::error_code() : w.error());
    });
    goro::sleep(30ms);
    auto t0 = Clock::now();
    EXPECT_FALSE(p.client.close());
    for (int i = 0; i < 3; ++i) {
      auto ec = results.recv();
      ASSERT_TRUE(ec.has_value());
      EXPECT_EQ(*ec, errc::closed) << ec->message();
    }
    EXPECT_LT(ms_since(t0), 1000);
  });
}

// --- Dial ----------------------------------------------------------------------------

TEST(ConformanceTcp, DialRefusedIsNotTimeoutOrClosed) {
  run_with(1, [] {
    for (const char* any : {"127.0.0.1:0", "[::1]:0"}) {
      auto ln = listen("tcp", any);
      if (!ln) continue;  // no IPv6 loopback
      std::string addr = ln->addr().to_string();
      ln->close();
      auto c = dial("tcp", addr, 2s);
      ASSERT_FALSE(c) << addr;
      EXPECT_EQ(c.error(), std::errc::connection_refused) << addr << ": " << c.error().message();
      EXPECT_FALSE(is_timeout(c.error()));
      EXPECT_FALSE(is_closed(c.error()));
      EXPECT_NE(c.error().message().find("refused"), std::string::npos) << c.error().message();
    }
  });
}

// A listener whose accept queue is full drops SYNs: dial with a timeout gives up on
// time with errc::timeout.
TEST(ConformanceTcp, DialTimeout) {
  run_with(2, [] {
    ListenOptions opts;
    opts.backlog = 0;
    auto ln = listen("tcp", "127.0.0.1:0", opts);
    ASSERT_TRUE(ln);
    std::string addr = ln->addr().to_string();
    std::vector<Conn> fillers;
    // Fill the accept queue; a dial that has not connected within 150 ms is the one.
    for (int i = 0; i < 8; ++i) {
      auto t0 = Clock::now();
      auto c = dial("tcp", addr, 150ms);
      double took = ms_since(t0);
      if (!c) {
        EXPECT_EQ(c.error(), errc::timeout) << c.error().message();
        EXPECT_TRUE(is_timeout(c.error()));
        EXPECT_GE(took, 149.5);
        EXPECT_LT(took, 1150);
        return;
      }
      fillers.push_back(std::move(*c));
    }
    GTEST_SKIP() << "the kernel kept accepting connections into a full queue";
  });
}

// --- IPv6, Unix -------------------------------------------------------------------

TEST_P(Conformance, Ipv6LoopbackAddresses) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "[::1]:0");
    if (!ln) GTEST_SKIP() << "no IPv6 loopback: " << ln.error().message();
    EXPECT_EQ(ln->addr().family(), AF_INET6);
    std::string addr = ln->addr().to_string();
    EXPECT_EQ(addr.rfind("[::1]:", 0), 0u) << addr;
    EXPECT_NE(ln->addr().port(), 0);
    EchoServer server(std::move(*ln));
    auto c = dial("tcp6", addr);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->remote_addr().to_string(), addr);
    EXPECT_EQ(c->local_addr().host(), "::1");
    ASSERT_TRUE(c->write("six", 3));
    char buf[3];
    auto r = c->read_full(buf, 3);
    ASSERT_TRUE(r);
    EXPECT_EQ(std::string(buf, *r), "six");
    // tcp4 cannot reach an IPv6 literal.
    EXPECT_FALSE(dial("tcp4", addr));
  });
}

// A Unix stream read stops after a message that carried descriptors (SCM_RIGHTS),
// with what follows already queued and no edge to come: a short read proves nothing
// there, unlike on TCP.
TEST_P(Conformance, UnixReadAfterPassedDescriptorDoesNotStall) {
  run_with(GetParam(), [] {
    std::string name = "@goro-scm-" + std::to_string(::getpid()) + "-" + std::to_string(GetParam());
    auto ln = listen("unix", name);
    ASSERT_TRUE(ln) << ln.error().message();
    auto client = dial("unix", name);
    ASSERT_TRUE(client) << client.error().message();
    auto server = ln->accept();
    ASSERT_TRUE(server) << server.error().message();
    ASSERT_FALSE(server->set_read_deadline(Clock::now() + 2s));
    goro::Chan<std::string> done(1);
    goro::go([&] {
      // Parked before anything arrives: one readiness edge covers both messages.
      done.send(read_at_least(*server, 2));
    });
    goro::sleep(20ms);
    // "A" with a descriptor attached, then "B", from a raw sendmsg.
    int passed = ::dup(STDIN_FILENO);
    ASSERT_GE(passed, 0);
    char a = 'A';
    struct iovec iov = {&a, 1};
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &passed, sizeof(int));
    ASSERT_EQ(::sendmsg(client->fd(), &msg, 0), 1);
    ::close(passed);
    ASSERT_EQ(::send(client->fd(), "B", 1, 0), 1);
    EXPECT_EQ(done.recv().value_or("?"), "AB");
  });
}

TEST_P(Conformance, UnixAbstractSocket) {
  run_with(GetParam(), [] {
    std::string name =
        "@goro-conformance-" + std::to_string(::getpid()) + "-" + std::to_string(GetParam());
    auto ln = listen("unix", name);
    ASSERT_TRUE(ln) << ln.error().message();
    EXPECT_EQ(ln->addr().to_string(), name);
    EXPECT_EQ(ln->addr().network(), "unix");
    EchoServer server(std::move(*ln));
    auto c = dial("unix", name);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->remote_addr().to_string(), name);
    const auto data = pattern(1 << 20, 3);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      EXPECT_TRUE(c->write(data.data(), data.size()));
      wg.done();
    });
    std::vector<unsigned char> got(data.size());
    auto r = c->read_full(got.data(), got.size());
    wg.wait();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_TRUE(got == data);
    c->close();
    server.stop();
    auto again = dial("unix", name);
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), std::errc::connection_refused) << again.error().message();
  });
}

// A path socket: the file exists while listening, is removed by close(), and the path
// can be listened on again.
TEST(ConformanceUnix, PathSocketRelisten) {
  run_with(1, [] {
    std::string path = "/tmp/goro-conformance-" + std::to_string(::getpid()) + ".sock";
    for (int i = 0; i < 2; ++i) {
      auto ln = listen("unix", path);
      ASSERT_TRUE(ln) << i << ": " << ln.error().message();
      EXPECT_EQ(::access(path.c_str(), F_OK), 0);
      auto c = dial("unix", path);
      ASSERT_TRUE(c) << c.error().message();
      auto s = ln->accept();
      ASSERT_TRUE(s);
      ASSERT_TRUE(c->write("u", 1));
      char b;
      auto r = s->read(&b, 1);
      ASSERT_TRUE(r);
      EXPECT_EQ(b, 'u');
      EXPECT_FALSE(ln->close());
      EXPECT_NE(::access(path.c_str(), F_OK), 0) << "socket file left behind";
    }
  });
}

// --- UDP ---------------------------------------------------------------------------

TEST_P(Conformance, UdpBothFamiliesAndDialedConn) {
  run_with(GetParam(), [] {
    for (const char* any : {"127.0.0.1:0", "[::1]:0"}) {
      auto srv = listen_packet("udp", any);
      if (!srv) continue;  // no IPv6
      Addr saddr = srv->local_addr();
      ASSERT_NE(saddr.port(), 0);
      auto cli = listen_packet("udp", any);
      ASSERT_TRUE(cli);
      auto w = cli->write_to("ping", 4, saddr);
      ASSERT_TRUE(w) << w.error().message();
      char buf[64];
      ASSERT_FALSE(srv->set_read_deadline(Clock::now() + 2s));
      auto r = srv->read_from(buf, sizeof buf);
      ASSERT_TRUE(r) << r.error().message();
      EXPECT_EQ(std::string(buf, r->first), "ping");
      EXPECT_EQ(r->second, cli->local_addr()) << r->second.to_string();
      EXPECT_EQ(r->second.network(), "udp");
      ASSERT_TRUE(srv->write_to("pong", 4, r->second));
      ASSERT_FALSE(cli->set_read_deadline(Clock::now() + 2s));
      auto back = cli->read_from(buf, sizeof buf);
      ASSERT_TRUE(back);
      EXPECT_EQ(std::string(buf, back->first), "pong");
      EXPECT_EQ(back->second, saddr);

      // A datagram longer than the buffer is truncated, and the rest is dropped.
      ASSERT_TRUE(cli->write_to("0123456789", 10, saddr));
      ASSERT_TRUE(cli->write_to("next", 4, saddr));
      r = srv->read_from(buf, 4);
      ASSERT_TRUE(r);
      EXPECT_EQ(std::string(buf, r->first), "0123");
      r = srv->read_from(buf, sizeof buf);
      ASSERT_TRUE(r);
      EXPECT_EQ(std::string(buf, r->first), "next");

      // dial("udp"): a connected Conn.
      auto dc = dial("udp", saddr.to_string());
      ASSERT_TRUE(dc) << dc.error().message();
      ASSERT_TRUE(dc->write("dial", 4));
      r = srv->read_from(buf, sizeof buf);
      ASSERT_TRUE(r);
      EXPECT_EQ(std::string(buf, r->first), "dial");
      EXPECT_EQ(r->second, dc->local_addr());
      ASSERT_TRUE(srv->write_to("back", 4, r->second));
      ASSERT_FALSE(dc->set_read_deadline(Clock::now() + 2s));
      auto n = dc->read(buf, sizeof buf);
      ASSERT_TRUE(n) << n.error().message();
      EXPECT_EQ(std::string(buf, *n), "back");
    }
  });
}

TEST_P(Conformance, UdpReadFromDeadlineAndClose) {
  run_with(GetParam(), [] {
    auto pc = listen_packet("udp", "127.0.0.1:0");
    ASSERT_TRUE(pc);
    std::vector<double> samples;
    char buf[16];
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      ASSERT_FALSE(pc->set_read_deadline(t0 + 40ms));
      auto r = pc->read_from(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error(), errc::timeout);
    }
    expect_on_time(samples, 40);
    ASSERT_FALSE(pc->set_read_deadline(no_deadline));
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(20ms);
      EXPECT_FALSE(pc->close());
      wg.done();
    });
    auto r = pc->read_from(buf, sizeof buf);
    wg.wait();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::closed);
  });
}

// --- DNS ---------------------------------------------------------------------------

TEST(ConformanceDns, LocalhostResolvesAndDials) {
  run_with(2, [] {
    auto addrs = resolve("localhost");
    ASSERT_TRUE(addrs) << addrs.error().message();
    bool has_v4 = false;
    for (const Addr& a : *addrs) {
      EXPECT_TRUE(a.is_loopback()) << a.to_string();
      has_v4 = has_v4 || a.to_string() == "127.0.0.1";
    }
    EXPECT_TRUE(has_v4);
    auto ln = listen("tcp", "localhost:0");
    ASSERT_TRUE(ln) << ln.error().message();
    EXPECT_TRUE(ln->addr().is_loopback()) << ln->addr().to_string();
    std::string port = std::to_string(ln->addr().port());
    EchoServer server(std::move(*ln));
    for (const char* net : {"tcp", "tcp4"}) {
      auto c = dial(net, "localhost:" + port, 5s);
      ASSERT_TRUE(c) << net << ": " << c.error().message();
      ASSERT_TRUE(c->write("hi", 2));
      char buf[2];
      auto r = c->read_full(buf, 2);
      ASSERT_TRUE(r);
      EXPECT_EQ(std::string(buf, 2), "hi");
    }
    // A name that cannot exist (RFC 6761): a lookup error, not refused or a crash.
    auto bad = dial("tcp", "no-such-host.invalid:80", 5s);
    ASSERT_FALSE(bad);
    EXPECT_TRUE(bad.error() == errc::host_not_found || bad.error() == errc::lookup_failed ||
                is_timeout(bad.error()))
        << bad.error().message();
    EXPECT_FALSE(bad.error().message().empty());
  });
}

// --- Options and errors ----------------------------------------------------------

TEST(ConformanceTcp, ReusePortAndAddressInUse) {
  run_with(1, [] {
    ListenOptions opts;
    opts.reuse_port = true;
    auto a = listen("tcp", "127.0.0.1:0", opts);
    ASSERT_TRUE(a);
    std::string addr = a->addr().to_string();
    auto b = listen("tcp", addr, opts);
    ASSERT_TRUE(b) << "SO_REUSEPORT: " << b.error().message();
    EXPECT_EQ(sockopt_int(b->fd(), SOL_SOCKET, SO_REUSEPORT), 1);
    // Without it, the port is taken.
    auto plain = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(plain);
    auto c = listen("tcp", plain->addr().to_string());
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::errc::address_in_use) << c.error().message();
  });
}

TEST(ConformanceTcp, NoDelayAndKeepAliveDefaults) {
  run_with(1, [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    for (Conn* c : {&p.client, &p.server}) {
      EXPECT_EQ(sockopt_int(c->fd(), IPPROTO_TCP, TCP_NODELAY), 1);
      EXPECT_EQ(sockopt_int(c->fd(), SOL_SOCKET, SO_KEEPALIVE), 1);
      EXPECT_EQ(sockopt_int(c->fd(), IPPROTO_TCP, TCP_KEEPIDLE), 15);
    }
    EXPECT_FALSE(p.client.set_keepalive(true, 30s));
    EXPECT_EQ(sockopt_int(p.client.fd(), IPPROTO_TCP, TCP_KEEPIDLE), 30);
    EXPECT_EQ(sockopt_int(p.client.fd(), IPPROTO_TCP, TCP_KEEPINTVL), 30);
    EXPECT_FALSE(p.client.set_keepalive(false));
    EXPECT_EQ(sockopt_int(p.client.fd(), SOL_SOCKET, SO_KEEPALIVE), 0);
    EXPECT_FALSE(p.client.set_nodelay(false));
    EXPECT_EQ(sockopt_int(p.client.fd(), IPPROTO_TCP, TCP_NODELAY), 0);

    ListenOptions off;
    off.keep_alive = 0s;
    auto ln = listen("tcp", "127.0.0.1:0", off);
    ASSERT_TRUE(ln);
    auto c = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(c);
    auto s = ln->accept();
    ASSERT_TRUE(s);
    EXPECT_EQ(sockopt_int(s->fd(), SOL_SOCKET, SO_KEEPALIVE), 0);
    EXPECT_EQ(sockopt_int(s->fd(), IPPROTO_TCP, TCP_NODELAY), 1);
  });
}

TEST(ConformanceErrors, MessagesAndClosedObjects) {
  EXPECT_EQ(std::error_code(errc::closed).message(), "use of closed network connection");
  EXPECT_EQ(std::error_code(errc::timeout).message(), "i/o timeout");
  EXPECT_TRUE(std::error_code(errc::timeout) == std::errc::timed_out);
  EXPECT_FALSE(std::error_code(errc::closed) == std::errc::timed_out);
  run_with(1, [] {
    Conn none;
    char b;
    auto r = none.read(&b, 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::bad_file_descriptor);
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open());
    EXPECT_FALSE(p.client.close());
    EXPECT_EQ(p.client.close(), errc::closed);
    auto w = p.client.write("x", 1);
    ASSERT_FALSE(w);
    EXPECT_TRUE(is_closed(w.error()));
    EXPECT_EQ(p.client.set_deadline(Clock::now() + 1s), errc::closed);
    EXPECT_EQ(p.client.shutdown_write(), errc::closed);
    // Zero-byte writes and reads on an open connection succeed with 0.
    auto z = p.server.write("", 0);
    ASSERT_TRUE(z);
    EXPECT_EQ(*z, 0u);
    auto zr = p.server.read(&b, 0);
    ASSERT_TRUE(zr);
    EXPECT_EQ(*zr, 0u);
  });
}

// --- Large writes, full duplex -------------------------------------------------------

// write() and writev() of several MiB complete fully while the same Conn is read by
// another goroutine at the same time.
TEST_P(Conformance, LargeWritesCompleteWhileReadingConcurrently) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    const auto a = pattern(6 << 20, 1);
    const auto b = pattern(3 << 20, 2);
    const auto c = pattern((3 << 20) + 17, 3);
    const std::size_t total = a.size() + b.size() + c.size();
    goro::WaitGroup wg;
    wg.add(3);
    // Server: echoes everything back, reading and writing in two goroutines.
    goro::Chan<std::vector<unsigned char>> chunks(64);
    goro::go([&, chunks]() mutable {
      std::size_t seen = 0;
      while (seen < total) {
        std::vector<unsigned char> buf(256 * 1024);
        auto n = p.server.read(buf.data(), buf.size());
        if (!n || *n == 0) {
          ADD_FAILURE() << "server read: " << (n ? "eof" : n.error().message());
          break;
        }
        buf.resize(*n);
        seen += *n;
        chunks.send(std::move(buf));
      }
      chunks.close();
      wg.done();
    });
    goro::go([&, chunks]() mutable {
      for (auto& chunk : chunks) {
        auto w = p.server.write(chunk.data(), chunk.size());
        if (!w) {
          ADD_FAILURE() << "server write: " << w.error().message();
          break;
        }
      }
      wg.done();
    });
    // Client writer.
    goro::go([&] {
      auto w1 = p.client.write(a.data(), a.size());
      EXPECT_TRUE(w1 && *w1 == a.size());
      struct iovec iov[2] = {{const_cast<unsigned char*>(b.data()), b.size()},
                             {const_cast<unsigned char*>(c.data()), c.size()}};
      auto w2 = p.client.writev(iov, 2);
      EXPECT_TRUE(w2 && *w2 == b.size() + c.size());
      wg.done();
    });
    // Client reader (this goroutine).
    std::vector<unsigned char> got(total);
    auto r = p.client.read_full(got.data(), got.size());
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(*r, total);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), got.begin()));
    EXPECT_TRUE(std::equal(b.begin(), b.end(), got.begin() + static_cast<long>(a.size())));
    EXPECT_TRUE(
        std::equal(c.begin(), c.end(), got.begin() + static_cast<long>(a.size() + b.size())));
    wg.wait();
  });
}

// --- Races ---------------------------------------------------------------------------

// Deadlines changed at random by one goroutine (past, near, far, none) while another
// reads a trickle of bytes: timeouts come and go, but no byte is lost or duplicated
// and the reader sees the end of the stream.
TEST_P(Conformance, DeadlineChurnLosesNoData) {
  run_with(GetParam(), [] {
    Pair p = tcp_pair();
    ASSERT_TRUE(p.client.is_open() && p.server.is_open());
    constexpr int kBytes = 300;
    std::atomic<bool> stop{false};
    std::atomic<bool> writer_done{false};
    goro::WaitGroup wg;
    wg.add(2);
    goro::go([&] {  // the writer: one byte at a time, then end of stream
      for (int i = 0; i < kBytes; ++i) {
        unsigned char b = static_cast<unsigned char>(i);
        if (!p.server.write(&b, 1)) {
          ADD_FAILURE() << "write " << i;
          break;
        }
        if (i % 3 == 0) goro::sleep(1ms);
      }
      EXPECT_FALSE(p.server.shutdown_write());
      writer_done.store(true);
      wg.done();
    });
    goro::go([&] {  // the churner
      std::uint32_t x = 12345;
      while (!stop.load()) {
        x = x * 1664525u + 1013904223u;
        Deadline d;
        switch (x >> 30) {
          case 0: d = Clock::now() - 1ms; break;
          case 1: d = Clock::now() + std::chrono::microseconds((x >> 8) % 2000); break;
          case 2: d = Clock::now() + 1h; break;
          default: d = no_deadline; break;
        }
        (void)p.client.set_read_deadline(d);
        if ((x >> 4) % 4 == 0)
          goro::sleep(std::chrono::microseconds((x >> 12) % 500));
        else
          goro::yield();
      }
      (void)p.client.set_read_deadline(no_deadline);
      wg.done();
    });
    std::vector<unsigned char> got;
    int timeouts = 0;
    auto t0 = Clock::now();
    for (;;) {
      unsigned char buf[64];
      auto n = p.client.read(buf, sizeof buf);
      if (!n) {
        ASSERT_EQ(n.error(), errc::timeout) << n.error().message();
        ++timeouts;
        if (got.size() == static_cast<std::size_t>(kBytes)) stop.store(true);
        if (ms_since(t0) > 10000) {
          // Say who stopped: the writer, the churner, or data the reader never got.
          char pk[8];
          ssize_t pr = ::recv(p.client.fd(), pk, sizeof pk, MSG_PEEK | MSG_DONTWAIT);
          int pe = errno;
          ADD_FAILURE() << "stuck: got " << got.size() << " writer_done " << writer_done.load()
                        << " stop " << stop.load() << " peek " << pr << " errno " << pe
                        << " timeouts " << timeouts;
          break;
        }
        continue;
      }
      if (*n == 0) break;
      got.insert(got.end(), buf, buf + *n);
      if (got.size() == static_cast<std::size_t>(kBytes)) stop.store(true);
    }
    stop.store(true);
    wg.wait();
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kBytes));
    for (int i = 0; i < kBytes; ++i) ASSERT_EQ(got[i], static_cast<unsigned char>(i)) << i;
    EXPECT_GT(timeouts, 0) << "the churn never hit the reader";
  });
}

// close() racing a reader and a writer at random points: every call returns (with data,
// closed, or a peer error), nothing hangs or crashes.
TEST_P(Conformance, CloseRacesReadAndWrite) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    EchoServer server(std::move(*ln));
    std::vector<char> big(256 * 1024, 'c');
    auto t0 = Clock::now();
    for (int round = 0; round < 200; ++round) {
      auto c = dial("tcp", server.addr());
      ASSERT_TRUE(c) << c.error().message();
      goro::WaitGroup wg;
      wg.add(2);
      goro::go([&] {
        char buf[4096];
        for (;;) {
          auto n = c->read(buf, sizeof buf);
          if (!n || *n == 0) break;
        }
        wg.done();
      });
      goro::go([&] {
        for (int i = 0; i < 4; ++i)
          if (!c->write(big.data(), big.size())) break;
        wg.done();
      });
      for (int i = 0; i < round % 7; ++i) goro::yield();
      EXPECT_FALSE(c->close());
      wg.wait();
      ASSERT_LT(ms_since(t0), 15000) << "round " << round;
    }
  });
}

// --- TLS -------------------------------------------------------------------------------

class TlsFixture {
 public:
  TlsFixture() : leaf_(pki_.leaf("srv", {"srv.test"})) {}
  std::shared_ptr<TlsContext> server(std::vector<std::string> alpn = {}) {
    auto ctx = TlsContext::server({.certificates = {leaf_}, .alpn = std::move(alpn)});
    EXPECT_TRUE(ctx) << ctx.error().message();
    return ctx ? *ctx : nullptr;
  }
  std::shared_ptr<TlsContext> client(std::vector<std::string> alpn = {}) {
    auto ctx = TlsContext::client(
        {.alpn = std::move(alpn), .server_name = "srv.test", .ca_file = pki_.ca_file()});
    EXPECT_TRUE(ctx) << ctx.error().message();
    return ctx ? *ctx : nullptr;
  }

 private:
  TestPki pki_;
  TlsCertificate leaf_;
};

// A TLS pair: a client from tls_dial and the server side, both handshaken.
struct TlsPair {
  std::optional<TlsListener> ln;
  TlsConn client;
  TlsConn server;
};

TlsPair tls_pair(TlsFixture& f, std::vector<std::string> salpn = {},
                 std::vector<std::string> calpn = {}) {
  TlsPair p;
  auto ln = tls_listen("tcp", "127.0.0.1:0", f.server(std::move(salpn)));
  EXPECT_TRUE(ln);
  if (!ln) return p;
  p.ln.emplace(std::move(*ln));
  goro::WaitGroup wg;
  wg.add(1);
  goro::go([&] {
    auto s = p.ln->accept();
    if (s) {
      EXPECT_FALSE(s->handshake());
      p.server = std::move(*s);
    }
    wg.done();
  });
  auto c = tls_dial("tcp", p.ln->addr().to_string(), f.client(std::move(calpn)), 5s);
  EXPECT_TRUE(c) << c.error().message();
  if (c) p.client = std::move(*c);
  wg.wait();
  return p;
}

TEST(ConformanceTls, AlpnPreferenceAndNoOverlap) {
  TlsFixture f;
  run_with(2, [&] {
    {
      TlsPair p = tls_pair(f, {"h2", "http/1.1"}, {"http/1.1", "h2"});
      EXPECT_EQ(p.client.negotiated_alpn(), "h2");
      EXPECT_EQ(p.server.negotiated_alpn(), "h2");
      std::string v = p.client.version();
      EXPECT_TRUE(v == "TLSv1.3" || v == "TLSv1.2") << v;
    }
    {
      TlsPair p = tls_pair(f, {"h2"}, {"http/1.1"});
      EXPECT_EQ(p.client.negotiated_alpn(), "");
      EXPECT_EQ(p.server.negotiated_alpn(), "");
      ASSERT_TRUE(p.client.write("ok", 2));
      char buf[2];
      auto r = read_full(p.server, buf, 2);
      ASSERT_TRUE(r);
      EXPECT_EQ(std::string(buf, 2), "ok");
    }
  });
}

// A read deadline on a TLS connection fires on time, and the connection still works
// afterwards once the deadline is lifted (no record was half consumed).
TEST_P(Conformance, TlsReadDeadlineThenRecover) {
  TlsFixture f;
  run_with(GetParam(), [&] {
    TlsPair p = tls_pair(f);
    ASSERT_TRUE(p.client.handshake() == std::error_code());
    std::vector<double> samples;
    char buf[64];
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      ASSERT_FALSE(p.client.set_read_deadline(t0 + 40ms));
      auto r = p.client.read(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      ASSERT_FALSE(r);
      EXPECT_TRUE(is_timeout(r.error())) << r.error().message();
    }
    expect_on_time(samples, 40);
    ASSERT_FALSE(p.client.set_read_deadline(no_deadline));
    ASSERT_TRUE(p.server.write("late", 4));
    auto r = read_full(p.client, buf, 4);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::string(buf, 4), "late");
  });
}

// The server side handshake honours a deadline against a client that never speaks.
TEST(ConformanceTls, ServerHandshakeHonoursDeadline) {
  TlsFixture f;
  run_with(2, [&] {
    auto ln = tls_listen("tcp", "127.0.0.1:0", f.server());
    ASSERT_TRUE(ln);
    auto raw = dial("tcp", ln->addr().to_string());  // a TCP client that sends nothing
    ASSERT_TRUE(raw);
    auto s = ln->accept();
    ASSERT_TRUE(s);
    auto t0 = Clock::now();
    ASSERT_FALSE(s->set_deadline(t0 + 60ms));
    auto ec = s->handshake();
    double took = ms_since(t0);
    EXPECT_TRUE(is_timeout(ec)) << ec.message();
    EXPECT_GE(took, 59.5);
    EXPECT_LT(took, 1060);
  });
}

// close() from another goroutine wakes a TLS reader parked in the inner read.
TEST_P(Conformance, TlsCloseWakesParkedReader) {
  TlsFixture f;
  run_with(GetParam(), [&] {
    TlsPair p = tls_pair(f);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(30ms);
      EXPECT_FALSE(p.client.close());
      wg.done();
    });
    char buf[16];
    auto t0 = Clock::now();
    auto r = p.client.read(buf, sizeof buf);
    double took = ms_since(t0);
    wg.wait();
    ASSERT_FALSE(r);
    EXPECT_TRUE(is_closed(r.error())) << r.error().message();
    EXPECT_LT(took, 1000);
    // The peer sees our close_notify: end of stream.
    ASSERT_FALSE(p.server.set_read_deadline(Clock::now() + 5s));
    auto e = p.server.read(buf, sizeof buf);
    ASSERT_TRUE(e) << e.error().message();
    EXPECT_EQ(*e, 0u);
  });
}

// shutdown_write on TLS: close_notify and then FIN. The peer reads our bytes and a clean
// end of stream (not a truncation), sees peer_closed(), and its answer, larger than the
// socket buffers, still reaches us; our writes after it fail as on a socket.
TEST_P(Conformance, TlsHalfCloseThenReadLargeAnswer) {
  TlsFixture f;
  run_with(GetParam(), [&] {
    TlsPair p = tls_pair(f);
    const auto answer = pattern(3 << 20, 9);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      EXPECT_FALSE(p.server.set_read_deadline(Clock::now() + 5s));
      std::string got;
      char buf[64];
      for (;;) {
        auto n = p.server.read(buf, sizeof buf);
        if (!n) {
          ADD_FAILURE() << n.error().message();
          break;
        }
        if (*n == 0) break;
        got.append(buf, *n);
      }
      EXPECT_EQ(got, "request");
      EXPECT_TRUE(p.server.peer_closed());
      auto w = p.server.write(answer.data(), answer.size());
      EXPECT_TRUE(w) << w.error().message();
      EXPECT_FALSE(p.server.close());
      wg.done();
    });
    ASSERT_TRUE(p.client.write("request", 7));
    ASSERT_FALSE(p.client.shutdown_write());
    auto w = p.client.write("more", 4);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), std::errc::broken_pipe) << w.error().message();
    ASSERT_FALSE(p.client.set_read_deadline(Clock::now() + 10s));
    std::vector<unsigned char> got(answer.size() + 16);
    auto r = read_full(p.client, got.data(), got.size());
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(*r, answer.size());
    got.resize(*r);
    EXPECT_TRUE(got == answer);
    wg.wait();
  });
}

// peer_closed() on TLS: false while the peer is there, true once it closed, before
// anything is read.
TEST_P(Conformance, TlsPeerClosedWithoutReading) {
  TlsFixture f;
  run_with(GetParam(), [&] {
    TlsPair p = tls_pair(f);
    EXPECT_FALSE(p.server.peer_closed());
    ASSERT_TRUE(p.client.write("x", 1));
    goro::sleep(20ms);
    EXPECT_FALSE(p.server.peer_closed());
    EXPECT_FALSE(p.client.close());
    EXPECT_TRUE(peer_closed_soon(p.server));
  });
}

// Several MiB each way through TLS at once: one goroutine writes, another reads, on
// each end.
TEST_P(Conformance, TlsLargeFullDuplex) {
  TlsFixture f;
  run_with(GetParam(), [&] {
    TlsPair p = tls_pair(f);
    const auto up = pattern(5 << 20, 11);
    const auto down = pattern((4 << 20) + 3, 12);
    goro::WaitGroup wg;
    wg.add(3);
    goro::go([&] {
      auto w = p.client.write(up.data(), up.size());
      EXPECT_TRUE(w && *w == up.size()) << (w ? "" : w.error().message());
      wg.done();
    });
    goro::go([&] {
      auto w = p.server.write(down.data(), down.size());
      EXPECT_TRUE(w && *w == down.size()) << (w ? "" : w.error().message());
      wg.done();
    });
    std::vector<unsigned char> got_up(up.size());
    goro::go([&] {
      auto r = read_full(p.server, got_up.data(), got_up.size());
      EXPECT_TRUE(r && *r == up.size());
      wg.done();
    });
    std::vector<unsigned char> got_down(down.size());
    auto r = read_full(p.client, got_down.data(), got_down.size());
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, down.size());
    wg.wait();
    EXPECT_TRUE(got_up == up);
    EXPECT_TRUE(got_down == down);
  });
}

// Both ends write many small buffers with writev (gathered into records and queued
// before each flush) while their readers run: a reader must never wait for its own
// writer's flush, or the two ends deadlock once both socket buffers are full.
TEST_P(Conformance, TlsFullDuplexManySmallWrites) {
  TlsFixture f;
  run_with(GetParam(), [&] {
    TlsPair p = tls_pair(f);
    constexpr int kBuffers = 2048;
    constexpr std::size_t kEach = 3000;
    const auto up = pattern(kBuffers * kEach, 21);
    const auto down = pattern(kBuffers * kEach, 22);
    auto send_all = [](TlsConn& c, const std::vector<unsigned char>& data) {
      std::vector<struct iovec> iov(kBuffers);
      for (int i = 0; i < kBuffers; ++i)
        iov[i] = {const_cast<unsigned char*>(data.data()) + i * kEach, kEach};
      for (int i = 0; i < kBuffers; i += 512) {
        auto w = c.writev(iov.data() + i, 512);
        if (!w) return w.error();
      }
      return std::error_code();
    };
    std::atomic<int> done{0};
    goro::WaitGroup wg;
    wg.add(3);
    goro::go([&] {
      EXPECT_FALSE(send_all(p.client, up));
      done.fetch_add(1);
      wg.done();
    });
    goro::go([&] {
      EXPECT_FALSE(send_all(p.server, down));
      done.fetch_add(1);
      wg.done();
    });
    std::vector<unsigned char> got_up(up.size());
    goro::go([&] {
      EXPECT_FALSE(p.server.set_read_deadline(Clock::now() + 15s));
      auto r = read_full(p.server, got_up.data(), got_up.size());
      EXPECT_TRUE(r && *r == up.size()) << (r ? "short" : r.error().message());
      done.fetch_add(1);
      wg.done();
    });
    std::vector<unsigned char> got_down(down.size());
    ASSERT_FALSE(p.client.set_read_deadline(Clock::now() + 15s));
    auto r = read_full(p.client, got_down.data(), got_down.size());
    if (!r) {
      // Unblock the others so the test reports instead of hanging.
      ADD_FAILURE() << "client read: " << r.error().message() << " (deadlock?)";
      (void)p.client.close();
      (void)p.server.close();
    } else {
      EXPECT_EQ(*r, down.size());
    }
    wg.wait();
    EXPECT_TRUE(got_up == up);
    EXPECT_TRUE(got_down == down);
  });
}

INSTANTIATE_TEST_SUITE_P(Net, Conformance, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::net::testing
