// goro::http::Client over HTTP/2: against goro's own Server (h2c with prior knowledge,
// and h2 over TLS by ALPN) on the same runtime, with 1, 2 and 4 Ps; then against nginx
// (h2 over TLS) and Go's net/http (h2c and TLS), which skip when not installed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <goro/http/client.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/net/errors.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "../net/test_certs.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Remote addresses seen by a server: one per client connection.
struct Seen {
  std::mutex mu;  // held for a few instructions, never across a goro call
  std::set<std::string> remotes;
  void add(std::string_view r) {
    std::lock_guard lock(mu);
    remotes.emplace(r);
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return remotes.size();
  }
};

// A Server on 127.0.0.1 in the current runtime, h2c on; with tls, over TLS offering
// ALPN h2 and http/1.1 (or only http/1.1 with http1_only).
class LocalServer {
 public:
  LocalServer(Handler handler, ServerOptions options = {},
              std::optional<net::TlsCertificate> tls = std::nullopt, bool http1_only = false,
              std::uint16_t port = 0)
      : server_((options.enable_h2c = true, std::move(options)), std::move(handler)) {
    auto ln = net::listen("tcp", "127.0.0.1:" + std::to_string(port));
    EXPECT_TRUE(ln) << (ln ? "" : ln.error().message());
    if (!ln) return;
    listener_.emplace(std::move(*ln));
    port_ = listener_->addr().port();
    if (tls) {
      net::TlsConfig config;
      config.certificates.push_back(*tls);
      config.alpn = http1_only ? std::vector<std::string>{"http/1.1"}
                               : std::vector<std::string>{"h2", "http/1.1"};
      auto ctx = net::TlsContext::server(config);
      EXPECT_TRUE(ctx);
      secure_.emplace(std::move(*listener_), *ctx);
    }
    serving_.add(1);
    goro::go([this] {
      if (secure_) {
        server_.serve(*secure_);
      } else {
        server_.serve(*listener_);
      }
      serving_.done();
    });
  }
  ~LocalServer() { stop(1s); }

  std::error_code stop(std::chrono::nanoseconds grace) {
    if (stopped_ || port_ == 0) return {};
    stopped_ = true;
    std::error_code ec = server_.shutdown(Clock::now() + grace);
    serving_.wait();
    for (int i = 0; i < 400 && server_.connection_count() > 0; ++i) goro::sleep(5ms);
    return ec;
  }

  std::uint16_t port() const { return port_; }
  std::string url(std::string_view path) const {
    return std::string(secure_ ? "https://localhost:" : "http://127.0.0.1:") +
           std::to_string(port_) + std::string(path);
  }

 private:
  Server server_;
  std::optional<net::Listener> listener_;
  std::optional<net::TlsListener> secure_;
  std::uint16_t port_ = 0;
  goro::WaitGroup serving_;
  bool stopped_ = false;
};

// What the handlers saw, shared with the test's goroutines.
struct Observed {
  std::atomic<int> started{0};
  std::atomic<int> cancelled{0};
  std::atomic<std::uint64_t> written{0};
  std::atomic<bool> release{false};
};

Handler app(Seen& seen, Observed& obs) {
  auto r = std::make_shared<Router>();
  r->handle("GET /hello", [&seen](Request& req, ResponseWriter& w) {
    seen.add(req.remote_addr());
    w.header().set("X-Proto", "yes");
    w.text("hello");
  });
  r->handle("POST /echo", [&seen](Request& req, ResponseWriter& w) {
    seen.add(req.remote_addr());
    Result<std::string> body = req.body();
    if (body) w.write(*body);
  });
  // Echoes the body as it comes, chunk by chunk (a bidirectional stream).
  r->handle("POST /stream-echo", [](Request& req, ResponseWriter& w) {
    char buf[16384];
    for (;;) {
      Result<std::size_t> n = req.read(buf, sizeof buf);
      if (!n || *n == 0) break;
      if (w.write(std::string_view(buf, *n))) break;
      w.flush();
    }
  });
  // 8 MiB in 16 KiB writes, counting what the server has handed on.
  r->handle("GET /big", [&obs](Request&, ResponseWriter& w) {
    std::string chunk(16384, 'x');
    for (int i = 0; i < 512; ++i) {
      chunk[0] = static_cast<char>('a' + i % 26);
      if (w.write(chunk)) return;
      obs.written.fetch_add(chunk.size());
    }
  });
  r->handle("GET /trailers", [](Request&, ResponseWriter& w) {
    ResponseController rc(w);
    w.header().set("Content-Type", "application/grpc");
    w.write("payload");
    if (Headers* t = rc.trailer()) {
      t->set("grpc-status", "0");
      t->set("grpc-message", "fine");
    }
  });
  // Waits for its request's context to end (or 5 s), counting the cancellations.
  r->handle("GET /wait", [&obs](Request& req, ResponseWriter& w) {
    obs.started.fetch_add(1);
    int which = goro::select(goro::recv_case(req.context().done()), goro::timeout_case(5s));
    if (which == 0) obs.cancelled.fetch_add(1);
    w.text("waited");
  });
  // Holds until the test releases it.
  r->handle("GET /hold", [&seen, &obs](Request& req, ResponseWriter& w) {
    seen.add(req.remote_addr());
    obs.started.fetch_add(1);
    for (int i = 0; i < 5000 && !obs.release.load(); ++i) goro::sleep(1ms);
    w.text("held");
  });
  r->handle("GET /slow", [](Request&, ResponseWriter& w) {
    goro::sleep(300ms);
    w.text("slow");
  });
  // Fails after part of the body went out: the server resets the stream.
  r->handle("GET /short", [](Request&, ResponseWriter& w) {
    w.write("0123456789");
    w.flush();
    goro::sleep(50ms);  // the head and the bytes are out
    throw std::runtime_error("handler failed midway");
  });
  return [r](Request& req, ResponseWriter& w) { (*r)(req, w); };
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    goro::sleep(1ms);
  }
  return true;
}

// Reads a stream's body to its end.
Result<std::string> read_all(ClientStream& s) {
  std::string out;
  char buf[32768];
  for (;;) {
    Result<std::size_t> n = s.read(buf, sizeof buf);
    if (!n) return n.error();
    if (*n == 0) return out;
    out.append(buf, *n);
  }
}

class ClientH2 : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    pki_ = new net::testing::TestPki();
    leaf_ = new net::TlsCertificate(pki_->leaf("server", {"localhost"}));
  }
  static void TearDownTestSuite() {
    delete leaf_;
    delete pki_;
  }
  void run(std::function<void()> body) {
    goro::run(std::move(body), goro::Config{.maxprocs = GetParam()});
  }
  static ClientOptions h2c() {
    ClientOptions o;
    o.h2c = true;
    return o;
  }
  static ClientOptions tls() {
    ClientOptions o;
    o.ca_file = pki_->ca_file();
    return o;
  }

  static net::testing::TestPki* pki_;
  static net::TlsCertificate* leaf_;
};

net::testing::TestPki* ClientH2::pki_ = nullptr;
net::TlsCertificate* ClientH2::leaf_ = nullptr;

INSTANTIATE_TEST_SUITE_P(Procs, ClientH2, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

TEST_P(ClientH2, SendSpeaksH2cAndH2OverTls) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer plain(app(seen, obs));
    LocalServer secure(app(seen, obs), {}, *leaf_);
    LocalServer old(app(seen, obs), {}, *leaf_, /*http1_only=*/true);
    Client c2(h2c());
    Result<ClientResponse> r = c2.get(plain.url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->version_major, 2);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(r->header("x-proto"), "yes");
    // Bad input is refused before anything is sent; the connection goes on serving.
    ClientRequest bad;
    bad.url = plain.url("/hello");
    bad.headers.set("X-Injected", "a\r\nb: c");
    for (int i = 0; i < 300; ++i) {
      ASSERT_EQ(c2.send(bad).error(), make_error_code(errc::invalid_request));
    }
    bad.headers = Headers();
    bad.method = "GE T";
    EXPECT_EQ(c2.send(bad).error(), make_error_code(errc::invalid_request));
    r = c2.post(plain.url("/echo"), "text/plain", std::string(200000, 'e'));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, std::string(200000, 'e'));

    Client ct(tls());
    r = ct.get(secure.url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->version_major, 2);
    EXPECT_EQ(r->body, "hello");
    // A server that picks HTTP/1.1 by ALPN gets HTTP/1.1, and open_stream says why not.
    r = ct.get(old.url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->version_major, 1);
    EXPECT_EQ(r->body, "hello");
    ClientRequest req;
    req.url = old.url("/hello");
    EXPECT_EQ(ct.open_stream(req).error(), make_error_code(errc::http2_required));
    // HTTP/2 off: HTTP/1.1 to a server that offers h2.
    ClientOptions h1 = tls();
    h1.http2 = false;
    Client c1(h1);
    r = c1.get(secure.url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->version_major, 1);
    // http:// without h2c is HTTP/1.1 only.
    Client plain1;
    req.url = plain.url("/hello");
    EXPECT_EQ(plain1.open_stream(req).error(), make_error_code(errc::http2_required));
    r = plain1.get(plain.url("/hello"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->version_major, 1);
  });
}

TEST_P(ClientH2, HundredGoroutinesShareOneConnection) {
  for (bool over_tls : {false, true}) {
    run([&] {
      Seen seen;
      Observed obs;
      LocalServer server(app(seen, obs), {},
                         over_tls ? std::optional<net::TlsCertificate>(*leaf_) : std::nullopt);
      Client client(over_tls ? tls() : h2c());
      goro::WaitGroup wg;
      std::atomic<int> ok{0};
      for (int g = 0; g < 100; ++g) {
        wg.add(1);
        goro::go([&, g] {
          for (int i = 0; i < 5; ++i) {
            std::string body = "g" + std::to_string(g) + "i" + std::to_string(i);
            Result<ClientResponse> r = client.post(server.url("/echo"), "text/plain", body);
            if (r && r->version_major == 2 && r->body == body) ok.fetch_add(1);
          }
          wg.done();
        });
      }
      wg.wait();
      EXPECT_EQ(ok.load(), 500);
      EXPECT_EQ(seen.count(), 1u) << "calls were spread over several connections";
    });
  }
}

TEST_P(ClientH2, StreamsBothWaysConcurrently) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer server(app(seen, obs));
    Client client(h2c());
    ClientRequest req;
    req.method = "POST";
    req.url = server.url("/stream-echo");
    auto s = client.open_stream(req);
    ASSERT_TRUE(s) << s.error().message();
    ClientStream& stream = **s;
    // 4 MiB each way, more than the stream windows: the writer runs on flow control,
    // the reader (another goroutine) reads slowly.
    constexpr std::size_t kTotal = 4 << 20;
    std::error_code write_error;
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      std::string chunk(16384, 0);
      for (std::size_t sent = 0; sent < kTotal && !write_error; sent += chunk.size()) {
        for (std::size_t i = 0; i < chunk.size(); ++i)
          chunk[i] = static_cast<char>((sent + i) % 251);
        write_error = stream.write(chunk);
      }
      if (!write_error) write_error = stream.close_send();
      wg.done();
    });
    ASSERT_FALSE(stream.wait_response());
    EXPECT_EQ(stream.response().status, 200);
    EXPECT_EQ(stream.response().version_major, 2);
    std::size_t got = 0;
    bool same = true;
    char buf[10000];
    for (int reads = 0;; ++reads) {
      if (reads % 64 == 0) goro::sleep(1ms);
      Result<std::size_t> n = stream.read(buf, sizeof buf);
      ASSERT_TRUE(n) << n.error().message();
      if (*n == 0) break;
      for (std::size_t i = 0; i < *n; ++i)
        same = same && buf[i] == static_cast<char>((got + i) % 251);
      got += *n;
    }
    wg.wait();
    EXPECT_FALSE(write_error) << write_error.message();
    EXPECT_EQ(got, kTotal);
    EXPECT_TRUE(same);
    EXPECT_EQ(stream.write("more"), make_error_code(errc::request_finished));
  });
}

TEST_P(ClientH2, ReaderThatDoesNotReadHoldsTheServerBack) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer server(app(seen, obs));
    Client client(h2c());
    ClientRequest req;
    req.url = server.url("/big");
    auto s = client.open_stream(req);
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_FALSE((*s)->close_send());
    ASSERT_FALSE((*s)->wait_response());
    goro::sleep(300ms);
    // The stream's window (1 MiB) and the server's own buffer, not the 8 MiB.
    EXPECT_LT(obs.written.load(), 3u << 20);
    Result<std::string> body = read_all(**s);
    ASSERT_TRUE(body) << body.error().message();
    ASSERT_EQ(body->size(), 8u << 20);
    EXPECT_EQ((*body)[16384 * 27], 'b');
    EXPECT_EQ(obs.written.load(), 8u << 20);
  });
}

TEST_P(ClientH2, TrailersReachBothSendAndStreams) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer server(app(seen, obs));
    Client client(h2c());
    Result<ClientResponse> r = client.get(server.url("/trailers"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "payload");
    EXPECT_EQ(r->trailers.get("grpc-status"), "0");
    EXPECT_EQ(r->trailers.get("grpc-message"), "fine");
    EXPECT_EQ(r->header("grpc-status"), "");

    ClientRequest req;
    req.url = server.url("/trailers");
    req.headers.set("TE", "trailers");
    auto s = client.open_stream(req);
    ASSERT_TRUE(s);
    ASSERT_FALSE((*s)->close_send());
    ASSERT_FALSE((*s)->wait_response());
    EXPECT_EQ((*s)->response().header("content-type"), "application/grpc");
    Result<std::string> body = read_all(**s);
    ASSERT_TRUE(body);
    EXPECT_EQ(*body, "payload");
    EXPECT_EQ((*s)->response().trailers.get("grpc-status"), "0");
  });
}

TEST_P(ClientH2, ContextCancelsTheStreamOnBothSides) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer server(app(seen, obs));
    Client client(h2c());
    // A stream: the caller parked in wait_response returns the context's error, and the
    // handler's context ends (RST_STREAM CANCEL).
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    ClientRequest req;
    req.url = server.url("/wait");
    req.context = ctx;
    auto s = client.open_stream(req);
    ASSERT_TRUE(s);
    ASSERT_FALSE((*s)->close_send());
    goro::go([&obs, cancel = cancel] {
      wait_until([&] { return obs.started.load() == 1; }, 2s);
      cancel();
    });
    const auto start = Clock::now();
    EXPECT_EQ((*s)->wait_response(), make_error_code(context_errc::canceled));
    EXPECT_LT(Clock::now() - start, 2s);
    EXPECT_TRUE(wait_until([&] { return obs.cancelled.load() == 1; }, 2s));
    EXPECT_EQ((*s)->write("x"), make_error_code(errc::request_finished));

    // send() with a context deadline.
    auto [short_ctx, stop] = goro::with_timeout(goro::background(), 100ms);
    ClientRequest call;
    call.url = server.url("/wait");
    call.context = short_ctx;
    Result<ClientResponse> r = client.send(call);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(context_errc::deadline_exceeded));
    EXPECT_TRUE(wait_until([&] { return obs.cancelled.load() == 2; }, 2s));
    stop();

    // cancel() and a request timeout.
    ClientRequest timed;
    timed.url = server.url("/wait");
    timed.timeout = 100ms;
    r = client.send(timed);
    ASSERT_FALSE(r);
    EXPECT_TRUE(net::is_timeout(r.error())) << r.error().message();
    EXPECT_TRUE(wait_until([&] { return obs.cancelled.load() == 3; }, 2s));
    req.context = goro::background();
    auto s2 = client.open_stream(req);
    ASSERT_TRUE(s2);
    ASSERT_TRUE(wait_until([&] { return obs.started.load() == 4; }, 2s));
    (*s2)->cancel();
    EXPECT_EQ((*s2)->wait_response(), make_error_code(context_errc::canceled));
    EXPECT_TRUE(wait_until([&] { return obs.cancelled.load() == 4; }, 2s));
    // The connection still serves.
    r = client.get(server.url("/hello"));
    ASSERT_TRUE(r);
    EXPECT_EQ(seen.count(), 1u);
  });
}

// A stream given up before its HEADERS left (cancel() or its context right after
// open_stream, or a context ended before it) costs the connection nothing: nghttp2
// drops the queued HEADERS, and no RST_STREAM goes out for a stream the server never
// saw (RFC 9113 6.4 makes that a connection error: GOAWAY, and the next call refused).
TEST_P(ClientH2, StreamGivenUpBeforeItsHeadersLeftSparesTheConnection) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer server(app(seen, obs));
    Client client(h2c());
    ClientRequest echo;
    echo.method = "POST";
    echo.url = server.url("/echo");
    // One unary call the way gRPC makes it: the head, then the body ending the request.
    auto call = [&](int i) {
      auto s = client.open_stream(echo);
      ASSERT_TRUE(s) << "call " << i << ": " << s.error().message();
      const std::string body = "call " + std::to_string(i);
      ASSERT_FALSE((*s)->write(body, true)) << "call " << i;
      std::error_code ec = (*s)->wait_response();
      ASSERT_FALSE(ec) << "call " << i << ": " << ec.message() << ", reset code "
                       << (*s)->reset_code();
      EXPECT_EQ((*s)->response().status, 200);
      Result<std::string> got = read_all(**s);
      ASSERT_TRUE(got) << "call " << i << ": " << got.error().message();
      EXPECT_EQ(*got, body);
    };
    for (int round = 0; round < 3; ++round) {
      // cancel() at once.
      auto s = client.open_stream(echo);
      ASSERT_TRUE(s);
      (*s)->cancel();
      EXPECT_EQ((*s)->wait_response(), make_error_code(context_errc::canceled));
      EXPECT_EQ((*s)->write("late", true), make_error_code(context_errc::canceled));
      s->reset();
      // Dropped at once.
      ASSERT_TRUE(client.open_stream(echo));
      // Its context ended at once: the next call on the stream says so.
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      ClientRequest with_ctx = echo;
      with_ctx.context = ctx;
      auto c = client.open_stream(with_ctx);
      ASSERT_TRUE(c);
      cancel();
      EXPECT_EQ((*c)->write("late", true), make_error_code(context_errc::canceled));
      c->reset();
      for (int i = 0; i < 20; ++i) call(round * 100 + i);
    }
    // A context ended before open_stream: no stream, and nothing sent.
    auto [ended, cancel] = goro::with_cancel(goro::background());
    cancel();
    ClientRequest early = echo;
    early.context = ended;
    auto none = client.open_stream(early);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), make_error_code(context_errc::canceled));
    for (int i = 0; i < 20; ++i) call(1000 + i);
    // Every call went over the first connection: no GOAWAY sent the client elsewhere.
    EXPECT_EQ(seen.count(), 1u);
  });
}

TEST_P(ClientH2, ServerResetIsReported) {
  run([] {
    Seen seen;
    Observed obs;
    LocalServer server(app(seen, obs));
    Client client(h2c());
    ClientRequest req;
    req.url = server.url("/short");
    auto s = client.open_stream(req);
    ASSERT_TRUE(s);
    ASSERT_FALSE((*s)->close_send());
    ASSERT_FALSE((*s)->wait_response());
    Result<std::string> body = read_all(**s);
    ASSERT_FALSE(body);
    EXPECT_EQ(body.error(), make_error_code(errc::stream_reset));
    EXPECT_EQ((*s)->reset_code(), 2u);  // INTERNAL_ERROR
    Result<ClientResponse> r = client.get(server.url("/short"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(errc::stream_reset));
  });
}

TEST_P(ClientH2, MaxConcurrentStreamsOpensAnotherConnection) {
  run([] {
    Seen seen;
    Observed obs;
    ServerOptions options;
    options.http2_max_concurrent_streams = 2;
    LocalServer server(app(seen, obs), options);
    Client client(h2c());
    std::vector<std::unique_ptr<ClientStream>> streams;
    for (int i = 0; i < 5; ++i) {
      ClientRequest req;
      req.url = server.url("/hold");
      auto s = client.open_stream(req);
      ASSERT_TRUE(s) << s.error().message();
      ASSERT_FALSE((*s)->close_send());
      streams.push_back(std::move(*s));
    }
    ASSERT_TRUE(wait_until([&] { return obs.started.load() == 5; }, 3s));
    EXPECT_EQ(seen.count(), 3u);  // 2 + 2 + 1
    obs.release.store(true);
    for (auto& s : streams) {
      ASSERT_FALSE(s->wait_response());
      Result<std::string> body = read_all(*s);
      ASSERT_TRUE(body);
      EXPECT_EQ(*body, "held");
    }
  });
}

TEST_P(ClientH2, GoawayLetsCallsInFlightFinishAndSendsNewOnesElsewhere) {
  run([] {
    Seen seen;
    Observed obs;
    std::uint16_t port;
    Client client(h2c());
    {
      LocalServer first(app(seen, obs));
      port = first.port();
      ASSERT_TRUE(client.get(first.url("/hello")));
      goro::WaitGroup wg;
      std::atomic<int> ok{0};
      for (int i = 0; i < 10; ++i) {
        wg.add(1);
        goro::go([&] {
          Result<ClientResponse> r = client.get(first.url("/slow"));
          if (r && r->body == "slow") ok.fetch_add(1);
          wg.done();
        });
      }
      goro::sleep(100ms);  // the calls are in the server's handlers
      EXPECT_FALSE(first.stop(5s));  // GOAWAY, then waits for them
      wg.wait();
      EXPECT_EQ(ok.load(), 10);
    }
    // A new server on the same port: new calls go to a new connection.
    LocalServer second(app(seen, obs), {}, std::nullopt, false, port);
    ASSERT_EQ(second.port(), port);
    Result<ClientResponse> r = client.get(second.url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(seen.count(), 2u);

    // A server's idle GOAWAY: the next call dials again.
    ServerOptions idle;
    idle.idle_timeout = 100ms;
    LocalServer third(app(seen, obs), idle);
    ASSERT_TRUE(client.get(third.url("/hello")));
    goro::sleep(400ms);
    r = client.get(third.url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(seen.count(), 4u);
  });
}

TEST_P(ClientH2, UnansweredPingLosesTheConnection) {
  run([] {
    // A server that says SETTINGS and then nothing, ever.
    Result<net::Listener> ln = net::listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    goro::WaitGroup done;
    done.add(1);
    goro::go([&] {
      Result<net::Conn> c = ln->accept();
      if (c) {
        static const char settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
        (void)c->write(settings, sizeof settings);
        char buf[4096];
        for (;;) {
          Result<std::size_t> n = c->read(buf, sizeof buf);
          if (!n || *n == 0) break;
        }
      }
      done.done();
    });
    ClientOptions options = h2c();
    options.ping_interval = 100ms;
    options.ping_timeout = 100ms;
    Client client(options);
    ClientRequest req;
    req.url = "http://" + ln->addr().to_string() + "/";
    auto s = client.open_stream(req);
    ASSERT_TRUE(s) << s.error().message();
    const auto start = Clock::now();
    EXPECT_EQ((*s)->wait_response(), make_error_code(errc::connection_lost));
    EXPECT_LT(Clock::now() - start, 2s);
    ln->close();
    done.wait();
  });
}

TEST_P(ClientH2, GoawayRefusesTheStreamsPastItsLastId) {
  run([] {
    // A server that takes two streams, says GOAWAY naming the first, and answers it.
    Result<net::Listener> ln = net::listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(ln);
    goro::WaitGroup done;
    done.add(1);
    std::atomic<bool> both_sent{false};
    goro::go([&] {
      Result<net::Conn> c = ln->accept();
      if (c) {
        static const char settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
        (void)c->write(settings, sizeof settings);
        goro::WaitGroup reading;
        reading.add(1);
        goro::go([&] {
          char buf[4096];
          for (;;) {
            Result<std::size_t> n = c->read(buf, sizeof buf);
            if (!n || *n == 0) break;
          }
          reading.done();
        });
        wait_until([&] { return both_sent.load(); }, 2s);
        goro::sleep(50ms);  // the two HEADERS are in
        static const char goaway[] = {0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
        // HEADERS on stream 1, END_STREAM | END_HEADERS, ":status: 200" (HPACK index 8).
        static const char answer[] = {0, 0, 1, 1, 5, 0, 0, 0, 1, static_cast<char>(0x88)};
        (void)c->write(goaway, sizeof goaway);
        (void)c->write(answer, sizeof answer);
        reading.wait();
      }
      done.done();
    });
    Client client(h2c());
    ClientRequest req;
    req.url = "http://" + ln->addr().to_string() + "/";
    auto first = client.open_stream(req);
    auto second = client.open_stream(req);
    ASSERT_TRUE(first && second);
    ASSERT_FALSE((*first)->close_send());
    ASSERT_FALSE((*second)->close_send());
    both_sent.store(true);
    ASSERT_FALSE((*first)->wait_response());
    EXPECT_EQ((*first)->response().status, 200);
    Result<std::string> body = read_all(**first);
    ASSERT_TRUE(body);
    EXPECT_EQ(*body, "");
    EXPECT_EQ((*second)->wait_response(), make_error_code(errc::stream_reset));
    EXPECT_EQ((*second)->reset_code(), 7u);  // REFUSED_STREAM: safe to retry
    first->reset();
    second->reset();
    ln->close();
    done.wait();
  });
}

// ---- peers: nginx and Go's net/http ----

struct Process {
  pid_t pid = -1;
  ~Process() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

bool installed(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string find_tool(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates)
    if (installed(c)) return c;
  return {};
}

Process spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  Process p;
  if (posix_spawn(&p.pid, args[0], &actions, nullptr, args.data(), environ) != 0) p.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return p;
}

std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool port_open(std::uint16_t port, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The calls every peer gets: a GET, a body echoed or counted, a big download read
// slowly through a stream, and 50 concurrent calls on one connection.
void exercise_peer(Client& client, const std::string& base, bool echoes) {
  Result<ClientResponse> r = client.get(base + "/hello");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->version_major, 2);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  if (echoes) {
    std::string body(300000, 'q');
    r = client.post(base + "/echo", "text/plain", body);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, body);
    EXPECT_EQ(r->trailers.get("x-trailer"), "done");
  }
  ClientRequest req;
  req.url = base + "/big";
  auto s = client.open_stream(req);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_FALSE((*s)->close_send());
  ASSERT_FALSE((*s)->wait_response());
  EXPECT_EQ((*s)->response().status, 200);
  goro::sleep(100ms);
  Result<std::string> big = read_all(**s);
  ASSERT_TRUE(big) << big.error().message();
  EXPECT_EQ(big->size(), 3u << 20);
  goro::WaitGroup wg;
  std::atomic<int> ok{0};
  for (int i = 0; i < 50; ++i) {
    wg.add(1);
    goro::go([&] {
      Result<ClientResponse> x = client.get(base + "/hello");
      if (x && x->body == "hello") ok.fetch_add(1);
      wg.done();
    });
  }
  wg.wait();
  EXPECT_EQ(ok.load(), 50);
}

class ClientH2Peers : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/goro-client-h2-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/big") << std::string(3u << 20, 'b');
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  net::testing::TestPki pki_;
  std::string dir_;
};

TEST_F(ClientH2Peers, Nginx) {
  const std::string nginx = find_tool({"/usr/sbin/nginx", "/usr/bin/nginx"});
  if (nginx.empty()) GTEST_SKIP() << "nginx is not installed";
  // The leaf's key and certificate, in PEM files nginx reads.
  net::TlsCertificate leaf = pki_.leaf("server", {"localhost"});
  const std::uint16_t port = free_port();
  std::ofstream(dir_ + "/hello") << "hello";
  std::ofstream conf(dir_ + "/nginx.conf");
  conf << "daemon off;\nworker_processes 1;\npid " << dir_ << "/nginx.pid;\n"
       << "error_log " << dir_ << "/error.log;\nevents {}\nhttp {\n"
       << " access_log off;\n client_body_temp_path " << dir_ << ";\n"
       << " proxy_temp_path " << dir_ << ";\n fastcgi_temp_path " << dir_ << ";\n"
       << " uwsgi_temp_path " << dir_ << ";\n scgi_temp_path " << dir_ << ";\n"
       << " server {\n  listen 127.0.0.1:" << port << " ssl http2;\n"
       << "  ssl_certificate " << leaf.cert_file << ";\n"
       << "  ssl_certificate_key " << leaf.key_file << ";\n"
       << "  root " << dir_ << ";\n  default_type text/plain;\n }\n}\n";
  conf.close();
  Process p = spawn({nginx, "-p", dir_, "-c", dir_ + "/nginx.conf"}, dir_ + "/nginx.log");
  ASSERT_GT(p.pid, 0);
  ASSERT_TRUE(port_open(port, 10s)) << slurp(dir_ + "/nginx.log") << slurp(dir_ + "/error.log");
  goro::run(
      [&] {
        ClientOptions options;
        options.ca_file = pki_.ca_file();
        Client client(options);
        exercise_peer(client, "https://localhost:" + std::to_string(port), false);
      },
      goro::Config{.maxprocs = 2});
}

constexpr const char* kGoServer = R"(package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "not HTTP/2", 500)
			return
		}
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Trailer")
		io.Copy(w, r.Body)
		w.Header().Set("X-Trailer", "done")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("b", 3<<20))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	cert, err := tls.LoadX509KeyPair(os.Args[1], os.Args[2])
	if err != nil {
		panic(err)
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port, plain.Addr().(*net.TCPAddr).Port)
	go (&http.Server{Handler: h2c.NewHandler(mux, &http2.Server{})}).Serve(plain)
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}}
	srv.ServeTLS(ln, "", "")
}
)";

// Go's net/http over TLS (ALPN h2), and with h2c (golang.org/x/net/http2/h2c).
TEST_F(ClientH2Peers, GoNetHttp) {
  const std::string go = find_tool({"/usr/bin/go", "/usr/lib/go/bin/go"});
  if (go.empty()) GTEST_SKIP() << "go is not installed";
  std::ofstream(dir_ + "/server.go") << kGoServer;
  const std::string binary = dir_ + "/server";
  std::string build = "cd " + dir_ + " && GO111MODULE=off GOPATH=" + dir_ +
                      "/gopath:/usr/share/gocode GOCACHE=" + dir_ + "/cache timeout 180 " + go +
                      " build -o " + binary + " server.go > " + dir_ + "/build.log 2>&1";
  ASSERT_EQ(std::system(build.c_str()), 0) << slurp(dir_ + "/build.log");
  net::TlsCertificate leaf = pki_.leaf("server", {"localhost"});
  Process p = spawn({binary, leaf.cert_file, leaf.key_file}, dir_ + "/server.log");
  ASSERT_GT(p.pid, 0);
  std::string ports;
  for (int i = 0; i < 500 && ports.empty(); ++i) {
    std::string out = slurp(dir_ + "/server.log");
    if (out.find('\n') != std::string::npos) ports = out.substr(0, out.find('\n'));
    if (ports.empty()) std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(ports.find(' '), std::string::npos) << slurp(dir_ + "/server.log");
  const std::string tls_port = ports.substr(0, ports.find(' '));
  const std::string h2c_port = ports.substr(ports.find(' ') + 1);
  goro::run(
      [&] {
        ClientOptions options;
        options.ca_file = pki_.ca_file();
        Client client(options);
        exercise_peer(client, "https://localhost:" + tls_port, true);
        ClientOptions plain;
        plain.h2c = true;
        Client h2c_client(plain);
        exercise_peer(h2c_client, "http://127.0.0.1:" + h2c_port, true);
      },
      goro::Config{.maxprocs = 2});
}

}  // namespace
}  // namespace goro::http::test
