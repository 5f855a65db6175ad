// How the server ends a connection after an error response (a lingering close) and how
// a handler notices that the client left (Request::client_gone): the same over plain
// TCP and over TLS, since the server sees both only as a net::Stream.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include <goro/http/server.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/runtime.hpp>

#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;

class ServerClose : public ::testing::TestWithParam<bool> {
 protected:
  bool tls() const { return GetParam(); }

  std::optional<net::TlsCertificate> certificate() {
    if (!tls()) return std::nullopt;
    return pki_.leaf("server", {"localhost"});
  }

  // A client connection to base ("http://127.0.0.1:<port>" or "https://localhost:<port>").
  std::unique_ptr<net::Stream> connect(const std::string& base) {
    std::string address = "127.0.0.1:" + base.substr(base.rfind(':') + 1);
    if (!tls()) {
      Result<net::Conn> c = net::dial("tcp", address, 5s);
      EXPECT_TRUE(c) << c.error().message();
      return c ? std::make_unique<net::Conn>(std::move(*c)) : nullptr;
    }
    auto ctx = net::TlsContext::client({.server_name = "localhost", .ca_file = pki_.ca_file()});
    EXPECT_TRUE(ctx) << ctx.error().message();
    if (!ctx) return nullptr;
    Result<net::TlsConn> c = net::tls_dial("tcp", address, *ctx, 5s);
    EXPECT_TRUE(c) << c.error().message();
    return c ? std::make_unique<net::TlsConn>(std::move(*c)) : nullptr;
  }

 private:
  net::testing::TestPki pki_;
};

// A 413 for a body the client is still sending: the server half-closes and keeps reading
// for a while instead of closing, so the client reads the whole answer and a clean end
// of stream, and can go on sending without being reset.
TEST_P(ServerClose, ErrorResponseLingers) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  options.error_log = [](std::string_view) {};
  auto handler = [](Request&, ResponseWriter& w) { w.text("ok"); };
  with_server(
      handler, options,
      [&](const std::string& base) {
        std::unique_ptr<net::Stream> c = connect(base);
        ASSERT_TRUE(c);
        ASSERT_FALSE(c->set_deadline(net::deadline_after(5s)));
        std::string head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n";
        ASSERT_TRUE(c->write(head.data(), head.size()));
        std::string answer;
        char buf[4096];
        for (;;) {
          Result<std::size_t> n = c->read(buf, sizeof buf);
          ASSERT_TRUE(n) << n.error().message() << " after " << answer.size() << " bytes";
          if (*n == 0) break;
          answer.append(buf, *n);
        }
        EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer;
        EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
        // The server reads and discards this; a server that had closed would reset the
        // connection at the first segment, and the writes after it would fail.
        const std::string body(4096, 'b');
        for (int i = 0; i < 32; ++i) {
          Result<std::size_t> w = c->write(body.data(), body.size());
          ASSERT_TRUE(w) << "write " << i << ": " << w.error().message();
          goro::sleep(2ms);
        }
        c->close();
      },
      2, certificate());
}

// A handler polling client_gone() learns that the client closed the connection while
// it was working, without reading from it.
TEST_P(ServerClose, ClientGoneIsSeen) {
  std::atomic<int> gone{0};
  std::atomic<int> started{0};
  auto handler = [&](Request& req, ResponseWriter& w) {
    started.store(1);
    for (int i = 0; i < 300; ++i) {
      if (req.client_gone()) {
        gone.store(1);
        return;
      }
      goro::sleep(10ms);
    }
    w.text("still here");
  };
  ServerOptions options;
  options.error_log = [](std::string_view) {};
  with_server(
      handler, options,
      [&](const std::string& base) {
        std::unique_ptr<net::Stream> c = connect(base);
        ASSERT_TRUE(c);
        std::string request = "GET /work HTTP/1.1\r\nHost: x\r\n\r\n";
        ASSERT_TRUE(c->write(request.data(), request.size()));
        for (int i = 0; i < 500 && started.load() == 0; ++i) goro::sleep(2ms);
        ASSERT_EQ(started.load(), 1);
        goro::sleep(30ms);
        EXPECT_EQ(gone.load(), 0) << "the client is still there";
        c->close();
        for (int i = 0; i < 300 && gone.load() == 0; ++i) goro::sleep(10ms);
        EXPECT_EQ(gone.load(), 1);
      },
      2, certificate());
}

INSTANTIATE_TEST_SUITE_P(Http, ServerClose, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Tls") : std::string("Tcp");
                         });

}  // namespace
}  // namespace goro::http::test
