// TLS operations: certificate reload under load, a reload that fails, client
// certificates (mTLS) and what the server learns of them, session ticket key rotation,
// and a flood of clients with untrusted certificates or garbage beside good clients.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/select.hpp>

#include "net_test_util.hpp"
#include "test_certs.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

// A TLS server whose connections answer each "who?" with what the handshake told the
// server of the client ("cn|uri|email|sha256|resumed", "-" when no certificate) and
// echo anything else.
class WhoServer {
 public:
  explicit WhoServer(TlsListener ln) : ln_(std::move(ln)) {
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
  ~WhoServer() {
    ln_.close();
    wg_.wait();
  }
  std::string addr() const { return ln_.addr().to_string(); }
  std::atomic<int> handshake_failures{0};
  std::atomic<int> handshakes{0};

 private:
  void serve(TlsConn& conn) {
    (void)conn.set_deadline(deadline_after(10s));
    if (conn.handshake()) {
      handshake_failures.fetch_add(1);
      return;
    }
    handshakes.fetch_add(1);
    char buf[4096];
    for (;;) {
      auto n = conn.read(buf, sizeof buf);
      if (!n || *n == 0) break;
      if (*n == 4 && std::memcmp(buf, "who?", 4) == 0) {
        const TlsConnectionState* st = conn.connection_state();
        std::string answer = "-";
        if (st != nullptr && st->peer) {
          const TlsCertificateInfo& p = *st->peer;
          answer = p.common_name + "|" + (p.uris.empty() ? "" : p.uris[0]) + "|" +
                   (p.emails.empty() ? "" : p.emails[0]) + "|" + p.sha256 + "|" +
                   (st->peer_verified ? "verified" : "unverified");
        }
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

std::shared_ptr<TlsContext> server_ctx(TlsConfig cfg) {
  auto ctx = TlsContext::server(cfg);
  EXPECT_TRUE(ctx) << ctx.error().message();
  return ctx ? *ctx : nullptr;
}

std::shared_ptr<TlsContext> client_ctx(const TestPki& pki, std::vector<TlsCertificate> certs = {}) {
  TlsConfig cfg;
  cfg.ca_file = pki.ca_file();
  cfg.server_name = "example.test";
  cfg.certificates = std::move(certs);
  auto ctx = TlsContext::client(cfg);
  EXPECT_TRUE(ctx) << ctx.error().message();
  return ctx ? *ctx : nullptr;
}

// The fingerprint of the certificate the server presented on c.
std::string server_fingerprint(const TlsConn& c) {
  const TlsConnectionState* st = c.connection_state();
  return st != nullptr && st->peer ? st->peer->sha256 : "";
}

// One request on c: "ping" echoed back.
bool ping(TlsConn& c) {
  if (!c.write("ping", 4)) return false;
  char buf[4];
  auto n = read_full(c, buf, 4);
  return n && std::memcmp(buf, "ping", 4) == 0;
}

std::string ask(TlsConn& c) {
  if (!c.write("who?", 4)) return "write failed";
  char buf[512];
  auto n = c.read(buf, sizeof buf);
  return n ? std::string(buf, *n) : n.error().message();
}

// ---------------------------------------------------------------------------------
// Reload

// Clients handshake afresh and make a request, continuously, on every P, while the
// certificate is replaced five times: no handshake fails, every connection made after
// a reload returned sees the new certificate, and a keep-alive connection made before
// the first reload still works after the last.
TEST_P(ProcsTest, TlsReloadUnderLoad) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  run_with(GetParam(), [&] {
    auto sctx = server_ctx({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    WhoServer server(std::move(*ln));
    auto cctx = client_ctx(pki);

    auto kept = tls_dial("tcp", server.addr(), cctx, 5s);
    ASSERT_TRUE(kept) << kept.error().message();
    ASSERT_TRUE(ping(*kept));
    const std::string first = server_fingerprint(*kept);
    ASSERT_EQ(first, sctx->certificates().at(0).sha256);

    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::atomic<int> done{0};
    goro::Mutex seen_mu;
    std::set<std::string> seen;
    goro::WaitGroup wg;
    const int clients = 2 * GetParam() + 2;
    for (int i = 0; i < clients; ++i) {
      wg.add(1);
      goro::go([&] {
        while (!stop.load()) {
          auto c = tls_dial("tcp", server.addr(), cctx, 5s);
          if (!c) {
            ADD_FAILURE() << "dial during rotation: " << c.error().message();
            failures.fetch_add(1);
            break;
          }
          if (!ping(*c)) failures.fetch_add(1);
          {
            std::lock_guard lock(seen_mu);
            seen.insert(server_fingerprint(*c));
          }
          c->close();
          done.fetch_add(1);
        }
        wg.done();
      });
    }
    // Before each rotation, the clients make two connections each (on average) under the
    // current certificate; a sanitizer build on a busy machine may take long for it.
    auto let_clients_run = [&] {
      const int mark = done.load();
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (done.load() < mark + 2 * clients && std::chrono::steady_clock::now() < until)
        goro::sleep(5ms);
    };
    std::vector<std::string> served{first};
    for (int round = 0; round < 5; ++round) {
      let_clients_run();
      pki.leaf("server", {"example.test"});  // new key and certificate, same files
      goro::Error e = sctx->reload();
      ASSERT_FALSE(e) << e.what();
      const std::string now = sctx->certificates().at(0).sha256;
      ASSERT_NE(now, served.back());
      served.push_back(now);
      for (int probe = 0; probe < 3; ++probe) {
        auto c = tls_dial("tcp", server.addr(), cctx, 5s);
        ASSERT_TRUE(c) << c.error().message();
        EXPECT_EQ(server_fingerprint(*c), now) << "round " << round;
        EXPECT_TRUE(ping(*c));
      }
    }
    let_clients_run();
    stop.store(true);
    wg.wait();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(server.handshake_failures.load(), 0);
    EXPECT_GE(done.load(), 12 * clients);
    // The load saw several generations, not only the first and last.
    EXPECT_GE(seen.size(), 3u);
    for (const std::string& fp : seen)
      EXPECT_NE(std::find(served.begin(), served.end(), fp), served.end());

    EXPECT_TRUE(ping(*kept)) << "a connection from before the reloads";
    EXPECT_EQ(server_fingerprint(*kept), first);
    kept->close();
  });
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// A reload that cannot load its files names the file and changes nothing: the server
// goes on presenting the certificate it had. A good file later reloads.
TEST(TlsReload, BadFilesKeepTheOldCertificate) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  TlsCertificate other = pki.leaf("other", {"example.test"});
  run_with(2, [&] {
    auto sctx = server_ctx({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    WhoServer server(std::move(*ln));
    auto cctx = client_ctx(pki);
    const std::string original = sctx->certificates().at(0).sha256;
    auto check_serving = [&](const std::string& fp) {
      auto c = tls_dial("tcp", server.addr(), cctx, 5s);
      ASSERT_TRUE(c) << c.error().message();
      EXPECT_EQ(server_fingerprint(*c), fp);
      EXPECT_TRUE(ping(*c));
    };

    std::ifstream in(leaf.cert_file);
    const std::string good_cert((std::istreambuf_iterator<char>(in)), {});
    std::ifstream kin(leaf.key_file);
    const std::string good_key((std::istreambuf_iterator<char>(kin)), {});

    write_file(leaf.cert_file, "this is not a certificate\n");
    goro::Error e = sctx->reload();
    ASSERT_TRUE(e);
    EXPECT_NE(e.what().find(leaf.cert_file), std::string::npos) << e.what();
    check_serving(original);

    write_file(leaf.cert_file, good_cert);
    std::filesystem::remove(leaf.key_file);
    e = sctx->reload();
    ASSERT_TRUE(e);
    EXPECT_NE(e.what().find(leaf.key_file), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory) << e.what();
    check_serving(original);

    std::filesystem::copy_file(other.key_file, leaf.key_file);  // another certificate's key
    e = sctx->reload();
    ASSERT_TRUE(e);
    EXPECT_NE(e.what().find("does not match"), std::string::npos) << e.what();
    EXPECT_NE(e.what().find(leaf.key_file), std::string::npos) << e.what();
    check_serving(original);
    EXPECT_EQ(sctx->certificates().at(0).sha256, original);

    write_file(leaf.key_file, good_key);
    write_file(leaf.cert_file, "");
    e = sctx->reload();
    EXPECT_TRUE(e) << "an empty certificate file";
    check_serving(original);

    // Both files of the other certificate: the reload takes.
    std::filesystem::copy_file(other.cert_file, leaf.cert_file,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(other.key_file, leaf.key_file,
                               std::filesystem::copy_options::overwrite_existing);
    e = sctx->reload();
    ASSERT_FALSE(e) << e.what();
    EXPECT_NE(sctx->certificates().at(0).sha256, original);
    check_serving(sctx->certificates().at(0).sha256);
    EXPECT_EQ(server.handshake_failures.load(), 0);
  });
}

// ---------------------------------------------------------------------------------
// Client certificates

// Waits (bounded) until the server has counted n failed handshakes.
bool wait_failures(const WhoServer& server, int n) {
  for (int i = 0; i < 500 && server.handshake_failures.load() < n; ++i) goro::sleep(10ms);
  return server.handshake_failures.load() >= n;
}

// A connection the server must refuse: the dial fails, or (TLS 1.3: the client has
// finished its handshake before the server checks its certificate) the first request.
void expect_refused(const std::string& addr, const std::shared_ptr<TlsContext>& cctx) {
  auto c = tls_dial("tcp", addr, cctx, 5s);
  if (!c) return;
  EXPECT_FALSE(ping(*c)) << "the server served a client it should have refused";
}

const char* const kAliceNames =
    "URI:spiffe://example.org/ns/web/sa/alice,email:alice@example.org,DNS:alice.example.org";

TEST_P(ProcsTest, TlsRequireClientCertificate) {
  TestPki pki;
  TestPki stranger;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  TlsCertificate alice = pki.client_leaf("alice", "alice", kAliceNames);
  TlsCertificate mallory = stranger.client_leaf("mallory", "mallory", "URI:spiffe://example.org/m");
  run_with(GetParam(), [&] {
    auto sctx = server_ctx({.certificates = {leaf},
                            .client_auth = TlsClientAuth::require,
                            .client_ca_file = pki.ca_file()});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    WhoServer server(std::move(*ln));

    auto good = client_ctx(pki, {alice});
    const std::string alice_fp = good->certificates().at(0).sha256;
    ASSERT_EQ(alice_fp.size(), 64u);
    for (int i = 0; i < 3; ++i) {
      auto c = tls_dial("tcp", server.addr(), good, 5s);
      ASSERT_TRUE(c) << c.error().message();
      EXPECT_EQ(ask(*c), "alice|spiffe://example.org/ns/web/sa/alice|alice@example.org|" +
                             alice_fp + "|verified");
    }
    const TlsCertificateInfo info = good->certificates().at(0);
    EXPECT_EQ(info.subject, "CN=alice");
    EXPECT_EQ(info.issuer, "CN=goro test CA");
    EXPECT_EQ(info.dns_names, std::vector<std::string>{"alice.example.org"});
    EXPECT_LT(info.not_before, std::chrono::system_clock::now());
    EXPECT_GT(info.not_after, std::chrono::system_clock::now());

    expect_refused(server.addr(), client_ctx(pki));  // no certificate
    EXPECT_TRUE(wait_failures(server, 1));
    expect_refused(server.addr(), client_ctx(pki, {mallory}));  // another CA's
    EXPECT_TRUE(wait_failures(server, 2));
    EXPECT_EQ(server.handshakes.load(), 3);
  });
}

// request: a client may come without a certificate, but one it shows must verify.
TEST(TlsClientAuth, RequestVerifiesWhatIsShown) {
  TestPki pki;
  TestPki stranger;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  TlsCertificate alice = pki.client_leaf("alice", "alice", kAliceNames);
  TlsCertificate mallory = stranger.client_leaf("mallory", "mallory", "URI:spiffe://example.org/m");
  run_with(2, [&] {
    auto sctx = server_ctx({.certificates = {leaf},
                            .client_auth = TlsClientAuth::request,
                            .client_ca_file = pki.ca_file()});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    WhoServer server(std::move(*ln));
    {
      auto c = tls_dial("tcp", server.addr(), client_ctx(pki), 5s);
      ASSERT_TRUE(c) << c.error().message();
      EXPECT_EQ(ask(*c), "-");
    }
    {
      auto c = tls_dial("tcp", server.addr(), client_ctx(pki, {alice}), 5s);
      ASSERT_TRUE(c) << c.error().message();
      EXPECT_NE(ask(*c).find("|verified"), std::string::npos);
    }
    expect_refused(server.addr(), client_ctx(pki, {mallory}));
    EXPECT_TRUE(wait_failures(server, 1));
  });
  // A client_auth without client_ca_file is a configuration error.
  run_with(1, [&] {
    auto bad = TlsContext::server({.certificates = {leaf}, .client_auth = TlsClientAuth::require});
    EXPECT_FALSE(bad);
  });
}

// ---------------------------------------------------------------------------------
// Session tickets

// A plain OpenSSL client on a blocking socket: connects to port (offering session, if
// any), pings, and returns whether the session was resumed and the session to offer
// next time (which the caller frees).
struct ClientRun {
  bool ok = false;
  bool resumed = false;
  SSL_SESSION* session = nullptr;
};

ClientRun openssl_client(SSL_CTX* ctx, int port, SSL_SESSION* session) {
  ClientRun run;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return run;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "example.test");
  if (session != nullptr) SSL_set_session(ssl, session);
  char buf[4];
  if (SSL_connect(ssl) == 1 && SSL_write(ssl, "ping", 4) == 4 && SSL_read(ssl, buf, 4) == 4) {
    run.ok = true;
    run.resumed = SSL_session_reused(ssl) == 1;
    run.session = SSL_get1_session(ssl);
  }
  SSL_shutdown(ssl);
  SSL_free(ssl);
  ::close(fd);
  ERR_clear_error();
  return run;
}

// Whether a connection offering session resumes it (on the calling goroutine, its
// thread lent to the blocking client).
bool resumes(SSL_CTX* ctx, int port, SSL_SESSION* session) {
  ClientRun run = goro::blocking([&] { return openssl_client(ctx, port, session); });
  EXPECT_TRUE(run.ok);
  SSL_SESSION_free(run.session);
  return run.resumed;
}

TEST(TlsSessionTickets, ResumeAcrossOneRotationNotTwo) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  SSL_CTX* client = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(client, SSL_VERIFY_NONE, nullptr);
  run_with(2, [&] {
    auto sctx = server_ctx({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    const int port = ln->addr().port();
    WhoServer server(std::move(*ln));

    ClientRun first = goro::blocking([&] { return openssl_client(client, port, nullptr); });
    ASSERT_TRUE(first.ok);
    EXPECT_FALSE(first.resumed);
    EXPECT_TRUE(resumes(client, port, first.session));
    sctx->rotate_session_ticket_keys();
    EXPECT_TRUE(resumes(client, port, first.session)) << "the previous key still decrypts";
    // A reload keeps the ticket keys: sessions outlive a certificate rotation.
    pki.leaf("server", {"example.test"});
    ASSERT_FALSE(sctx->reload());
    EXPECT_TRUE(resumes(client, port, first.session));
    sctx->rotate_session_ticket_keys();
    EXPECT_FALSE(resumes(client, port, first.session)) << "two rotations ago";
    SSL_SESSION_free(first.session);
  });
  SSL_CTX_free(client);
}

TEST(TlsSessionTickets, RotateOnAPeriod) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  SSL_CTX* client = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(client, SSL_VERIFY_NONE, nullptr);
  run_with(2, [&] {
    auto sctx = server_ctx({.certificates = {leaf}, .session_ticket_rotation = 1s});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    const int port = ln->addr().port();
    WhoServer server(std::move(*ln));
    ClientRun first = goro::blocking([&] { return openssl_client(client, port, nullptr); });
    ASSERT_TRUE(first.ok);
    goro::sleep(1200ms);  // one rotation: the key is the previous one
    EXPECT_TRUE(resumes(client, port, first.session));
    goro::sleep(2100ms);  // two periods more: gone
    EXPECT_FALSE(resumes(client, port, first.session));
    SSL_SESSION_free(first.session);
  });
  SSL_CTX_free(client);
}

// ---------------------------------------------------------------------------------
// Abuse

// Clients with untrusted certificates, clients sending garbage instead of a hello and
// clients that hang up at once keep coming (24 at a time, several times as many
// connections as the good clients make); good clients beside them are served every
// time, and the server serves on afterwards.
TEST_P(ProcsTest, TlsBadClientFloodBesideGoodClients) {
  TestPki pki;
  TestPki stranger;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  TlsCertificate alice = pki.client_leaf("alice", "alice", kAliceNames);
  TlsCertificate mallory = stranger.client_leaf("mallory", "mallory", "URI:spiffe://example.org/m");
  run_with(GetParam(), [&] {
    auto sctx = server_ctx({.certificates = {leaf},
                            .client_auth = TlsClientAuth::require,
                            .client_ca_file = pki.ca_file()});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    WhoServer server(std::move(*ln));
    auto good = client_ctx(pki, {alice});
    auto bad = client_ctx(pki, {mallory});

    // Each good client goes on for a second and at least 5 connections (a sanitizer
    // build on a busy machine is slow), 10 s at most; the flood lasts as long.
    const auto start = std::chrono::steady_clock::now();
    std::atomic<int> good_ok{0}, good_failed{0}, bad_served{0}, bad_tries{0};
    std::atomic<int> good_running{4};
    goro::WaitGroup wg;
    for (int i = 0; i < 4; ++i) {
      wg.add(1);
      goro::go([&] {
        for (int mine = 0; std::chrono::steady_clock::now() < start + 10s; ++mine) {
          if (mine >= 5 && std::chrono::steady_clock::now() > start + 1s) break;
          auto c = tls_dial("tcp", server.addr(), good, 5s);
          bool ok = c && ping(*c) && ping(*c);
          (ok ? good_ok : good_failed).fetch_add(1);
        }
        good_running.fetch_sub(1);
        wg.done();
      });
    }
    for (int i = 0; i < 24; ++i) {
      wg.add(1);
      goro::go([&, i] {
        while (good_running.load() > 0) {
          bad_tries.fetch_add(1);
          if (i % 3 == 0) {
            auto c = tls_dial("tcp", server.addr(), bad, 5s);
            if (c && ping(*c)) bad_served.fetch_add(1);
            continue;
          }
          auto c = dial("tcp", server.addr(), 5s);
          if (!c) continue;
          if (i % 3 == 1) {
            static const char junk[] = "\x16\x03\x01\x7f\xff garbage instead of a client hello";
            (void)c->write(junk, sizeof junk);
            (void)c->set_read_deadline(deadline_after(5s));
            char buf[256];
            while (true) {
              auto n = c->read(buf, sizeof buf);
              if (!n || *n == 0) break;
            }
          }
          c->close();
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(good_failed.load(), 0);
    EXPECT_GE(good_ok.load(), 4 * 5) << "good clients starved by the flood";
    EXPECT_EQ(bad_served.load(), 0);
    EXPECT_GT(bad_tries.load(), 4 * good_ok.load()) << "the flood was not one";
    auto c = tls_dial("tcp", server.addr(), good, 5s);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_TRUE(ping(*c));
  });
}

// watch_files reloads when the files change, reports each outcome, and stops with its
// context.
TEST(TlsReload, WatchFilesReloadsOnChange) {
  TestPki pki;
  TlsCertificate leaf = pki.leaf("server", {"example.test"});
  run_with(2, [&] {
    auto sctx = server_ctx({.certificates = {leaf}});
    ASSERT_TRUE(sctx);
    auto ln = tls_listen("tcp", "127.0.0.1:0", sctx);
    ASSERT_TRUE(ln);
    WhoServer server(std::move(*ln));
    auto cctx = client_ctx(pki);
    goro::Chan<std::string> reports(64);
    auto [stop, cancel] = with_cancel(Context());
    watch_files(sctx, 20ms, stop, [&](const goro::Error& e) {
      (void)reports.try_send(e ? e.what() : std::string("ok"));
    });
    // The next report that is a success (or, with want_error, an error): a certificate
    // written before its key may first fail to match.
    auto next_report = [&](bool want_error) -> std::string {
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (std::chrono::steady_clock::now() < until) {
        std::optional<std::string> r;
        goro::select(goro::recv_case(reports, r), goro::timeout_case(100ms));
        if (r && (*r == "ok") != want_error) return *r;
      }
      return "no report";
    };
    const std::string before = sctx->certificates().at(0).sha256;
    pki.leaf("server", {"example.test"});
    EXPECT_EQ(next_report(false), "ok");
    const std::string after = sctx->certificates().at(0).sha256;
    EXPECT_NE(after, before);
    auto c = tls_dial("tcp", server.addr(), cctx, 5s);
    ASSERT_TRUE(c);
    EXPECT_EQ(server_fingerprint(*c), after);

    write_file(leaf.cert_file, "garbage");
    std::string failed = next_report(true);
    EXPECT_NE(failed.find(leaf.cert_file), std::string::npos) << failed;
    EXPECT_EQ(sctx->certificates().at(0).sha256, after);

    cancel();
    goro::sleep(50ms);
    pki.leaf("server", {"example.test"});
    goro::sleep(200ms);
    EXPECT_EQ(sctx->certificates().at(0).sha256, after) << "a stopped watch reloaded";
  });
}

INSTANTIATE_TEST_SUITE_P(Net, ProcsTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::net::testing
