// The collectors a registry can carry: the runtime's numbers (goro::stats()), the
// process's (/proc), and every http::Server's (server_stats()).
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <goro/http/metrics.hpp>
#include <goro/http/server.hpp>
#include <goro/scheduler/runtime.hpp>

#include "metrics_registry.hpp"

namespace goro::http::metrics {

using detail::Access;
using detail::Kind;

namespace {

// The runtime's numbers exist only on a goroutine of the goro::run in progress.
template <class F>
std::function<std::optional<double>()> on_goroutine(F read) {
  return [read]() -> std::optional<double> {
    if (goro::goid() == 0) return std::nullopt;
    return static_cast<double>(read());
  };
}

// One goro::stats() serves every runtime metric of a render: taken before the render
// (off a goroutine of the runtime, nothing is taken and the metrics are left out).
class StatsSnapshot {
 public:
  void take() {
    if (goro::goid() == 0) return;
    goro::RuntimeStats s = goro::stats();
    std::lock_guard lock(mu_);
    stats_ = s;
  }
  goro::RuntimeStats get() {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  std::mutex mu_;  // held for a copy only
  goro::RuntimeStats stats_;
};

}  // namespace

void register_runtime_metrics(Registry& registry) {
  Registry::Impl& r = Access::impl(registry);
  auto add = [&r](std::string_view name, std::string_view help, Kind kind, auto read) {
    r.add(name, help, kind, {}, {}, on_goroutine(read));
  };
  auto snap = std::make_shared<StatsSnapshot>();
  {
    std::lock_guard lock(r.mu);
    r.before_render.emplace(r.next_hook++, [snap] { snap->take(); });
  }
  auto field = [&add, snap](std::string_view name, std::string_view help, Kind kind,
                            auto member) {
    add(name, help, kind, [snap, member] { return snap->get().*member; });
  };
  using S = goro::RuntimeStats;
  field("goro_goroutines", "Goroutines that exist now, the main one included.", Kind::gauge,
        &S::goroutines);
  field("goro_goroutines_running", "Goroutines on a thread now.", Kind::gauge, &S::running);
  field("goro_goroutines_runnable", "Goroutines queued to run.", Kind::gauge, &S::runnable);
  field("goro_goroutines_waiting", "Goroutines parked (channel, lock, sleep, network, ...).",
        Kind::gauge, &S::waiting);
  field("goro_goroutines_syscall", "Goroutines inside goro::blocking.", Kind::gauge,
        &S::syscall);
  field("goro_procs", "Ps (processors) the runtime runs goroutines on: GOMAXPROCS.",
        Kind::gauge, &S::procs);
  field("goro_idle_procs", "Ps with nothing to run.", Kind::gauge, &S::idle_procs);
  field("goro_threads", "OS threads (Ms) the runtime has made, the monitor thread not included.",
        Kind::gauge, &S::threads);
  field("goro_idle_threads", "OS threads parked idle.", Kind::gauge, &S::idle_threads);
  field("goro_spinning_threads", "Threads looking for work.", Kind::gauge,
        &S::spinning_threads);
  field("goro_runqueue_global", "Goroutines in the global run queue.", Kind::gauge,
        &S::global_runqueue);
  field("goro_runqueue_local", "Goroutines in the Ps' own run queues, all Ps.", Kind::gauge,
        &S::local_runqueues);
  field("goro_netpoll_waiters", "Goroutines parked on a socket.", Kind::gauge,
        &S::netpoll_waiters);
  field("goro_handoffs_total",
        "Ps handed to another thread (blocking call retaken, preemption, blocking_long).",
        Kind::counter, &S::handoffs);
  field("goro_preemptions_total", "Ps taken from a goroutine by the preemption signal.",
        Kind::counter, &S::preemptions);
  field("goro_sysmon_wakeups_total", "Times the monitor thread woke up.", Kind::counter,
        &S::sysmon_wakeups);
  field("goro_steals_total", "Successful steals of goroutines from another P's run queue.",
        Kind::counter, &S::steals);
  field("goro_goroutine_runs_total", "Goroutines run by a P (each time one is switched to).",
        Kind::counter, &S::goroutine_runs);
  field("goro_stack_reserved_bytes",
        "Address space mapped for goroutine stacks, those kept for reuse included.",
        Kind::gauge, &S::stack_reserved_bytes);
  field("goro_stack_committed_bytes",
        "Goroutine stack memory resident now (pages touched and not given back).",
        Kind::gauge, &S::stack_committed_bytes);
}

namespace {

// The whole of a small /proc file, read in goro::blocking; nullopt if it cannot be read.
std::optional<std::string> read_proc_file(const char* path) {
  return goro::blocking([path]() -> std::optional<std::string> {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        if (n < 0) return std::nullopt;
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
  });
}

// Fields of /proc/self/stat by number, counted from 1 as proc(5) does; nullopt if the
// file cannot be read or is shorter.
template <std::size_t N>
std::optional<std::array<double, N>> stat_fields(const std::array<int, N>& numbers) {
  std::optional<std::string> stat = read_proc_file("/proc/self/stat");
  if (!stat) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces and ')'.
  const std::size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::array<double, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const char* p = stat->c_str() + close + 1;
    for (int field = 3; field < numbers[i]; ++field) {
      while (*p == ' ') ++p;
      while (*p != ' ' && *p != '\0') ++p;
    }
    char* end = nullptr;
    const unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) return std::nullopt;
    out[i] = static_cast<double>(v);
  }
  return out;
}

std::optional<double> stat_field(int number) {
  auto fields = stat_fields(std::array<int, 1>{number});
  if (!fields) return std::nullopt;
  return (*fields)[0];
}

double clock_ticks() { return static_cast<double>(::sysconf(_SC_CLK_TCK)); }

std::optional<double> cpu_seconds() {
  auto times = stat_fields(std::array<int, 2>{14, 15});  // utime, stime
  if (!times) return std::nullopt;
  return ((*times)[0] + (*times)[1]) / clock_ticks();
}

std::optional<double> start_time_seconds() {
  std::optional<double> since_boot = stat_field(22);
  std::optional<std::string> stat = read_proc_file("/proc/stat");
  if (!since_boot || !stat) return std::nullopt;
  const std::size_t at = stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  const double boot = std::strtod(stat->c_str() + at + 7, nullptr);
  return boot + *since_boot / clock_ticks();
}

std::optional<double> open_fds() {
  return goro::blocking([]() -> std::optional<double> {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return std::nullopt;
    const int own = ::dirfd(dir);
    double n = 0;
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      if (std::atoi(e->d_name) != own) ++n;
    }
    ::closedir(dir);
    return n;
  });
}

}  // namespace

void register_process_metrics(Registry& registry) {
  Registry::Impl& r = Access::impl(registry);
  r.add("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
        Kind::counter, {}, {}, cpu_seconds);
  r.add("process_resident_memory_bytes", "Resident memory size in bytes.", Kind::gauge, {}, {},
        []() -> std::optional<double> {
          std::optional<double> pages = stat_field(24);
          if (!pages) return std::nullopt;
          return *pages * static_cast<double>(::sysconf(_SC_PAGESIZE));
        });
  r.add("process_virtual_memory_bytes", "Virtual memory size in bytes.", Kind::gauge, {}, {},
        [] { return stat_field(23); });
  r.add("process_open_fds", "Number of open file descriptors.", Kind::gauge, {}, {}, open_fds);
  r.add("process_max_fds", "Maximum number of open file descriptors.", Kind::gauge, {}, {},
        []() -> std::optional<double> {
          rlimit limit{};
          if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return std::nullopt;
          if (limit.rlim_cur == RLIM_INFINITY) return std::numeric_limits<double>::infinity();
          return static_cast<double>(limit.rlim_cur);
        });
  r.add("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        Kind::gauge, {}, {}, start_time_seconds);
}

void register_server_metrics(Registry& registry) {
  Registry::Impl& r = Access::impl(registry);
  auto add = [&r](std::string_view name, std::string_view help, Kind kind, auto member) {
    r.add(name, help, kind, {}, {}, [member]() -> std::optional<double> {
      return static_cast<double>(server_stats().*member);
    });
  };
  add("http_server_connections", "HTTP connections open now.", Kind::gauge,
      &ServerStats::connections_open);
  add("http_server_connections_total", "HTTP connections accepted.", Kind::counter,
      &ServerStats::connections_total);
  add("http_server_received_bytes_total", "Bytes read from HTTP clients, heads and bodies.",
      Kind::counter, &ServerStats::bytes_received);
  add("http_server_sent_bytes_total", "Bytes written to HTTP clients, heads and bodies.",
      Kind::counter, &ServerStats::bytes_sent);
  add("http_server_requests_total", "HTTP requests handed to a handler, every protocol.",
      Kind::counter, &ServerStats::requests_total);
  add("http_server_max_connections",
      "ServerOptions::max_connections of the servers accepting now (0: no limit set).",
      Kind::gauge, &ServerStats::max_connections);
  add("http_server_accept_waits_total",
      "Times an accept loop waited because max_connections were open.", Kind::counter,
      &ServerStats::accept_waits);
  add("http_server_shed_requests_total",
      "HTTP requests turned away by limit_concurrency (503) or rate_limit (429).",
      Kind::counter, &ServerStats::requests_shed);
}

}  // namespace goro::http::metrics
