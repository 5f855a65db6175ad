// TLS abuse beside plaintext clients of the same server (one Server, one runtime, a
// plain and a TLS listener): garbage, stalled handshakes and 1,000 concurrent handshakes
// on the TLS port while a load measures plaintext. Figures are printed with a
// `[figure]` prefix; tests/HARDENING.md records them.
#include "under_load_util.hpp"

namespace goro::http::test {
namespace {

// ---------------------------------------------------------------------------------
// TLS abuse beside plaintext clients of the same server (one Server, one runtime, a
// plain and a TLS listener).

// The first flight of a TLS 1.3 client (its ClientHello), made with OpenSSL.
std::string client_hello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  SSL_set_tlsext_host_name(ssl, "localhost");
  SSL_set_connect_state(ssl);
  (void)SSL_do_handshake(ssl);
  std::string hello;
  char buf[4096];
  int n;
  while ((n = BIO_read(out, buf, sizeof buf)) > 0) hello.append(buf, static_cast<std::size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// `count` TLS handshakes at once, from one thread over non-blocking sockets (OpenSSL,
// no verification: the server's cost is the point). Returns how many completed.
int concurrent_handshakes(std::uint16_t port, int count, std::chrono::milliseconds give_up) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  struct Shake {
    int fd = -1;
    SSL* ssl = nullptr;
    short events = POLLOUT;
    bool done = false;
  };
  std::vector<Shake> shakes;
  for (int i = 0; i < count; ++i) {
    int fd = connect_to(port, 2000ms);
    if (fd < 0) break;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_connect_state(ssl);
    shakes.push_back({fd, ssl, POLLOUT, false});
  }
  int completed = 0;
  int failed = 0;
  auto until = Clock::now() + give_up;
  std::vector<pollfd> polled;
  std::vector<std::size_t> which;
  while (completed + failed < static_cast<int>(shakes.size()) && Clock::now() < until) {
    polled.clear();
    which.clear();
    for (std::size_t i = 0; i < shakes.size(); ++i) {
      Shake& s = shakes[i];
      if (s.done) continue;
      polled.push_back({s.fd, s.events, 0});
      which.push_back(i);
    }
    if (::poll(polled.data(), polled.size(), 100) <= 0) continue;
    for (std::size_t k = 0; k < polled.size(); ++k) {
      if (polled[k].revents == 0) continue;
      Shake& s = shakes[which[k]];
      int r = SSL_do_handshake(s.ssl);
      if (r == 1) {
        s.done = true;
        ++completed;
        continue;
      }
      int e = SSL_get_error(s.ssl, r);
      if (e == SSL_ERROR_WANT_READ) {
        s.events = POLLIN;
      } else if (e == SSL_ERROR_WANT_WRITE) {
        s.events = POLLOUT;
      } else {
        s.done = true;
        ++failed;
        ERR_clear_error();
      }
    }
  }
  for (Shake& s : shakes) {
    SSL_free(s.ssl);
    ::close(s.fd);
  }
  SSL_CTX_free(ctx);
  return completed;
}

// While two keep-alive clients measure plaintext requests, the TLS listener gets in turn:
// 2,000 connections sending 4 KiB of garbage each (from one thread, one after another);
// 1,000 connections that send half a ClientHello and stall (cut at the handshake's
// limit, read_header_timeout: 2 s here); and 1,000 concurrent full handshakes. The
// plaintext rate and latency in each phase are printed beside the rate without; every
// garbage connection is refused, the stalled ones are cut, the handshakes complete, and
// plaintext requests are answered throughout (p99 bounded, none truncated).
TEST(UnderLoad, TlsAbuseDoesNotStallPlaintextClients) {
  DescriptorLimit limit(5000);
  ASSERT_TRUE(limit.ok());
  net::testing::TestPki pki;
  ServerOptions o = quiet_options();
  o.read_header_timeout = 2000ms;
  DualServer server(o, pki.leaf("leaf", {"localhost"}));
  const std::string hello = client_hello();
  ASSERT_GT(hello.size(), 100u);
  warm_up(server);
  goro::test::LeakCheck leaks("tls abuse");
  struct Phase {
    const char* name;
    double seconds = 0;
  };
  std::vector<Phase> phases = {{"no abuse"},
                               {"garbage"},
                               {"stalled half ClientHellos"},
                               {"1,000 concurrent handshakes"},
                               {"no abuse, after"}};
  int garbage_closed = 0;
  int stalled_cut = 0;
  double stalled_cut_max_ms = 0;
  int handshakes = 0;
  {
    Load load(server.port(), 2, 1 << 30);
    std::this_thread::sleep_for(200ms);
    auto phase = [&](int index, auto&& abuse) {
      load.set_phase(index + 1);
      auto start = Clock::now();
      abuse();
      phases[static_cast<std::size_t>(index)].seconds = ms_between(start, Clock::now()) / 1000;
    };
    phase(0, [] { std::this_thread::sleep_for(1000ms); });
    phase(1, [&] {
      std::string garbage(4096, '\0');
      for (std::size_t i = 0; i < garbage.size(); ++i)
        garbage[i] = static_cast<char>((i * 7919 + 13) % 251);
      for (int i = 0; i < 2000; ++i) {
        int fd = connect_to(server.tls_port(), 2000ms);
        if (fd < 0) continue;
        (void)::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
        char buf[1024];
        ssize_t n;
        while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        }
        garbage_closed += (n == 0 || errno == ECONNRESET) ? 1 : 0;
        ::close(fd);
      }
    });
    phase(2, [&] {
      std::vector<std::pair<int, Clock::time_point>> stalled;
      for (int i = 0; i < 1000; ++i) {
        int fd = connect_to(server.tls_port(), 3000ms);
        if (fd < 0) continue;
        (void)::send(fd, hello.data(), hello.size() / 2, MSG_NOSIGNAL);
        stalled.emplace_back(fd, Clock::now());
      }
      for (auto& [fd, since] : stalled) {
        char buf[256];
        ssize_t n;
        while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        }
        if (n == 0 || errno == ECONNRESET) {
          ++stalled_cut;
          stalled_cut_max_ms = std::max(stalled_cut_max_ms, ms_between(since, Clock::now()));
        }
        ::close(fd);
      }
    });
    phase(3, [&] { handshakes = concurrent_handshakes(server.tls_port(), 1000, 15000ms); });
    phase(4, [] { std::this_thread::sleep_for(1000ms); });
    load.stop();
    for (std::size_t i = 0; i < phases.size(); ++i) {
      Tally t = load.tally(static_cast<int>(i) + 1);
      std::printf(
          "[figure] TLS abuse, %s (%.1f s): plaintext %.0f req/s, p50 %.3f ms, p99 %.3f ms, "
          "max %.3f ms; %ld truncated, %ld timed out\n",
          phases[i].name, phases[i].seconds, static_cast<double>(t.complete) / phases[i].seconds,
          t.percentile(0.5), t.percentile(0.99), t.percentile(1.0), t.truncated, t.timed_out);
      EXPECT_GT(t.complete, 0) << phases[i].name << ": no plaintext request answered";
      EXPECT_EQ(t.truncated + t.timed_out, 0) << phases[i].name;
      if (kTimingMeaningful) {
        EXPECT_LT(t.percentile(0.99), 250.0) << phases[i].name << ": plaintext clients stalled";
      }
    }
  }
  std::printf(
      "[figure] TLS abuse: %d of 2,000 garbage connections closed by the server; %d of 1,000 "
      "stalled handshakes cut (the last after %.0f ms; limit 2,000 ms); %d of 1,000 "
      "concurrent handshakes completed\n",
      garbage_closed, stalled_cut, stalled_cut_max_ms, handshakes);
  EXPECT_EQ(garbage_closed, 2000);
  EXPECT_EQ(stalled_cut, 1000);
  EXPECT_LT(stalled_cut_max_ms, 3500.0);
  EXPECT_EQ(handshakes, 1000);
  EXPECT_TRUE(leaks.verify());
}

}  // namespace
}  // namespace goro::http::test
