// goro::http::Client against goro::http::Server, both on one runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include <goro/http/client.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/router.hpp>
#include <goro/net/errors.hpp>

#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;

// Remote addresses seen by the server: one per client connection.
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

Handler app(Seen& seen) {
  Router r;
  r.handle("/", [&seen](Request& req, ResponseWriter& w) {
    seen.add(req.remote_addr());
    w.text(std::string(req.method()) + " " + std::string(req.target()));
  });
  r.handle("POST /echo", [](Request& req, ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (!body) return;
    w.header().set("Content-Type", req.header("content-type"));
    w.write(*body);
  });
  r.handle("GET /stream", [](Request&, ResponseWriter& w) {
    for (int i = 0; i < 100; ++i) {
      w.write(std::string(1000, static_cast<char>('a' + i % 26)));
      w.flush();
    }
  });
  r.handle("GET /big", [](Request&, ResponseWriter& w) { w.write(std::string(300000, 'z')); });
  r.handle("GET /slow", [](Request&, ResponseWriter& w) {
    goro::sleep(500ms);
    w.text("late");
  });
  r.handle("GET /nocontent", [](Request&, ResponseWriter& w) { w.set_status(204); });
  r.handle("GET /redirect", [](Request&, ResponseWriter& w) {
    w.header().set("Location", "/landed");
    w.set_status(302);
  });
  r.handle("GET /relative/redirect", [](Request&, ResponseWriter& w) {
    w.header().set("Location", "next");
    w.set_status(307);
  });
  r.handle("GET /loop", [](Request&, ResponseWriter& w) {
    w.header().set("Location", "/loop");
    w.set_status(302);
  });
  r.handle("GET /headers", [](Request& req, ResponseWriter& w) {
    w.header().add("X-Multi", "1");
    w.header().add("X-Multi", "2");
    w.text(std::string(req.header("x-custom")) + "|" + std::string(req.header("user-agent")));
  });
  return r;
}

TEST(Client, GetPostAndKeepAlivePool) {
  Seen seen;
  with_server(app(seen), {}, [&](const std::string& base) {
    Client client;
    for (int i = 0; i < 20; ++i) {
      Result<ClientResponse> r = client.get(base + "/n/" + std::to_string(i) + "?x=1");
      ASSERT_TRUE(r) << r.error().message();
      EXPECT_EQ(r->status, 200);
      EXPECT_EQ(r->reason, "OK");
      EXPECT_EQ(r->body, "GET /n/" + std::to_string(i) + "?x=1");
    }
    EXPECT_EQ(seen.count(), 1u) << "20 requests over one pooled connection";

    Result<ClientResponse> p = client.post(base + "/echo", "application/x-test", "payload");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->body, "payload");
    EXPECT_EQ(p->header("content-type"), "application/x-test");
  });
}

TEST(Client, ChunkedAndLargeBodies) {
  Seen seen;
  with_server(app(seen), {}, [&](const std::string& base) {
    Client client;
    Result<ClientResponse> s = client.get(base + "/stream");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->header("transfer-encoding"), "chunked");
    ASSERT_EQ(s->body.size(), 100000u);
    EXPECT_EQ(s->body[99999], static_cast<char>('a' + 99 % 26));
    Result<ClientResponse> b = client.get(base + "/big");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->body, std::string(300000, 'z'));
    Result<ClientResponse> n = client.get(base + "/nocontent");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->status, 204);
    ClientRequest head;
    head.method = "HEAD";
    head.url = base + "/big";
    Result<ClientResponse> h = client.send(head);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->header("content-length"), "300000");
    EXPECT_TRUE(h->body.empty());
    // The connection is still in sync after HEAD.
    Result<ClientResponse> after = client.get(base + "/after-head");
    ASSERT_TRUE(after);
    EXPECT_EQ(after->body, "GET /after-head");
  });
}

TEST(Client, HeadersBothWays) {
  Seen seen;
  with_server(app(seen), {}, [&](const std::string& base) {
    Client client;
    ClientRequest req;
    req.url = base + "/headers";
    req.headers.set("X-Custom", "value");
    Result<ClientResponse> r = client.send(req);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "value|goro-http");
    int multi = 0;
    for (HeaderField f : r->headers) multi += iequals(f.name, "x-multi");
    EXPECT_EQ(multi, 2);
  });
}

TEST(Client, Errors) {
  Seen seen;
  with_server(app(seen), {}, [&](const std::string& base) {
    ClientOptions small;
    small.max_body_bytes = 1000;
    small.read_timeout = 100ms;
    Client client(small);
    EXPECT_EQ(client.get("ftp://x/").error(), make_error_code(errc::bad_url));
    EXPECT_EQ(client.get("http:///nohost").error(), make_error_code(errc::bad_url));
    EXPECT_EQ(client.get(base + "/big").error(), make_error_code(errc::body_too_large));
    Result<ClientResponse> slow = client.get(base + "/slow");
    ASSERT_FALSE(slow);
    EXPECT_TRUE(net::is_timeout(slow.error())) << slow.error().message();
    // A port nobody listens on.
    Result<net::Listener> l = net::listen("tcp", "127.0.0.1:0");
    ASSERT_TRUE(l);
    std::string dead = "http://" + l->addr().to_string() + "/";
    l->close();
    Result<ClientResponse> refused = client.get(dead);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), std::errc::connection_refused);
  });
}

TEST(Client, RetriesWhenTheServerDroppedAnIdleConnection) {
  Seen seen;
  ServerOptions options;
  options.idle_timeout = 50ms;
  with_server(app(seen), options, [&](const std::string& base) {
    Client client;
    ASSERT_TRUE(client.get(base + "/a"));
    goro::sleep(200ms);  // the server closes the pooled connection meanwhile
    Result<ClientResponse> r = client.get(base + "/b");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "GET /b");
    EXPECT_EQ(seen.count(), 2u);
  });
}

TEST(Client, RedirectsOffByDefault) {
  Seen seen;
  with_server(app(seen), {}, [&](const std::string& base) {
    Client plain;
    Result<ClientResponse> r = plain.get(base + "/redirect");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 302);
    EXPECT_EQ(r->header("location"), "/landed");

    ClientOptions follow;
    follow.max_redirects = 3;
    Client following(follow);
    Result<ClientResponse> f = following.get(base + "/redirect");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->status, 200);
    EXPECT_EQ(f->body, "GET /landed");
    Result<ClientResponse> rel = following.get(base + "/relative/redirect");
    ASSERT_TRUE(rel);
    EXPECT_EQ(rel->body, "GET /relative/next");
    EXPECT_EQ(following.get(base + "/loop").error(), make_error_code(errc::too_many_redirects));
  });
}

TEST(Client, HttpsVerifiesTheServer) {
  net::testing::TestPki pki;
  net::TlsCertificate leaf = pki.leaf("server", {"localhost"});
  Seen seen;
  with_server(
      app(seen), {},
      [&](const std::string& base) {
        ClientOptions trusted;
        trusted.ca_file = pki.ca_file();
        Client client(trusted);
        for (int i = 0; i < 3; ++i) {
          Result<ClientResponse> r = client.get(base + "/tls");
          ASSERT_TRUE(r) << r.error().message();
          EXPECT_EQ(r->body, "GET /tls");
        }
        EXPECT_EQ(seen.count(), 1u);
        Client untrusting;  // the system's CAs do not know the test CA
        Result<ClientResponse> bad = untrusting.get(base + "/tls");
        ASSERT_FALSE(bad);
        EXPECT_EQ(bad.error().category(), net::x509_category()) << bad.error().message();
      },
      2, leaf);
}

TEST(Url, Parse) {
  Result<Url> u = parse_url("http://example.com");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
  u = parse_url("HTTPS://[::1]:8443/a/b?c=d#frag");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->target, "/a/b?c=d");
  u = parse_url("http://h:1?q");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->target, "/?q");
  EXPECT_FALSE(parse_url("http://h:0/"));
  EXPECT_FALSE(parse_url("http://h:99999/"));
  EXPECT_FALSE(parse_url("http://user@h/"));
  EXPECT_FALSE(parse_url("h/path"));
}

}  // namespace
}  // namespace goro::http::test
