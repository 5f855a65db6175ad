// The /debug/goro/ endpoints: goroutine dumps (full, grouped, JSON) and the scheduler's
// state over HTTP, the errors they answer, and a dump of a server holding many idle
// keep-alive connections grouped into one entry.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include <goro/http/debug.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/router.hpp>
#include <goro/net/dial.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::http {
namespace {

using httptest::new_request;
using httptest::record;

TEST(DebugEndpoints, GoroutinesFullGroupedAndJson) {
  Router r;
  r.handle("/debug/goro/", debug::handler());
  auto full = record(r, new_request("GET", "/debug/goro/goroutines"));
  ASSERT_EQ(full.status, 200) << full.body;
  EXPECT_EQ(full.header("content-type"), "text/plain; charset=utf-8");
  EXPECT_NE(full.body.find("goroutine 1 \"main\" ["), std::string::npos) << full.body;
  // The dump runs in goro::blocking: its own goroutine is listed without a stack.
  EXPECT_NE(full.body.find(" [syscall (goro::blocking)]:"), std::string::npos) << full.body;

  auto grouped = record(r, new_request("GET", "/debug/goro/goroutines?debug=1"));
  ASSERT_EQ(grouped.status, 200);
  EXPECT_EQ(grouped.body.rfind("goroutine profile: total ", 0), 0u) << grouped.body;

  auto json = record(r, new_request("GET", "/debug/goro/goroutines?format=json"));
  ASSERT_EQ(json.status, 200);
  EXPECT_EQ(json.header("content-type"), "application/json");
  EXPECT_EQ(json.body.rfind("{\"goroutines\":[", 0), 0u) << json.body;

  auto sched = record(r, new_request("GET", "/debug/goro/sched"));
  ASSERT_EQ(sched.status, 200);
  EXPECT_EQ(sched.body.rfind("SCHED ", 0), 0u) << sched.body;
  EXPECT_NE(sched.body.find("P0: runs="), std::string::npos) << sched.body;
  auto sched_json = record(r, new_request("GET", "/debug/goro/sched?format=json"));
  EXPECT_NE(sched_json.body.find("\"procs\":[{\"id\":0,\"runs\":"), std::string::npos)
      << sched_json.body;

  auto index = record(r, new_request("GET", "/debug/goro/"));
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("goroutines"), std::string::npos);
}

TEST(DebugEndpoints, TraceForAWindow) {
  Router r;
  r.handle("/debug/goro/", debug::handler());
  auto trace = record(r, new_request("GET", "/debug/goro/trace?seconds=0.05"));
  ASSERT_EQ(trace.status, 200) << trace.body.substr(0, 300);
  EXPECT_EQ(trace.header("content-type"), "application/json");
  EXPECT_EQ(trace.body.rfind("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", 0), 0u);
  for (const char* bad : {"0", "61", "x", "-1"}) {
    auto r400 = record(r, new_request("GET", std::string("/debug/goro/trace?seconds=") + bad));
    EXPECT_EQ(r400.status, 400) << bad;
  }
}

TEST(DebugEndpoints, RefusesWhatItDoesNotServe) {
  Router r;
  r.handle("/debug/goro/", debug::handler());
  EXPECT_EQ(record(r, new_request("POST", "/debug/goro/goroutines")).status, 405);
  auto unknown = record(r, new_request("GET", "/debug/goro/heap"));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("'heap'"), std::string::npos);
  auto bad = record(r, new_request("GET", "/debug/goro/goroutines?debug=7"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("debug must be 1"), std::string::npos);
}

// 50 keep-alive connections between two requests of a loop are 50 connection goroutines
// parked in a read: the grouped dump shows them as one entry with their count. (A
// connection that went quiet after its first request would have parked with no
// goroutine after 30 ms; one whose last gap was 100 ms keeps its goroutine 300 ms.)
TEST(DebugEndpoints, IdleConnectionsGroupIntoOneEntry) {
  goro::run(
      [] {
        Router r;
        r.handle("/debug/goro/", debug::handler());
        r.handle("GET /hi", [](Request&, ResponseWriter& w) { w.text("hi"); });
        auto server = httptest::Server::start(r);
        ASSERT_TRUE(server) << server.error().message();
        const std::string addr = server->url().substr(std::string("http://").size());
        constexpr std::string_view req = "GET /hi HTTP/1.1\r\nHost: x\r\n\r\n";
        std::vector<net::Conn> idle;
        for (int i = 0; i < 50; ++i) {
          auto c = net::dial("tcp", addr);
          ASSERT_TRUE(c);
          idle.push_back(std::move(*c));
        }
        for (int round = 0; round < 2; ++round) {
          if (round == 1) goro::sleep(std::chrono::milliseconds(100));
          for (auto& c : idle) {
            ASSERT_TRUE(c.write(req.data(), req.size()));
            char buf[256];
            ASSERT_TRUE(c.read(buf, sizeof buf));
          }
        }
        goro::sleep(std::chrono::milliseconds(20));
        auto reply = server->client().get(server->url() + "/debug/goro/goroutines?debug=1");
        ASSERT_TRUE(reply) << reply.error().message();
        // The 50 (and the client's own connection) are parked at one or two places in
        // the read path: one entry each, with its count.
        const std::regex entry(R"((\d+) \[IO wait read\] "http conn":)");
        int parked = 0, entries = 0;
        for (std::sregex_iterator it(reply->body.begin(), reply->body.end(), entry), end;
             it != end; ++it) {
          parked += std::stoi((*it)[1]);
          ++entries;
        }
        EXPECT_GE(parked, 50) << reply->body.substr(0, 3000);
        EXPECT_LE(entries, 3) << reply->body.substr(0, 3000);
        for (auto& c : idle) c.close();
        server->close();
      },
      goro::Config{.maxprocs = 2});
}

}  // namespace
}  // namespace goro::http
