// TLS: round trips, SNI certificate choice, ALPN, verification failures, close_notify.
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.hpp"
#include "test_certs.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

// A TLS echo server; each connection also answers "who?" with the SNI name it got and
// the ALPN protocol agreed, and handshakes in its own goroutine.
class TlsEchoServer {
 public:
  explicit TlsEchoServer(TlsListener ln) : ln_(std::move(ln)) {
    wg_.add(1);
    goro::go([this] {
      for (;;) {
        auto c = ln_.accept();
        if (!c) break;
        wg_.add(1);
        goro::go([this, conn = std::move(*c)]() mutable {
          serve(conn);
          wg_.done();
        });
      }
      wg_.done();
    });
  }
  ~TlsEchoServer() {
    ln_.close();
    wg_.wait();
  }
  std::string addr() const { return ln_.addr().to_string(); }
  std::atomic<int> handshake_failures{0};

 private:
  void serve(TlsConn& conn) {
    if (auto ec = conn.handshake()) {
      handshake_failures.fetch_add(1);
      return;
    }
    char buf[16384];
    for (;;) {
      auto n = conn.read(buf, sizeof buf);
      if (!n || *n == 0) break;
      if (*n == 4 && std::memcmp(buf, "who?", 4) == 0) {
        std::string answer = conn.server_name() + "|" + conn.negotiated_alpn();
        if (!conn.write(answer.data(), answer.size())) break;
        continue;
      }
      if (!conn.write(buf, *n)) break;
    }
    conn.close();
  }

  TlsListener ln_;
  goro::WaitGroup wg_;
};

std::shared_ptr<TlsContext> client_ctx(const TestPki& pki, std::string name,
                                       std::vector<std::string> alpn = {}) {
  TlsConfig cfg;
  cfg.ca_file = pki.ca_file();
  cfg.server_name = std::move(name);
  cfg.alpn = std::move(alpn);
  auto ctx = TlsContext::client(cfg);
  EXPECT_TRUE(ctx) << ctx.error().message();
  return ctx ? *ctx : nullptr;
}

std::string ask(TlsConn& c) {
  if (!c.write("who?", 4)) return "write failed";
  char buf[256];
  auto n = c.read(buf, sizeof buf);
  return n ? std::string(buf, *n) : n.error().message();
}

TEST_P(ProcsTest, TlsRoundTripWithAlpn) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("example", {"example.test", "localhost"});
  run_with(GetParam(), [&] {
    TlsConfig server_cfg;
    server_cfg.certificates = {leaf};
    server_cfg.alpn = {"h2", "http/1.1"};
    auto sctx = TlsContext::server(server_cfg);
    ASSERT_TRUE(sctx) << sctx.error().message();
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    TlsEchoServer server(std::move(*ln));

    auto cctx = client_ctx(pki, "example.test", {"http/1.1", "h2"});
    goro::WaitGroup wg;
    for (int i = 0; i < 20; ++i) {
      wg.add(1);
      goro::go([&, i] {
        auto c = tls_dial("tcp", server.addr(), cctx, 5s);
        if (!c) {
          ADD_FAILURE() << "tls_dial: " << c.error().message();
          wg.done();
          return;
        }
        EXPECT_EQ(c->negotiated_alpn(), "h2");  // the server's preference wins
        EXPECT_EQ(c->version(), "TLSv1.3");
        EXPECT_EQ(ask(*c), "example.test|h2");
        std::string msg(1000 + i * 997, static_cast<char>('a' + i));
        EXPECT_TRUE(c->write(msg.data(), msg.size()));
        std::string got(msg.size(), '\0');
        auto r = read_full(*c, got.data(), got.size());
        EXPECT_TRUE(r && got == msg);
        EXPECT_FALSE(c->close());
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(server.handshake_failures.load(), 0);
  });
}

// A reader and a writer goroutine on one TlsConn at once, 2 MiB each way.
TEST_P(ProcsTest, TlsFullDuplex) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("dup", {"dup.test"});
  run_with(GetParam(), [&] {
    auto sctx = TlsContext::server({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    TlsEchoServer server(std::move(*ln));
    auto c = tls_dial("tcp", server.addr(), client_ctx(pki, "dup.test"));
    ASSERT_TRUE(c) << c.error().message();
    constexpr std::size_t kTotal = 2 << 20;
    std::vector<char> sent(kTotal);
    for (std::size_t i = 0; i < kTotal; ++i) sent[i] = static_cast<char>(i % 251);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      for (std::size_t off = 0; off < kTotal; off += 50'000) {
        std::size_t len = std::min<std::size_t>(50'000, kTotal - off);
        struct iovec iov[2] = {{sent.data() + off, 7}, {sent.data() + off + 7, len - 7}};
        if (!c->writev(iov, 2)) {
          ADD_FAILURE() << "writev";
          break;
        }
      }
      wg.done();
    });
    std::vector<char> got(kTotal);
    auto r = read_full(*c, got.data(), kTotal);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, kTotal);
    EXPECT_TRUE(got == sent);
    wg.wait();
  });
}

// With two certificates, SNI picks the matching one; an unknown name gets the first.
TEST(Tls, SniPicksCertificate) {
  TestPki pki;
  TlsCertificate a = pki.leaf("a", {"a.test"});
  TlsCertificate b = pki.leaf("b", {"b.test", "*.b.test"});
  run_with(2, [&] {
    auto sctx = TlsContext::server({.certificates = {a, b}});
    ASSERT_TRUE(sctx) << sctx.error().message();
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    TlsEchoServer server(std::move(*ln));
    for (const char* name : {"a.test", "b.test", "www.b.test"}) {
      auto c = tls_dial("tcp", server.addr(), client_ctx(pki, name));
      ASSERT_TRUE(c) << name << ": " << c.error().message();
      EXPECT_EQ(ask(*c), std::string(name) + "|");
      EXPECT_EQ(c->server_name(), name);
    }
    // c.test: the server presents a.test's certificate, which the client rejects.
    auto c = tls_dial("tcp", server.addr(), client_ctx(pki, "c.test"));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().category(), x509_category());
    EXPECT_EQ(c.error().value(), X509_V_ERR_HOSTNAME_MISMATCH) << c.error().message();
  });
}

TEST(Tls, ClientRejectsWrongHostAndUnknownCa) {
  TestPki pki;
  TestPki other;  // a CA the client does not trust
  TlsCertificate leaf = pki.leaf("right", {"right.test"});
  TlsCertificate untrusted_leaf = other.leaf("untrusted", {"right.test"});
  run_with(2, [&] {
    auto sctx = TlsContext::server({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    TlsEchoServer server(std::move(*ln));

    auto c = tls_dial("tcp", server.addr(), client_ctx(pki, "wrong.test"));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::error_code(X509_V_ERR_HOSTNAME_MISMATCH, x509_category()))
        << c.error().message();

    auto usctx = TlsContext::server({.certificates = {untrusted_leaf}});
    ASSERT_TRUE(usctx);
    auto uln = tls_listen("tcp", "127.0.0.1:0", *usctx);
    ASSERT_TRUE(uln);
    TlsEchoServer untrusted(std::move(*uln));
    auto u = tls_dial("tcp", untrusted.addr(), client_ctx(pki, "right.test"));
    ASSERT_FALSE(u);
    EXPECT_EQ(u.error().category(), x509_category()) << u.error().message();

    // Verification off: the same connection succeeds.
    auto insecure = TlsContext::client({.server_name = "right.test", .verify = false});
    ASSERT_TRUE(insecure);
    auto ok = tls_dial("tcp", untrusted.addr(), *insecure);
    ASSERT_TRUE(ok) << ok.error().message();
    EXPECT_EQ(ask(*ok), "right.test|");
  });
}

// close() sends close_notify: the peer's read returns 0 (end of stream).
TEST(Tls, CloseNotifyEndsPeerRead) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("cn", {"cn.test"});
  run_with(2, [&] {
    auto sctx = TlsContext::server({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      auto c = ln->accept();
      if (c) {
        EXPECT_FALSE(c->handshake());
        EXPECT_TRUE(c->write("bye", 3));
        EXPECT_FALSE(c->close());
      }
      wg.done();
    });
    auto c = tls_dial("tcp", ln->addr().to_string(), client_ctx(pki, "cn.test"));
    ASSERT_TRUE(c) << c.error().message();
    char buf[8];
    auto r = read_full(*c, buf, sizeof buf);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::string(buf, *r), "bye");
    wg.wait();
  });
}

// A Stream over a Conn whose reads, once it is closed under them, take 50 ms more to
// come back: time a TLS call spends inside after its socket failed.
class SlowToFailStream final : public Stream {
 public:
  explicit SlowToFailStream(Conn c) : c_(std::move(c)) {}
  std::atomic<bool> closing{false}, read_returned{false};

  Result<std::size_t> read(void* buf, std::size_t len) override {
    auto r = c_.read(buf, len);
    if (closing.load()) {
      goro::sleep(50ms);
      read_returned.store(true);
    }
    return r;
  }
  Result<std::size_t> write(const void* buf, std::size_t len) override { return c_.write(buf, len); }
  Result<std::size_t> writev(const struct iovec* iov, int count) override {
    return c_.writev(iov, count);
  }
  std::error_code close() override {
    closing.store(true);
    return c_.close();
  }
  std::error_code shutdown_write() override { return c_.shutdown_write(); }
  bool peer_closed() const override { return c_.peer_closed(); }
  std::error_code set_read_deadline(Deadline d) override { return c_.set_read_deadline(d); }
  std::error_code set_write_deadline(Deadline d) override { return c_.set_write_deadline(d); }
  std::error_code set_deadline(Deadline d) override { return c_.set_deadline(d); }
  Addr remote_addr() const override { return c_.remote_addr(); }
  Addr local_addr() const override { return c_.local_addr(); }

 private:
  Conn c_;
};

// close() from another goroutine returns only once a read parked inside the TlsConn has
// left it, as Conn::close does: the owner may destroy the connection right after.
TEST(Tls, CloseWaitsForACallInAnotherGoroutine) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("cn", {"cn.test"});
  run_with(2, [&] {
    auto sctx = TlsContext::server({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      auto raw = ln->accept();
      ASSERT_TRUE(raw);
      auto owned = std::make_unique<SlowToFailStream>(std::move(*raw));
      SlowToFailStream* stream = owned.get();
      auto conn = std::make_unique<TlsConn>(*TlsConn::server(std::move(owned), *sctx));
      EXPECT_FALSE(conn->handshake());
      goro::WaitGroup reading;
      reading.add(1);
      goro::go([&] {
        char buf[64];
        (void)conn->read(buf, sizeof buf);  // parks: the client sends nothing
        reading.done();
      });
      goro::sleep(20ms);
      EXPECT_FALSE(conn->close());
      EXPECT_TRUE(stream->read_returned.load()) << "close() returned with a read still inside";
      reading.wait();
      conn.reset();
      wg.done();
    });
    auto c = tls_dial("tcp", ln->addr().to_string(), client_ctx(pki, "cn.test"));
    ASSERT_TRUE(c) << c.error().message();
    wg.wait();
  });
}

// A Stream over a Conn whose writes can be cut: once armed, the next write sends only
// its first `keep` bytes, then the write side is shut (a FIN, no close_notify).
class CuttingStream final : public Stream {
 public:
  explicit CuttingStream(Conn c) : c_(std::move(c)) {}
  std::atomic<long> keep{-1};  // -1: pass everything

  Result<std::size_t> read(void* buf, std::size_t len) override { return c_.read(buf, len); }
  Result<std::size_t> write(const void* buf, std::size_t len) override {
    struct iovec iov = {const_cast<void*>(buf), len};
    return writev(&iov, 1);
  }
  Result<std::size_t> writev(const struct iovec* iov, int count) override {
    std::string all;
    for (int i = 0; i < count; ++i)
      all.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    long k = keep.exchange(-1);
    if (k < 0) return c_.write(all.data(), all.size());
    auto n = c_.write(all.data(), std::min(all.size(), static_cast<std::size_t>(k)));
    if (!n) return n;
    if (auto ec = c_.shutdown_write()) return ec;
    return all.size();
  }
  std::error_code close() override { return c_.close(); }
  std::error_code shutdown_write() override { return c_.shutdown_write(); }
  bool peer_closed() const override { return c_.peer_closed(); }
  std::error_code set_read_deadline(Deadline d) override { return c_.set_read_deadline(d); }
  std::error_code set_write_deadline(Deadline d) override { return c_.set_write_deadline(d); }
  std::error_code set_deadline(Deadline d) override { return c_.set_deadline(d); }
  Addr remote_addr() const override { return c_.remote_addr(); }
  Addr local_addr() const override { return c_.local_addr(); }

 private:
  Conn c_;
};

// A stream cut inside a record is an error (Go: io.ErrUnexpectedEOF); one cut between
// records, without close_notify, ends like a clean close (as many HTTPS peers do).
TEST(Tls, TruncationInsideARecordIsAnErrorBetweenRecordsAnEnd) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("cn", {"cn.test"});
  const std::string message = "hello, truncated world";
  constexpr long kWhole = 1 << 20;
  for (long keep : {5L + 3, 3L, kWhole}) {  // inside the body, inside the header, all
    run_with(2, [&] {
      auto sctx = TlsContext::server({.certificates = {leaf}});
      ASSERT_TRUE(sctx);
      auto ln = listen("tcp", "127.0.0.1:0");
      ASSERT_TRUE(ln);
      goro::WaitGroup wg;
      wg.add(1);
      goro::go([&] {
        auto raw = ln->accept();
        if (raw) {
          auto cutter = std::make_unique<CuttingStream>(std::move(*raw));
          CuttingStream* cut = cutter.get();
          auto c = TlsConn::server(std::move(cutter), *sctx);
          EXPECT_TRUE(c);
          if (c) {
            EXPECT_FALSE(c->handshake());
            cut->keep = keep;
            EXPECT_TRUE(c->write(message.data(), message.size()));
          }
        }
        wg.done();
      });
      auto c = tls_dial("tcp", ln->addr().to_string(), client_ctx(pki, "cn.test"));
      ASSERT_TRUE(c) << c.error().message();
      ASSERT_FALSE(c->set_read_deadline(Clock::now() + 5s));
      std::string got;
      std::error_code ec;
      char buf[256];
      for (;;) {
        auto n = c->read(buf, sizeof buf);
        if (!n) {
          ec = n.error();
          break;
        }
        if (*n == 0) break;
        got.append(buf, *n);
      }
      if (keep == kWhole) {
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_FALSE(is_unexpected_eof(ec));
        EXPECT_EQ(got, message);
      } else {
        EXPECT_EQ(got, "") << "keep " << keep;
        EXPECT_TRUE(is_unexpected_eof(ec)) << "keep " << keep << ": " << ec.message();
        EXPECT_EQ(&ec.category(), &tls_category()) << "keep " << keep << ": " << ec.message();
        EXPECT_NE(ec.message().find("unexpected eof"), std::string::npos) << ec.message();
      }
      wg.wait();
    });
  }
}

// A TLS 1.2 handshake by a plain OpenSSL client (blocking, on its own thread, outside
// the runtime) offering only `ciphers`: the suite agreed, or "" if it failed.
std::string tls12_handshake(const std::string& addr, const char* ciphers) {
  std::string agreed;
  std::thread t([&] {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_set_cipher_list(ctx, ciphers) == 1) {
      BIO* bio = BIO_new_connect(addr.c_str());
      SSL* ssl = SSL_new(ctx);
      if (BIO_do_connect(bio) == 1) {
        SSL_set_bio(ssl, bio, bio);
        if (SSL_connect(ssl) == 1) agreed = SSL_get_cipher_name(ssl);
      } else {
        BIO_free(bio);
      }
      SSL_free(ssl);
    }
    SSL_CTX_free(ctx);
  });
  // Park the goroutine, not the thread, until the client thread is done.
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    t.join();
    done = true;
  });
  while (!done) goro::sleep(1ms);
  waiter.join();
  return agreed;
}

// The server's TLS 1.2 defaults are forward-secret AEAD suites: no CBC (LUCKY13), no
// static RSA key exchange. Both are in OpenSSL's default list.
TEST(Tls, ServerOffersOnlyForwardSecretAeadSuitesOnTls12) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("cn", {"cn.test"});
  run_with(2, [&] {
    auto sctx = TlsContext::server({.certificates = {leaf}});
    ASSERT_TRUE(sctx) << sctx.error().message();
    auto ln = tls_listen("tcp", "127.0.0.1:0", *sctx);
    ASSERT_TRUE(ln);
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      for (;;) {
        auto c = ln->accept();
        if (!c) break;
        (void)c->handshake();
        c->close();
      }
      wg.done();
    });
    const std::string addr = ln->addr().to_string();
    EXPECT_EQ(tls12_handshake(addr, "ECDHE-ECDSA-AES128-GCM-SHA256"),
              "ECDHE-ECDSA-AES128-GCM-SHA256");
    EXPECT_EQ(tls12_handshake(addr, "ECDHE-ECDSA-CHACHA20-POLY1305"),
              "ECDHE-ECDSA-CHACHA20-POLY1305");
    EXPECT_EQ(tls12_handshake(addr, "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384"), "");
    ln->close();
    wg.wait();

    // A list of one's own replaces the default; one OpenSSL does not know fails.
    TlsConfig legacy{.certificates = {leaf}};
    legacy.ciphers = "ECDHE-ECDSA-AES128-SHA";
    auto lctx = TlsContext::server(legacy);
    ASSERT_TRUE(lctx) << lctx.error().message();
    auto lln = tls_listen("tcp", "127.0.0.1:0", *lctx);
    ASSERT_TRUE(lln);
    wg.add(1);
    goro::go([&] {
      auto c = lln->accept();
      if (c) {
        (void)c->handshake();
        c->close();
      }
      wg.done();
    });
    EXPECT_EQ(tls12_handshake(lln->addr().to_string(), "ECDHE-ECDSA-AES128-SHA"),
              "ECDHE-ECDSA-AES128-SHA");
    wg.wait();
    TlsConfig bad{.certificates = {leaf}};
    bad.ciphers = "NO-SUCH-CIPHER";
    auto bctx = TlsContext::server(bad);
    ASSERT_FALSE(bctx);
    EXPECT_NE(bctx.error().message().find("cipher"), std::string::npos) << bctx.error().message();
  });
}

TEST(Tls, HandshakeHonoursDeadline) {
  TestPki pki;
  run_with(2, [&] {
    // A plain TCP server that accepts and says nothing: the handshake times out.
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    Conn held;
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      auto c = ln->accept();
      if (c) held = std::move(*c);
      wg.done();
    });
    auto t0 = Clock::now();
    auto c = tls_dial("tcp", ln->addr().to_string(), client_ctx(pki, "x.test"), 100ms);
    ASSERT_FALSE(c);
    EXPECT_TRUE(is_timeout(c.error())) << c.error().message();
    EXPECT_LE(ms_since(t0), 100 + 10 * slack_ms());
    wg.wait();
  });
}

TEST(Tls, BadConfigurationFails) {
  run_with(1, [] {
    EXPECT_FALSE(TlsContext::server({}));
    auto missing = TlsContext::server({.certificates = {{"/nonexistent.pem", "/nonexistent.key"}}});
    EXPECT_FALSE(missing);
    auto cctx = TlsContext::client({});  // verify on, no name
    ASSERT_TRUE(cctx);
    auto ln = listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    auto raw = dial("tcp", ln->addr().to_string());
    ASSERT_TRUE(raw);
    auto c = TlsConn::client(std::make_unique<Conn>(std::move(*raw)), *cctx);
    EXPECT_EQ(c.error(), std::errc::invalid_argument);
  });
}

INSTANTIATE_TEST_SUITE_P(Net, ProcsTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::net::testing
