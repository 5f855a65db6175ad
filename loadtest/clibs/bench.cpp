// bench_clibs: N goroutines each making one slow call through a C client library at
// once, with the library's asynchronous API over net::FdWatch (examples/clients/), or
// with its plain blocking calls. Prints the elapsed time of the calls and the threads
// the process needed. loadtest/clibs/run.sh starts the servers and runs every case.
//
//   bench_clibs pg    MODE N CONNINFO   SELECT pg_sleep(0.1), each on its own connection
//   bench_clibs redis MODE N SOCKET     BLPOP with a 0.1 s timeout on an empty list,
//                                       each on its own connection
//   bench_clibs curl  MODE N URL        one HTTP transfer of URL (a slow one) each
//
// MODE: wait_fd   the adapters of examples/clients/ (pg.hpp, redis.hpp, curl.hpp)
//       blocking  the library's blocking call, made straight from the goroutine
//                 (PQexec, redisCommand, curl_easy_perform), as code that was not
//                 written for goro does
//       handoff   the same blocking call inside goro::blocking_long, which hands the
//                 P to another thread at once: the correct way without an async API
// Built as bench_clibs_hooks, the program links goro::hooks, and the blocking mode's
// calls park their goroutines on the netpoller (docs/hooks.md, "Transparent hooks").
// Connections are made before the clock starts (in the same mode); only the slow calls
// are timed. GORO_MAXPROCS sets the Ps as usual.
//
// Output, one line:
//   pg wait_fd n=200 procs=1 elapsed_ms=104.2 ok=200 threads_peak=4 threads_end=4
// threads_peak is the largest Threads: of /proc/self/status, sampled every millisecond
// from a thread of its own while the calls run; every thread of the process counts.
#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <goro/goro.hpp>

#include "curl.hpp"
#include "pg.hpp"
#include "redis.hpp"

namespace {

using Clock = std::chrono::steady_clock;

int threads_now() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

// Samples the process's thread count until stopped; keeps the peak.
class ThreadSampler {
 public:
  ThreadSampler()
      : thread_([this] {
          while (!stop_.load(std::memory_order_relaxed)) {
            const int n = threads_now();
            if (n > peak_.load(std::memory_order_relaxed))
              peak_.store(n, std::memory_order_relaxed);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }) {}
  ~ThreadSampler() { stop(); }
  int stop() {
    if (thread_.joinable()) {
      stop_.store(true);
      thread_.join();
    }
    return peak_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> peak_{0};
  std::thread thread_;
};

enum class Mode { wait_fd, blocking, handoff };

// Runs call(i) for i in [0, n) in n goroutines at once; returns how many returned true,
// and the elapsed time and thread peak in *ms and *peak.
int run_all(int n, const std::function<bool(int)>& call, double* ms, int* peak) {
  std::atomic<int> ok{0};
  goro::WaitGroup wg;
  ThreadSampler sampler;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    wg.add(1);
    goro::go([&, i] {
      if (call(i)) ok.fetch_add(1);
      wg.done();
    });
  }
  wg.wait();
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  *peak = sampler.stop();
  return ok.load();
}

// Runs setup(i) for every i in goroutines, all at once, untimed.
void prepare(int n, const std::function<void(int)>& setup) {
  goro::WaitGroup wg;
  for (int i = 0; i < n; ++i) {
    wg.add(1);
    goro::go([&, i] {
      setup(i);
      wg.done();
    });
  }
  wg.wait();
}

template <class F>
decltype(auto) call_in(Mode mode, F&& f) {
  if (mode == Mode::handoff) return goro::blocking_long(std::forward<F>(f));
  return std::forward<F>(f)();
}

int bench_pg(Mode mode, int n, const std::string& conninfo, double* ms, int* peak) {
  if (mode == Mode::wait_fd) {
    std::vector<pg::Conn> conns(n);
    prepare(n, [&](int i) { conns[i] = pg::Conn::connect(conninfo); });
    return run_all(
        n, [&](int i) { return conns[i].query("SELECT pg_sleep(0.1)").ok(); }, ms, peak);
  }
  std::vector<PGconn*> conns(n, nullptr);
  prepare(n,
          [&](int i) { conns[i] = call_in(mode, [&] { return PQconnectdb(conninfo.c_str()); }); });
  const int ok = run_all(
      n,
      [&](int i) {
        PGresult* r = call_in(mode, [&] { return PQexec(conns[i], "SELECT pg_sleep(0.1)"); });
        const bool good = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        return good;
      },
      ms, peak);
  for (PGconn* c : conns) PQfinish(c);
  return ok;
}

int bench_redis(Mode mode, int n, const std::string& socket, double* ms, int* peak) {
  const std::string key = "bench:empty";
  if (mode == Mode::wait_fd) {
    std::vector<std::unique_ptr<redis::Client>> clients(n);
    prepare(n, [&](int i) { clients[i] = redis::Client::connect_unix(socket); });
    return run_all(
        n,
        [&](int i) {
          return clients[i]->command({"BLPOP", key, "0.1"}).is_nil();
        },
        ms, peak);
  }
  std::vector<redisContext*> clients(n, nullptr);
  prepare(n, [&](int i) {
    clients[i] = call_in(mode, [&] { return redisConnectUnix(socket.c_str()); });
  });
  const int ok = run_all(
      n,
      [&](int i) {
        auto* r = static_cast<redisReply*>(
            call_in(mode, [&] { return redisCommand(clients[i], "BLPOP %s 0.1", key.c_str()); }));
        const bool good = r != nullptr && r->type == REDIS_REPLY_NIL;
        if (r != nullptr) freeReplyObject(r);
        return good;
      },
      ms, peak);
  for (redisContext* c : clients) redisFree(c);
  return ok;
}

std::size_t discard(char*, std::size_t, std::size_t n, void*) { return n; }

int bench_curl(Mode mode, int n, const std::string& url, double* ms, int* peak) {
  std::vector<CURL*> easies(n);
  for (auto& e : easies) {
    e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  }
  auto status_ok = [](CURL* e) {
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    return code == 200;
  };
  int ok;
  if (mode == Mode::wait_fd) {
    curl::Multi multi;
    ok = run_all(
        n, [&](int i) { return multi.perform(easies[i]) == CURLE_OK && status_ok(easies[i]); }, ms,
        peak);
  } else {
    ok = run_all(
        n,
        [&](int i) {
          return call_in(mode, [&] { return curl_easy_perform(easies[i]); }) == CURLE_OK &&
                 status_ok(easies[i]);
        },
        ms, peak);
  }
  for (CURL* e : easies) curl_easy_cleanup(e);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s pg|redis|curl wait_fd|blocking|handoff N TARGET\n", argv[0]);
    return 2;
  }
  const std::string library = argv[1], mode_name = argv[2], target = argv[4];
  const int n = std::atoi(argv[3]);
  Mode mode;
  if (mode_name == "wait_fd") {
    mode = Mode::wait_fd;
  } else if (mode_name == "blocking") {
    mode = Mode::blocking;
  } else if (mode_name == "handoff") {
    mode = Mode::handoff;
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode_name.c_str());
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  return goro::run([&] {
    double ms = 0;
    int peak = 0, ok = 0;
    if (library == "pg") {
      ok = bench_pg(mode, n, target, &ms, &peak);
    } else if (library == "redis") {
      ok = bench_redis(mode, n, target, &ms, &peak);
    } else if (library == "curl") {
      ok = bench_curl(mode, n, target, &ms, &peak);
    } else {
      std::fprintf(stderr, "unknown library %s\n", library.c_str());
      return 2;
    }
    std::printf("%s %s n=%d procs=%d elapsed_ms=%.1f ok=%d threads_peak=%d threads_end=%d\n",
                library.c_str(), mode_name.c_str(), n, goro::maxprocs(), ms, ok, peak,
                threads_now());
    return ok == n ? 0 : 1;
  });
}
