// libcurl's multi interface on goroutines (examples/clients/curl.hpp over net::FdWatch)
// against goro's own HTTP server, running in the same runtime.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "clibs_test_util.hpp"
#include "curl.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// curl_global_init must come before any thread uses libcurl.
class CurlEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { curl_global_init(CURL_GLOBAL_DEFAULT); }
  void TearDown() override { curl_global_cleanup(); }
};
const auto* const curl_env = ::testing::AddGlobalTestEnvironment(new CurlEnvironment);

// goro's HTTP server on 127.0.0.1:<ephemeral>, serving in a goroutine of the current
// runtime until the destructor shuts it down.
class LocalServer {
 public:
  LocalServer() : server_(routes()) {
    auto ln = net::listen("tcp", "127.0.0.1:0");
    if (!ln) {
      ADD_FAILURE() << ln.error().message();
      return;
    }
    listener_ = std::move(*ln);
    base_ = "http://" + listener_.addr().to_string();
    serving_.add(1);
    goro::go([this] {
      server_.serve(listener_);
      serving_.done();
    });
  }
  ~LocalServer() {
    server_.shutdown(Clock::now() + 2s);
    serving_.wait();
  }
  std::string url(const std::string& path) const { return base_ + path; }

 private:
  static http::Handler routes() {
    http::Router r;
    r.handle("GET /slow", [](http::Request&, http::ResponseWriter& w) {
      goro::sleep(100ms);
      w.text("slow\n");
    });
    r.handle("GET /sleep", [](http::Request& req, http::ResponseWriter& w) {
      // Under the request's context: a client that leaves ends the sleep.
      if (goro::sleep(std::chrono::milliseconds(std::stoi(req.query("ms").value_or("0"))),
                      req.context())) {
        return;
      }
      w.text("slept\n");
    });
    r.handle("GET /big",
             [](http::Request&, http::ResponseWriter& w) { w.write(std::string(8 << 20, 'b')); });
    r.handle("POST /length", [](http::Request& req, http::ResponseWriter& w) {
      auto body = req.body();
      w.text(body ? std::to_string(body->size()) : "error");
    });
    return r;
  }

  http::Server server_;
  net::Listener listener_;
  std::string base_;
  goro::WaitGroup serving_;
};

// One transfer: an easy handle that collects the body.
struct Fetch {
  explicit Fetch(const std::string& url) : easy(curl_easy_init()) {
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(
        easy, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* out) {
          static_cast<std::string*>(out)->append(p, n);
          return n;
        });
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  }
  ~Fetch() { curl_easy_cleanup(easy); }
  Fetch(const Fetch&) = delete;
  Fetch& operator=(const Fetch&) = delete;
  long status() const {
    long code = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    return code;
  }
  CURL* easy;
  std::string body;
};

using CurlTest = ProcsTest;

TEST_P(CurlTest, ConcurrentSlowTransfersParkGoroutinesNotThreads) {
  run_with(GetParam(), [] {
    LocalServer server;
    curl::Multi multi;
    constexpr int kTransfers = 200;
    std::atomic<int> ok{0};
    goro::WaitGroup wg;
    const auto t0 = Clock::now();
    for (int i = 0; i < kTransfers; ++i) {
      wg.add(1);
      goro::go([&] {
        {
          Fetch f(server.url("/slow"));
          if (multi.perform(f.easy) == CURLE_OK && f.status() == 200 && f.body == "slow\n") {
            ok.fetch_add(1);
          }
        }  // cleaned up before the multi handle goes
        wg.done();
      });
    }
    wg.wait();
    const double ms = ms_since(t0);
    EXPECT_EQ(ok.load(), kTransfers);
    EXPECT_GE(ms, 99);
    EXPECT_LT(ms, 3000);
    EXPECT_LE(goro::stats().threads, thread_budget());
  });
}

TEST_P(CurlTest, LargeDownloadAndUpload) {
  run_with(GetParam(), [] {
    LocalServer server;
    curl::Multi multi;
    // 8 MB: curl reads a buffer per call, with more already in the socket.
    Fetch down(server.url("/big"));
    ASSERT_EQ(multi.perform(down.easy), CURLE_OK);
    EXPECT_EQ(down.body.size(), std::size_t{8} << 20);
    // 8 MB up: curl wants to write until the server has read it all.
    const std::string payload(8 << 20, 'u');
    Fetch up(server.url("/length"));
    curl_easy_setopt(up.easy, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(up.easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    ASSERT_EQ(multi.perform(up.easy), CURLE_OK);
    EXPECT_EQ(up.body, std::to_string(payload.size()));
  });
}

TEST_P(CurlTest, ConnectionsAreReused) {
  run_with(GetParam(), [] {
    LocalServer server;
    curl::Multi multi;
    for (int i = 0; i < 3; ++i) {
      Fetch f(server.url("/sleep?ms=1"));
      ASSERT_EQ(multi.perform(f.easy), CURLE_OK);
      EXPECT_EQ(f.body, "slept\n");
      long connects = -1;
      curl_easy_getinfo(f.easy, CURLINFO_NUM_CONNECTS, &connects);
      // The socket curl removed after a transfer comes back, watched again.
      EXPECT_EQ(connects, i == 0 ? 1 : 0);
    }
  });
}

TEST_P(CurlTest, AContextCancelsATransfer) {
  run_with(GetParam(), [] {
    LocalServer server;
    curl::Multi multi;
    Fetch f(server.url("/sleep?ms=5000"));
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
    const auto t0 = Clock::now();
    EXPECT_EQ(multi.perform(f.easy, ctx), CURLE_ABORTED_BY_CALLBACK);
    EXPECT_LT(ms_since(t0), 2000);
    cancel();
    // The multi handle goes on.
    Fetch next(server.url("/sleep?ms=1"));
    EXPECT_EQ(multi.perform(next.easy), CURLE_OK);
  });
}

TEST_P(CurlTest, RefusedAndTimedOut) {
  run_with(GetParam(), [] {
    curl::Multi multi;
    // A port bound but not listening: refused, and nobody else can take it meanwhile.
    const int bound = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(bound, reinterpret_cast<sockaddr*>(&addr), len), 0);
    ASSERT_EQ(::getsockname(bound, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    Fetch refused("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/");
    EXPECT_EQ(multi.perform(refused.easy), CURLE_COULDNT_CONNECT);
    ::close(bound);
    // curl's own timeout: its timer, run by the driver's select.
    LocalServer server;
    Fetch slow(server.url("/sleep?ms=5000"));
    curl_easy_setopt(slow.easy, CURLOPT_TIMEOUT_MS, 100L);
    const auto t0 = Clock::now();
    EXPECT_EQ(multi.perform(slow.easy), CURLE_OPERATION_TIMEDOUT);
    EXPECT_LT(ms_since(t0), 2000);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, CurlTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
