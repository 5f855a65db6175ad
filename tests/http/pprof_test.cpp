// /debug/goro/pprof/: a CPU profile taken while a handler burns CPU, which `go tool
// pprof` decodes and in which it names the handler's function; a second profile while
// one runs is refused; the goroutine profile shows the profiling handler parked; bad
// windows are refused; the index says why there is no heap.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <goro/http/debug.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/router.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::http {

// Named so that it cannot be mistaken in pprof's output; a few milliseconds of
// arithmetic with no call and no memory access, so every sample in it is its own.
[[gnu::noinline]] std::uint64_t burn_cpu_in_pprof_test_handler(std::uint64_t rounds) {
  std::uint64_t x = rounds;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

namespace {

using httptest::new_request;
using httptest::record;

// `go` on PATH, else Debian's golang; empty when neither is installed.
std::string find_go() {
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (std::size_t start = 0; start <= dirs.size();) {
      std::size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const std::string candidate = dirs.substr(start, end - start) + "/go";
      if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  }
  return ::access("/usr/lib/go/bin/go", X_OK) == 0 ? "/usr/lib/go/bin/go" : "";
}

// Runs command through sh with a time limit; its stdout and stderr, and its exit status.
std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen(("timeout 20 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(Pprof, CpuProfileNamesTheBusyHandlerAndPprofReadsIt) {
  const std::string go = find_go();
  if (go.empty())
    GTEST_SKIP() << "go is not installed (apt-get install golang): go tool pprof reads the profile";
  std::string profile;
  int profile_status = 0;
  std::string content_type, disposition, busy_body;
  int busy_status = 0;
  std::string goroutines;
  goro::run(
      [&] {
        Router r;
        r.handle("/debug/goro/", debug::handler());
        r.handle("GET /burn", [](Request&, ResponseWriter& w) {
          w.text(std::to_string(burn_cpu_in_pprof_test_handler(3'000'000)));
        });
        auto server = httptest::Server::start(r);
        ASSERT_TRUE(server) << server.error().message();
        const std::string url = server->url();
        std::atomic<bool> stop{false};
        goro::WaitGroup load;
        for (int i = 0; i < 2; ++i) {
          load.add(1);
          goro::go([&] {
            while (!stop.load(std::memory_order_relaxed)) {
              if (!server->client().get(url + "/burn")) break;
            }
            load.done();
          });
        }
        goro::WaitGroup profiled;
        profiled.add(1);
        goro::go([&] {
          auto reply = server->client().get(url + "/debug/goro/pprof/profile?seconds=2");
          if (reply) {
            profile_status = reply->status;
            content_type = std::string(reply->header("content-type"));
            disposition = std::string(reply->header("content-disposition"));
            profile = std::move(reply->body);
          }
          profiled.done();
        });
        goro::sleep(std::chrono::milliseconds(500));
        auto second = server->client().get(url + "/debug/goro/pprof/profile?seconds=1");
        if (second) {
          busy_status = second->status;
          busy_body = second->body;
        }
        // The profile's own handler is parked in it meanwhile.
        auto parked = server->client().get(url + "/debug/goro/pprof/goroutine");
        if (parked && parked->status == 200) goroutines = std::move(parked->body);
        profiled.wait();
        stop.store(true, std::memory_order_relaxed);
        load.wait();
        server->close();
      },
      goro::Config{.maxprocs = 2});

  EXPECT_EQ(busy_status, 503) << busy_body;
  EXPECT_NE(busy_body.find("cpu profiling already in use"), std::string::npos) << busy_body;
  ASSERT_EQ(profile_status, 200) << profile.substr(0, 300);
  EXPECT_EQ(content_type, "application/octet-stream");
  EXPECT_EQ(disposition, "attachment; filename=\"profile\"");
  ASSERT_GE(profile.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(profile[0]), 0x1f);  // gzip
  EXPECT_EQ(static_cast<unsigned char>(profile[1]), 0x8b);

  char dir_template[] = "/tmp/goro-pprof-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::filesystem::path dir = dir_template;
  const std::string file = (dir / "profile.pb.gz").string();
  const std::string goroutine_file = (dir / "goroutine.pb.gz").string();
  std::ofstream(file, std::ios::binary) << profile;
  std::ofstream(goroutine_file, std::ios::binary) << goroutines;
  // A Go toolchain that finds no module, cache or flags of the machine's user.
  const std::string env = "env HOME=" + dir.string() + " GOCACHE=" + (dir / "cache").string() +
                          " GOFLAGS= GO111MODULE=off GOPATH=" + (dir / "gopath").string() + " ";
  const auto [rc, top] = run_command(env + go + " tool pprof -top " + file);
  const auto [goroutine_rc, goroutine_top] =
      run_command(env + go + " tool pprof -top " + goroutine_file);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(rc, 0) << top;
  EXPECT_NE(top.find("Type: cpu"), std::string::npos) << top;
  EXPECT_NE(top.find("burn_cpu_in_pprof_test_handler"), std::string::npos) << top;
  ASSERT_EQ(goroutine_rc, 0) << goroutine_top;
  EXPECT_NE(goroutine_top.find("Type: goroutine"), std::string::npos) << goroutine_top;
  EXPECT_NE(goroutine_top.find("goro::http::debug::pprof::profile_cpu"), std::string::npos)
      << goroutine_top;
}

TEST(Pprof, RefusesABadWindow) {
  Router r;
  r.handle("/debug/goro/", debug::handler());
  for (const char* bad : {"0", "61", "x", "-1", "1.5", ""}) {
    auto reply =
        record(r, new_request("GET", std::string("/debug/goro/pprof/profile?seconds=") + bad));
    EXPECT_EQ(reply.status, 400) << bad;
    EXPECT_NE(reply.body.find("seconds must be a whole number from 1 to 60"), std::string::npos)
        << reply.body;
  }
}

TEST(Pprof, IndexSaysWhyThereIsNoHeapProfile) {
  Router r;
  r.handle("/debug/goro/", debug::handler());
  auto index = record(r, new_request("GET", "/debug/goro/pprof/"));
  ASSERT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("profile?seconds=N"), std::string::npos) << index.body;
  EXPECT_NE(index.body.find("No heap profile"), std::string::npos) << index.body;
  auto heap = record(r, new_request("GET", "/debug/goro/pprof/heap"));
  EXPECT_EQ(heap.status, 404);
  EXPECT_NE(heap.body.find("no heap profile"), std::string::npos) << heap.body;
  auto top = record(r, new_request("GET", "/debug/goro/"));
  EXPECT_NE(top.body.find("pprof/"), std::string::npos) << top.body;
}

}  // namespace
}  // namespace goro::http
