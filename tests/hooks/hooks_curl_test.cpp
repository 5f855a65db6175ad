// libcurl's easy interface (curl_easy_perform, blocking) on goroutines, over goro::hooks,
// against goro's own HTTP server running in the same runtime.
#include <curl/curl.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "clibs_test_util.hpp"
#include "hooks_lib_util.hpp"

namespace goro::clibs::testing {
namespace {

using namespace std::chrono_literals;
using goro::hooks::testing::burst;

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
    server_.shutdown(std::chrono::steady_clock::now() + 2s);
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
    r.handle("GET /big",
             [](http::Request&, http::ResponseWriter& w) { w.write(std::string(8 << 20, 'b')); });
    return r;
  }

  http::Server server_;
  net::Listener listener_;
  std::string base_;
  goro::WaitGroup serving_;
};

std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One blocking transfer on an easy handle of its own; the body, or "" on failure.
std::string fetch(const std::string& url, CURLcode* code = nullptr) {
  std::unique_ptr<CURL, void (*)(CURL*)> easy(curl_easy_init(), curl_easy_cleanup);
  std::string body;
  curl_easy_setopt(easy.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT_MS, 10'000L);
  const CURLcode rc = curl_easy_perform(easy.get());
  if (code != nullptr) *code = rc;
  return rc == CURLE_OK ? body : std::string();
}

using HooksCurlTest = ProcsTest;

TEST_P(HooksCurlTest, EasyTransfersOnGoroutines) {
  run_with(GetParam(), [] {
    LocalServer server;
    CURLcode code;
    EXPECT_EQ(fetch(server.url("/slow"), &code), "slow\n") << curl_easy_strerror(code);
    EXPECT_EQ(fetch(server.url("/big")).size(), std::size_t{8} << 20);
  });
}

// 200 transfers of a 100 ms URL at once, at one P: about one transfer's time, few threads.
TEST_P(HooksCurlTest, ConcurrentSlowTransfersParkGoroutinesNotThreads) {
  run_with(GetParam(), [] {
    LocalServer server;
    constexpr int kClients = 200;
    const std::string url = server.url("/slow");
    const auto transfers = burst(kClients, [&](int) { return fetch(url) == "slow\n"; });
    goro::hooks::testing::print("libcurl easy, 100 ms URL", kClients, transfers);
    EXPECT_EQ(transfers.succeeded, kClients);
    EXPECT_GE(transfers.ms, 99);
    EXPECT_LT(transfers.ms, 3000);
    EXPECT_LE(transfers.threads, thread_bound(transfers, thread_budget()));
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, HooksCurlTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::clibs::testing
