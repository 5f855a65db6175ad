// goro::net under a Context: a parked read, write, accept, connect or TLS handshake
// returns the context's error as soon as it is cancelled (by waking the parked
// goroutine), the stream stays usable afterwards, and another goroutine's operation on
// the same socket is not disturbed.

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <goro/net/net.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "net_test_util.hpp"
#include "test_certs.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;
using goro::context_errc;

INSTANTIATE_TEST_SUITE_P(Procs, ProcsTest, ::testing::Values(1, 2, 4, 8), procs_name);

// A connected pair over loopback TCP.
struct Pair {
  Listener ln;
  Conn client, server;
};

Pair connected_pair() {
  auto ln = listen("tcp", "127.0.0.1:0");
  EXPECT_TRUE(ln);
  auto c = dial("tcp", ln->addr().to_string());
  EXPECT_TRUE(c);
  auto s = ln->accept();
  EXPECT_TRUE(s);
  return Pair{std::move(*ln), std::move(*c), std::move(*s)};
}

TEST_P(ProcsTest, ReadReturnsAtCancelAndTheConnStaysUsable) {
  run_with(GetParam(), [] {
    Pair p = connected_pair();
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::go([cancel = cancel] {
      goro::sleep(30ms);
      cancel();
    });
    char buf[16];
    const auto t0 = Clock::now();
    auto n = p.server.read(buf, sizeof buf, ctx);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), context_errc::canceled);
    EXPECT_LT(ms_since(t0), 1000);
    EXPECT_GE(ms_since(t0), 25);
    // Later reads, with or without a fresh context, see data as usual.
    ASSERT_TRUE(p.client.write("hi", 2));
    auto m = p.server.read(buf, sizeof buf);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(std::string(buf, *m), "hi");
    auto [ctx2, cancel2] = goro::with_timeout(goro::background(), 5s);
    ASSERT_TRUE(p.client.write("yo", 2));
    auto k = p.server.read(buf, sizeof buf, ctx2);
    ASSERT_TRUE(k) << k.error().message();
    EXPECT_EQ(std::string(buf, *k), "yo");
    // An already cancelled context fails at once, reading nothing.
    ASSERT_TRUE(p.client.write("zz", 2));
    EXPECT_EQ(p.server.read(buf, sizeof buf, ctx).error(), context_errc::canceled);
    auto z = p.server.read(buf, sizeof buf);
    ASSERT_TRUE(z);
    EXPECT_EQ(std::string(buf, *z), "zz");
    cancel2();
  });
}

TEST_P(ProcsTest, ReadUnderATimeoutContextSaysDeadlineExceeded) {
  run_with(GetParam(), [] {
    Pair p = connected_pair();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 40ms);
    char buf[4];
    const auto t0 = Clock::now();
    auto n = p.server.read(buf, sizeof buf, ctx);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), context_errc::deadline_exceeded);
    EXPECT_GE(ms_since(t0), 35);
    EXPECT_LT(ms_since(t0), 1000);
  });
}

TEST_P(ProcsTest, CancellingAReadLeavesAWriterOfTheSameConnAlone) {
  run_with(GetParam(), [] {
    Pair p = connected_pair();
    // The writer blocks on a full socket (the client reads nothing yet).
    constexpr std::size_t kBig = 64u << 20;
    std::atomic<bool> write_done{false};
    std::error_code write_error;
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      std::string big(kBig, 'x');
      auto w = p.server.write(big.data(), big.size());
      if (!w) write_error = w.error();
      write_done = true;
      wg.done();
    });
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::go([cancel = cancel] {
      goro::sleep(20ms);
      cancel();
    });
    char buf[8];
    EXPECT_EQ(p.server.read(buf, sizeof buf, ctx).error(), context_errc::canceled);
    goro::sleep(20ms);
    EXPECT_FALSE(write_done.load());  // still parked, not interrupted
    // Drain: the writer finishes with no error.
    std::vector<char> sink(1 << 16);
    std::size_t total = 0;
    while (total < kBig) {
      auto n = p.client.read(sink.data(), sink.size());
      ASSERT_TRUE(n && *n > 0);
      total += *n;
    }
    wg.wait();
    EXPECT_FALSE(write_error) << write_error.message();
  });
}

TEST_P(ProcsTest, WriteBlockedOnAFullSocketReturnsAtCancel) {
  run_with(GetParam(), [] {
    Pair p = connected_pair();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
    std::string big(64u << 20, 'x');
    const auto t0 = Clock::now();
    auto w = p.server.write(big.data(), big.size(), ctx);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), context_errc::deadline_exceeded);
    EXPECT_LT(ms_since(t0), 1000);
    (void)cancel;
  });
}

TEST_P(ProcsTest, AcceptReturnsAtCancel) {
  run_with(GetParam(), [] {
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    goro::go([cancel = cancel] {
      goro::sleep(20ms);
      cancel();
    });
    auto c = ln->accept(ctx);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), context_errc::canceled);
    // The listener still accepts.
    goro::go([addr = ln->addr().to_string()] { (void)dial("tcp", addr); });
    auto [ctx2, cancel2] = goro::with_timeout(goro::background(), 5s);
    auto d = ln->accept(ctx2);
    EXPECT_TRUE(d) << d.error().message();
  });
}

TEST_P(ProcsTest, DialEndsAtTheContextsDeadline) {
  run_with(GetParam(), [] {
    // A listener whose queue is full drops new SYNs, so a connect to it hangs.
    auto ln = listen("tcp", "127.0.0.1:0", ListenOptions{.backlog = 1});
    ASSERT_TRUE(ln);
    std::vector<Conn> fillers;
    for (int i = 0; i < 8; ++i) {
      auto c = dial("tcp", ln->addr().to_string(), 100ms);
      if (c) fillers.push_back(std::move(*c));
    }
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 80ms);
    const auto t0 = Clock::now();
    auto c = dial("tcp", ln->addr().to_string(), ctx);
    if (c) GTEST_SKIP() << "the kernel accepted a connection past the backlog";
    EXPECT_EQ(c.error(), context_errc::deadline_exceeded) << c.error().message();
    EXPECT_LT(ms_since(t0), 1000);
    // An explicit cancel ends a hanging connect too.
    auto [ctx2, cancel2] = goro::with_cancel(goro::background());
    goro::go([cancel2 = cancel2] {
      goro::sleep(30ms);
      cancel2();
    });
    auto c2 = dial("tcp", ln->addr().to_string(), ctx2);
    ASSERT_FALSE(c2);
    EXPECT_EQ(c2.error(), context_errc::canceled);
    (void)cancel;
  });
}

TEST_P(ProcsTest, TlsReadAndHandshakeReturnAtCancel) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("ctx", {"ctx.test"});
  run_with(GetParam(), [&] {
    auto sctx = TlsContext::server({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    TlsConfig ccfg;
    ccfg.ca_file = pki.ca_file();
    ccfg.server_name = "ctx.test";
    auto cctx = TlsContext::client(ccfg);
    ASSERT_TRUE(cctx);
    goro::Chan<int> done(1);
    goro::go([&] {
      auto s = ln->accept();
      if (s) {
        (void)s->handshake();
        done.recv();  // keep it open, silent, until the client is through
      }
    });
    auto c = tls_dial("tcp", ln->addr().to_string(), *cctx, 5s);
    ASSERT_TRUE(c) << c.error().message();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 40ms);
    char buf[16];
    auto n = c->read(buf, sizeof buf, ctx);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), context_errc::deadline_exceeded);
    done.send(1);

    // A handshake with a server that never answers ends at cancel.
    auto raw = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(raw);
    goro::Chan<int> hold(1);
    goro::go([&] {
      auto s = raw->accept();
      hold.recv();
    });
    auto [ctx2, cancel2] = goro::with_cancel(goro::background());
    goro::go([cancel2 = cancel2] {
      goro::sleep(30ms);
      cancel2();
    });
    const auto t0 = Clock::now();
    auto h = tls_dial("tcp", raw->addr().to_string(), *cctx, 10s, ctx2);
    ASSERT_FALSE(h);
    EXPECT_EQ(h.error(), context_errc::canceled) << h.error().message();
    EXPECT_LT(ms_since(t0), 1000);
    hold.send(1);
    (void)cancel;
  });
}

}  // namespace
}  // namespace goro::net::testing
