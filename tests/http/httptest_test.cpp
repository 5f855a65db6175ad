// goro::http::httptest: what record() returns for what a handler did (through the real
// server code, limits and middleware included), and the test servers over real
// sockets, closing with a request in flight included.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http {
namespace {

namespace ht = httptest;
using namespace std::chrono_literals;

// Runs fn as the main goroutine of a runtime with procs Ps.
template <class F>
void on_runtime(int procs, F fn) {
  goro::run(fn, goro::Config{.maxprocs = procs});
}

TEST(HttptestRequest, WireCarriesHostFramingAndHeadersInOrder) {
  EXPECT_EQ(ht::new_request("GET", "/a?b=1").header("X-One", "1").header("x-two", "2").wire(),
            "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nX-One: 1\r\nx-two: 2\r\n\r\n");
  EXPECT_EQ(ht::new_request("POST", "http://api.test:8080/p", "hello").wire(),
            "POST http://api.test:8080/p HTTP/1.1\r\nHost: api.test:8080\r\n"
            "Content-Length: 5\r\n\r\nhello");
  EXPECT_EQ(ht::new_request("PUT", "/p", "abcde").chunked(2).version(1, 1).wire(),
            "PUT /p HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
            "2\r\nab\r\n2\r\ncd\r\n1\r\ne\r\n0\r\n\r\n");
  EXPECT_EQ(ht::new_request("POST", "/p").header("Host", "h").version(1, 0).wire(),
            "POST /p HTTP/1.0\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
}

// A field sent several times: every value, in order (a Vary check needs them all).
TEST(HttptestRecord, EveryValueOfARepeatedField) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(
        [](Request&, ResponseWriter& w) {
          w.header().add("Vary", "Accept-Encoding");
          w.header().add("Set-Cookie", "a=1");
          w.header().add("vary", "Origin");
          w.text("ok");
        },
        ht::new_request("GET", "/"));
    EXPECT_EQ(r.header("vary"), "Accept-Encoding");
    EXPECT_EQ(r.header_values("Vary"),
              (std::vector<std::string_view>{"Accept-Encoding", "Origin"}));
    EXPECT_EQ(r.header_values("set-cookie"), (std::vector<std::string_view>{"a=1"}));
    EXPECT_TRUE(r.header_values("x-none").empty());
    Headers h;
    h.add("Link", "</a>");
    h.add("LINK", "</b>");
    EXPECT_EQ(h.values("link"), (std::vector<std::string_view>{"</a>", "</b>"}));
  });
}

// The split of a target into path and query (and the decoding of a path with an
// escape) is found eight bytes at a time: '?' and a "%41" at every offset of targets
// of 1 to 25 bytes, against the plain reading of the target.
TEST(HttptestRequest, PathAndQueryAtEveryOffsetOfTheTarget) {
  on_runtime(1, [] {
    Handler handler = [](Request& req, ResponseWriter& w) {
      w.text(std::string(req.path()) + "|" + std::string(req.raw_path()) + "|" +
             std::string(req.raw_query()));
    };
    int checked = 0;
    for (std::size_t size = 0; size <= 20; ++size) {
      for (std::size_t q = 0; q <= size + 1; ++q) {      // size + 1: no '?'
        for (std::size_t pct = 0; pct <= size + 1; ++pct) {  // size + 1: no escape
          // size pieces "b", then "%41" inserted before piece pct, and "?" before piece q
          // of those.
          std::vector<std::string> pieces(size, "b");
          if (pct <= size) pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(pct), "%41");
          if (q <= size) pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(q), "?");
          std::string target = "/";
          for (const std::string& piece : pieces) target += piece;
          const std::size_t split = target.find('?');
          const std::string raw_path = target.substr(0, split);
          const std::string query = split == std::string::npos ? "" : target.substr(split + 1);
          std::string path = raw_path;
          if (std::size_t at = path.find("%41"); at != std::string::npos) path.replace(at, 3, "A");
          ht::Recorded r = ht::record(handler, ht::new_request("GET", target));
          ASSERT_EQ(r.body, path + "|" + raw_path + "|" + query) << target;
          ++checked;
        }
      }
    }
    EXPECT_EQ(checked, 3794);  // the sum of (size + 2)^2 over the sizes
  });
}

TEST(HttptestRecord, ReturnsTheStatusHeadersAndBodyTheHandlerWrote) {
  on_runtime(1, [] {
    Handler handler = [](Request&, ResponseWriter& w) {
      w.header().set("X-Request-Id", "abc");
      w.header().add("Set-Cookie", "a=1");
      w.header().add("Set-Cookie", "b=2");
      w.json("{\"ok\":true}", 201);
    };
    ht::Recorded r = ht::record(handler, ht::new_request("GET", "/"));
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(r.reason, "Created");
    EXPECT_EQ(r.header("x-request-id"), "abc");
    EXPECT_EQ(r.header("CONTENT-TYPE"), "application/json");
    EXPECT_EQ(r.header("content-length"), "11");
    EXPECT_EQ(r.header("server"), "goro");
    EXPECT_FALSE(r.header("date").empty());
    int cookies = 0;
    for (HeaderField f : r.headers) cookies += iequals(f.name, "set-cookie");
    EXPECT_EQ(cookies, 2);
    EXPECT_EQ(r.body, "{\"ok\":true}");
    EXPECT_FALSE(r.flushed);
    EXPECT_FALSE(r.chunked);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.raw.rfind("HTTP/1.1 201 Created\r\n", 0), 0u);

    ht::Recorded head = ht::record(handler, ht::new_request("HEAD", "/"));
    EXPECT_EQ(head.status, 201);
    EXPECT_EQ(head.header("content-length"), "11");
    EXPECT_EQ(head.body, "");
  });
}

TEST(HttptestRecord, AStreamedBodyIsRecordedChunkedAndDecoded) {
  on_runtime(2, [] {
    ht::Recorded r = ht::record(
        [](Request&, ResponseWriter& w) {
          for (int i = 0; i < 3; ++i) {
            w.write("part " + std::to_string(i) + ";");
            w.flush();
            goro::sleep(1ms);
          }
        },
        ht::new_request("GET", "/stream"));
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.flushed);
    EXPECT_TRUE(r.chunked);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.header("transfer-encoding"), "chunked");
    EXPECT_EQ(r.body, "part 0;part 1;part 2;");
  });
}

TEST(HttptestRecord, AFlushWithContentLengthAndAnOverflowingBodyCountAsFlushed) {
  on_runtime(1, [] {
    ht::Recorded sized = ht::record(
        [](Request&, ResponseWriter& w) {
          w.header().set("Content-Length", "10");
          w.write("01234");
          w.flush();
          w.write("56789");
        },
        ht::new_request("GET", "/"));
    EXPECT_TRUE(sized.flushed);
    EXPECT_FALSE(sized.chunked);
    EXPECT_TRUE(sized.complete);
    EXPECT_EQ(sized.body, "0123456789");

    ServerOptions small;
    small.write_buffer_size = 1024;
    ht::Recorded big = ht::record(
        [](Request&, ResponseWriter& w) { w.write(std::string(5000, 'x')); },
        ht::new_request("GET", "/"), small);
    EXPECT_TRUE(big.flushed);
    EXPECT_TRUE(big.chunked);
    EXPECT_EQ(big.body, std::string(5000, 'x'));

    ht::Recorded buffered = ht::record(
        [](Request&, ResponseWriter& w) { w.write(std::string(1000, 'y')); },
        ht::new_request("GET", "/"), small);
    EXPECT_FALSE(buffered.flushed);
  });
}

// Echoes what the handler saw of the request.
void echo_request(Request& req, ResponseWriter& w) {
  Result<std::string> body = req.body();
  if (!body) {
    w.text("body: " + body.error().message(), 500);
    return;
  }
  w.text(std::string(req.method()) + " " + std::string(req.path()) + " q=" +
         req.query("q").value_or("-") + " token=" + std::string(req.header("x-token")) +
         " from " + std::string(req.remote_addr()) + " body=" + *body);
}

TEST(HttptestRecord, TheHandlerReadsTheBodyHeadersAndRemoteAddress) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(echo_request, ht::new_request("POST", "/items?q=a%20b", "payload")
                                                  .header("X-Token", "t0k")
                                                  .remote_addr("10.1.2.3:4567"));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "POST /items q=a b token=t0k from 10.1.2.3:4567 body=payload");

    ht::Recorded chunked =
        ht::record(echo_request, ht::new_request("PUT", "/c", "abcdefghij").chunked(3));
    EXPECT_EQ(chunked.body, "PUT /c q=- token= from 192.0.2.1:1234 body=abcdefghij");

    ht::Recorded v6 = ht::record(echo_request, ht::new_request("GET", "/").remote_addr("[::1]:80"));
    EXPECT_EQ(v6.body, "GET / q=- token= from [::1]:80 body=");
  });
}

TEST(HttptestRecord, ABodyOverMaxBodyBytesIsAnswered413) {
  on_runtime(1, [] {
    ServerOptions options;
    options.max_body_bytes = 10;
    bool called = false;
    Handler handler = [&called](Request& req, ResponseWriter& w) {
      called = true;
      echo_request(req, w);
    };
    ht::Recorded declared =
        ht::record(handler, ht::new_request("POST", "/", std::string(11, 'x')), options);
    EXPECT_EQ(declared.status, 413);
    EXPECT_EQ(declared.header("connection"), "close");
    EXPECT_FALSE(called) << "a Content-Length over the limit is refused before the handler";

    // Chunked: found out while the handler reads; the server answers by itself.
    ht::Recorded streamed = ht::record(
        handler, ht::new_request("POST", "/", std::string(11, 'x')).chunked(4), options);
    EXPECT_TRUE(called);
    EXPECT_EQ(streamed.status, 413);

    ht::Recorded fits =
        ht::record(handler, ht::new_request("POST", "/", std::string(10, 'x')), options);
    EXPECT_EQ(fits.status, 200);
  });
}

TEST(HttptestRecord, MalformedRequestsGetTheServersErrorReplies) {
  on_runtime(1, [] {
    bool called = false;
    Handler handler = [&called](Request& req, ResponseWriter& w) {
      called = true;
      echo_request(req, w);
    };
    EXPECT_EQ(ht::record(handler, ht::new_request("GET", "/").header("Bad Name", "x")).status, 400);
    EXPECT_EQ(ht::record(handler, ht::new_request("GET", "/").version(2, 0)).status, 505);
    ServerOptions options;
    options.max_request_line = 16;
    EXPECT_EQ(ht::record(handler, ht::new_request("GET", "/" + std::string(40, 'a')), options).status,
              414);
    EXPECT_FALSE(called);
    // Framing set by hand: the body ends before its Content-Length, as when the client
    // closes inside it; the handler's read fails and the server answers 400 itself.
    ht::Recorded cut =
        ht::record(handler, ht::new_request("POST", "/", "abc").header("Content-Length", "10"));
    EXPECT_TRUE(called);
    EXPECT_EQ(cut.status, 400);
    EXPECT_EQ(cut.header("connection"), "close");
  });
}

TEST(HttptestRecord, ARouterBehindMiddlewareIsTestedThroughTheRecorder) {
  on_runtime(2, [] {
    std::vector<std::string> log;
    Router router;
    router.handle("GET /users/{id}", [](Request& req, ResponseWriter& w) {
      w.json("{\"id\":\"" + std::string(req.path_value("id")) + "\"}");
    });
    router.handle("POST /users", [](Request& req, ResponseWriter& w) {
      w.text("created " + req.body().value_or("?"), 201);
    });
    router.handle("GET /panic", [](Request&, ResponseWriter&) -> void {
      throw std::runtime_error("boom");
    });
    Middleware tag = [](Handler next) -> Handler {
      return [next](Request& req, ResponseWriter& w) {
        w.header().set("X-Tagged", "yes");
        next(req, w);
      };
    };
    Handler app = chain(router, {recover([&log](std::string_view line) { log.emplace_back(line); }),
                                 access_log([&log](std::string_view line) { log.emplace_back(line); }),
                                 tag});

    ht::Recorded user = ht::record(app, ht::new_request("GET", "/users/7"));
    EXPECT_EQ(user.status, 200);
    EXPECT_EQ(user.body, "{\"id\":\"7\"}");
    EXPECT_EQ(user.header("x-tagged"), "yes");

    ht::Recorded created = ht::record(app, ht::new_request("POST", "/users", "ann"));
    EXPECT_EQ(created.status, 201);
    EXPECT_EQ(created.body, "created ann");

    EXPECT_EQ(ht::record(app, ht::new_request("GET", "/nowhere")).status, 404);
    ht::Recorded wrong_method = ht::record(app, ht::new_request("DELETE", "/users/7"));
    EXPECT_EQ(wrong_method.status, 405);
    EXPECT_NE(wrong_method.header("allow").find("GET"), std::string_view::npos);

    ht::Recorded panic = ht::record(app, ht::new_request("GET", "/panic"));
    EXPECT_EQ(panic.status, 500);
    EXPECT_EQ(panic.header("x-tagged"), "yes") << "recover keeps the headers already set";

    bool logged_request = false, logged_panic = false;
    for (const std::string& line : log) {
      logged_request |= line.find("\"GET /users/7 HTTP/1.1\" 200") != std::string::npos &&
                        line.rfind("192.0.2.1:1234", 0) == 0;
      logged_panic |= line.find("boom") != std::string::npos;
    }
    EXPECT_TRUE(logged_request);
    EXPECT_TRUE(logged_panic);
  });
}

TEST(HttptestRecord, TheTimeoutMiddlewareAnswers503AndWaitsForTheHandler) {
  on_runtime(2, [] {
    std::atomic<bool> handler_returned{false};
    Handler slow = chain(
        [&](Request&, ResponseWriter& w) {
          goro::sleep(200ms);
          w.text("late");
          handler_returned.store(true);
        },
        {timeout(20ms)});
    auto start = std::chrono::steady_clock::now();
    ht::Recorded r = ht::record(slow, ht::new_request("GET", "/"));
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(handler_returned.load()) << "the connection waits for the handler";
    EXPECT_GE(std::chrono::steady_clock::now() - start, 190ms);

    ht::Recorded fast = ht::record(chain(echo_request, {timeout(1s)}),
                                   ht::new_request("POST", "/f", "quick"));
    EXPECT_EQ(fast.status, 200);
    EXPECT_EQ(fast.body, "POST /f q=- token= from 192.0.2.1:1234 body=quick");
  });
}

TEST(HttptestRecord, AHandlerThrowingAfterItFlushedLeavesAnIncompleteResponse) {
  on_runtime(1, [] {
    ServerOptions options;
    std::vector<std::string> errors;
    options.error_log = [&errors](std::string_view m) { errors.emplace_back(m); };
    ht::Recorded r = ht::record(
        [](Request&, ResponseWriter& w) {
          w.write("half");
          w.flush();
          throw std::runtime_error("midway");
        },
        ht::new_request("GET", "/"), options);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.flushed);
    EXPECT_FALSE(r.complete);
    EXPECT_EQ(r.body, "half");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("midway"), std::string::npos);
  });
}

TEST(HttptestRecord, WorksFromAThreadThatIsNotAGoroutine) {
  ASSERT_EQ(goro::goid(), 0u);
  ht::Recorded r = ht::record(
      [](Request& req, ResponseWriter& w) {
        goro::sleep(1ms);
        w.text("goroutine " + std::to_string(goro::goid() != 0) + " " + std::string(req.path()));
      },
      ht::new_request("GET", "/plain"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "goroutine 1 /plain");
}

class HttptestRecordProcs : public ::testing::TestWithParam<int> {};

TEST_P(HttptestRecordProcs, ManyGoroutinesRecordAtOnce) {
  on_runtime(GetParam(), [] {
    constexpr int kGoroutines = 32;
    std::vector<std::string> bodies(kGoroutines);
    goro::WaitGroup wg;
    for (int i = 0; i < kGoroutines; ++i) {
      wg.add(1);
      goro::go([&, i] {
        ht::Recorded r = ht::record(echo_request,
                                    ht::new_request("POST", "/g/" + std::to_string(i),
                                                    std::string(static_cast<std::size_t>(i), 'b')));
        bodies[static_cast<std::size_t>(i)] = r.body;
        wg.done();
      });
    }
    wg.wait();
    for (int i = 0; i < kGoroutines; ++i) {
      EXPECT_EQ(bodies[static_cast<std::size_t>(i)],
                "POST /g/" + std::to_string(i) + " q=- token= from 192.0.2.1:1234 body=" +
                    std::string(static_cast<std::size_t>(i), 'b'));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ps, HttptestRecordProcs, ::testing::Values(1, 2, 4));

TEST(HttptestServer, AnswersOverRealSocketsThroughItsClient) {
  on_runtime(2, [] {
    Result<ht::Server> srv = ht::Server::start(echo_request);
    ASSERT_TRUE(srv) << srv.error().message();
    EXPECT_EQ(srv->url(), "http://127.0.0.1:" + std::to_string(srv->addr().port()));
    EXPECT_NE(srv->addr().port(), 0);

    constexpr int kCalls = 8;
    std::vector<std::string> bodies(kCalls);
    goro::WaitGroup wg;
    for (int i = 0; i < kCalls; ++i) {
      wg.add(1);
      goro::go([&, i] {
        Result<ClientResponse> r = srv->client().post(srv->url() + "/c?q=" + std::to_string(i),
                                                      "text/plain", "n" + std::to_string(i));
        bodies[static_cast<std::size_t>(i)] = r ? r->body : r.error().message();
        wg.done();
      });
    }
    wg.wait();
    for (int i = 0; i < kCalls; ++i) {
      std::string want = "POST /c q=" + std::to_string(i) + " token= from 127.0.0.1:";
      EXPECT_EQ(bodies[static_cast<std::size_t>(i)].rfind(want, 0), 0u)
          << bodies[static_cast<std::size_t>(i)];
    }
    EXPECT_FALSE(srv->close());
    Client fresh;
    EXPECT_FALSE(fresh.get(srv->url() + "/")) << "the listener is closed";
  });
}

TEST(HttptestServer, CloseRightAfterStartStopsListening) {
  on_runtime(2, [] {
    Result<ht::Server> srv = ht::Server::start(echo_request);
    ASSERT_TRUE(srv);
    EXPECT_FALSE(srv->close());
    Client fresh;
    Result<ClientResponse> r = fresh.get(srv->url() + "/");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_refused) << r.error().message();
  });
}

TEST(HttptestServer, CloseLetsARequestInFlightFinishAndWaitsForIt) {
  on_runtime(2, [] {
    goro::Chan<int> entered(1);
    std::atomic<bool> handler_done{false};
    Result<ht::Server> srv = ht::Server::start([&](Request&, ResponseWriter& w) {
      entered.send(1);
      goro::sleep(100ms);
      w.text("finished");
      handler_done.store(true);
    });
    ASSERT_TRUE(srv);
    goro::Chan<Result<ClientResponse>> answer(1);
    goro::go([&] { answer.send(srv->client().get(srv->url() + "/slow")); });
    entered.recv();
    auto start = std::chrono::steady_clock::now();
    std::error_code closed = srv->close();
    EXPECT_FALSE(closed) << closed.message();
    EXPECT_TRUE(handler_done.load());
    EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
    std::optional<Result<ClientResponse>> r = answer.recv();
    ASSERT_TRUE(r && *r) << (r ? r->error().message() : "no answer");
    EXPECT_EQ((*r)->status, 200);
    EXPECT_EQ((*r)->body, "finished");
    EXPECT_EQ((*r)->header("connection"), "close");
    EXPECT_FALSE(srv->close()) << "a second close does nothing";
  });
}

TEST(HttptestServer, CloseCutsAHandlerPastTheGraceAndStillWaitsForIt) {
  on_runtime(2, [] {
    goro::Chan<int> entered(1);
    std::atomic<bool> handler_done{false};
    Result<ht::Server> srv = ht::Server::start([&](Request&, ResponseWriter& w) {
      entered.send(1);
      goro::sleep(150ms);
      w.text("too late");
      handler_done.store(true);
    });
    ASSERT_TRUE(srv);
    goro::Chan<Result<ClientResponse>> answer(1);
    goro::go([&] { answer.send(srv->client().get(srv->url() + "/slow")); });
    entered.recv();
    EXPECT_EQ(srv->close(20ms), make_error_code(errc::shutdown_timeout));
    EXPECT_TRUE(handler_done.load());
    EXPECT_EQ(srv->http_server().connection_count(), 0u);
    std::optional<Result<ClientResponse>> r = answer.recv();
    ASSERT_TRUE(r);
    EXPECT_FALSE(*r) << "the connection was closed without an answer";
  });
}

TEST(HttptestServer, ServesHttpsWithAClientThatTrustsIt) {
  net::testing::TestPki pki;
  net::TlsCertificate leaf = pki.leaf("server", {"localhost"});
  on_runtime(2, [&] {
    ht::StartOptions options;
    options.tls = leaf;
    options.client.ca_file = pki.ca_file();
    Result<ht::Server> srv = ht::Server::start(echo_request, options);
    ASSERT_TRUE(srv) << srv.error().message();
    EXPECT_EQ(srv->url(), "https://localhost:" + std::to_string(srv->addr().port()));
    Result<ClientResponse> r = srv->client().get(srv->url() + "/secure");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body.rfind("GET /secure q=- token= from 127.0.0.1:", 0), 0u) << r->body;
    Client untrusting;
    EXPECT_FALSE(untrusting.get(srv->url() + "/secure"));
  });
}

TEST(HttptestServer, StartOffAGoroutineIsRefused) {
  Result<ht::Server> srv = ht::Server::start(echo_request);
  ASSERT_FALSE(srv);
  EXPECT_EQ(srv.error(), std::errc::operation_not_permitted);
}

TEST(HttptestBackgroundServer, ServesATestOnAPlainThread) {
  Result<ht::BackgroundServer> srv = ht::BackgroundServer::start(echo_request);
  ASSERT_TRUE(srv) << srv.error().message();
  EXPECT_EQ(srv->url(), "http://127.0.0.1:" + std::to_string(srv->addr().port()));
  std::optional<test::RawResponse> r = test::round_trip(
      srv->addr().port(), "GET /bg?q=1 HTTP/1.1\r\nHost: x\r\nX-Token: z\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.rfind("GET /bg q=1 token=z from 127.0.0.1:", 0), 0u) << r->body;
  EXPECT_FALSE(srv->close());
  EXPECT_FALSE(srv->close());
  // The runtime has ended: the thread may run one of its own.
  EXPECT_EQ(ht::record(echo_request, ht::new_request("GET", "/after")).status, 200);
}

}  // namespace
}  // namespace goro::http
