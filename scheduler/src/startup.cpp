// Starting and stopping the runtime: goro::run (run_main) sets up the Ps, the
// netpoller, the signal handlers and sysmon, runs the main goroutine on the calling
// thread's M, and, when it returns, waits for every thread to leave the runtime and
// releases what the run allocated.

#include <goro/scheduler/detail/introspect.hpp>
#include <goro/scheduler/runtime.hpp>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <thread>

#include "goroutine.hpp"
#include "netpoll.hpp"
#include "queues.hpp"
#include "schedule.hpp"
#include "signals.hpp"
#include "sysmon.hpp"
#include "thread.hpp"
#include "trace.hpp"

namespace goro::detail {

Sched sched;

__attribute__((tls_model("initial-exec"))) thread_local M* tls_m = nullptr;  // see this_m()

#if !defined(__x86_64__)
__attribute__((noinline)) M* this_m() noexcept {
  asm volatile("" ::: "memory");
  return tls_m;
}
#endif

namespace {

// Ends the run with exit code `code` (the main goroutine returned): every M leaves its
// scheduling loop, sysmon stops, the M blocked in the netpoller wakes up.
void runtime_exit(int code) {
  // No signal is sent to a channel from here on: its receivers are about to be abandoned.
  signal_notify_reset();
  uninstall_sigquit_dump();
  RuntimeScope scope;
  sched.lock.lock();
  sched.exit_code = code;
  sched.exiting.store(true, std::memory_order_seq_cst);
  for (M* m = sched.midle; m; m = m->link) m->park.wakeup();
  sched.midle = nullptr;
  sched.nmidle = 0;
  sysmon_wake();
  sched.lock.unlock();
  netpoll_break();
}

}  // namespace
}  // namespace goro::detail

namespace goro {

using namespace detail;

namespace {

int resolve_maxprocs(int configured) {
  if (configured > 0) return configured;
  if (const char* env = std::getenv("GORO_MAXPROCS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  std::ifstream f("/sys/fs/cgroup/cpu.max");
  std::string contents((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (int n = procs_from_cpu_max(contents.c_str()); n > 0) return n;
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

struct MainClosure {
  std::function<int()> fn;
};

}  // namespace

}  // namespace goro

namespace goro::detail {

int run_main(std::function<int()> main_fn, Config config) {
  if (sched.running.exchange(true)) fatal("goro::run called while the runtime is running");
  const int procs = resolve_maxprocs(config.maxprocs);
  const std::size_t page = page_size();

  // Reset the scheduler state left by a previous run() in this process.
  sched.runq.clear();
  sched.runq_size.store(0);
  sched.pidle = nullptr;
  sched.npidle.store(0);
  sched.midle = nullptr;
  sched.nmidle = 0;
  sched.nmspinning.store(0);
  sched.nmsys.store(0);
  sched.all_m.clear();
  sched.m_retired.clear();
  sched.mcount.store(0);
  sched.max_m = std::max(config.max_threads, procs + 1);
  sched.idle_m_timeout = config.idle_thread_timeout.count() > 0 ? config.idle_thread_timeout.count() : 0;
  sched.gfree.clear();
  sched.gfree_count.store(0);
  sched.goid_gen.store(0);
  sched.live_gs.store(0);
  sched.exiting.store(false);
  sched.exit_code = 0;
  sched.sysmon_wait = false;
  sched.sysmon_delay.store(0);
  sched.sysmon_kick.store(false);
  sched.sysmon_wakeups.store(0);
  sched.handoffs.store(0);
  sched.preemptions.store(0);
  sched.gomaxprocs = procs;
  sched.default_stack =
      std::max<std::size_t>(16 * 1024, (config.stack_size + page - 1) & ~(page - 1));
  sched.start_time = nanotime();
  sched.lastpoll.store(sched.start_time);
  sched.poll_until.store(0);
  if (const char* st = std::getenv("GORO_SCHEDTRACE"))
    sched.schedtrace_ns = std::atoll(st) * 1'000'000;
  else
    sched.schedtrace_ns = 0;
  sched.coprimes.clear();
  for (int i = 1; i <= procs; ++i)
    if (std::gcd(i, procs) == 1) sched.coprimes.push_back(static_cast<std::uint32_t>(i));

  sched.all_p.clear();
  for (int i = 0; i < procs; ++i) {
    P* pp = new P();
    pp->id = i;
    sched.all_p.push_back(pp);
  }
  for (int i = procs - 1; i >= 1; --i) pidleput(sched.all_p[i]);

  trace_init();
  netpoll_init();
  install_sigquit_dump();
  install_runtime_signals();
  hog_priority_probe();
  pthread_sigmask(SIG_BLOCK, nullptr, &sched.initial_sigmask);

  M* m0 = new M();
  m0->id = 0;
  m0->thread = pthread_self();
  sched.all_m.push_back(m0);
  sched.m0 = m0;
  sched.mcount.store(1);
  setup_thread(m0);
  acquirep(m0, sched.all_p[0]);

  // The main goroutine.
  {
    void* slot = nullptr;
    G* g = new_g(0, "main", sizeof(MainClosure), alignof(MainClosure), &slot);
    ::new (slot) MainClosure{std::move(main_fn)};
    start_g(g, [](void* p) {
      auto* c = static_cast<MainClosure*>(p);
      int code = c->fn();
      c->~MainClosure();
      runtime_exit(code);
    });
  }

  pthread_create(
      &sched.sysmon_thread, nullptr,
      [](void*) -> void* {
        sysmon_main();
        return nullptr;
      },
      nullptr);

  schedule_loop(m0);

  // Shutdown: wait for every thread to leave the runtime. Parked goroutines are
  // abandoned (as Go's main returning); a goroutine still running user code or inside
  // a blocking call is waited for until it reaches the runtime.
  pthread_join(sched.sysmon_thread, nullptr);
  for (;;) {
    sched.lock.lock();
    std::vector<M*> ms = sched.all_m;
    sched.lock.unlock();
    bool all = true;
    for (M* m : ms) {
      if (m == m0) continue;
      if (!m->exited.load(std::memory_order_acquire)) {
        all = false;
        // Wake it wherever it sleeps.
        m->park.wakeup();
      }
    }
    netpoll_break();
    if (all) break;
    timespec ts{0, 1'000'000};
    nanosleep(&ts, nullptr);
  }
  // A retired M's thread was detached as it exited.
  for (M* m : sched.all_m)
    if (m != m0 && !m->retired) pthread_join(m->thread, nullptr);
  teardown_thread(m0);
  trace_shutdown();
  netpoll_shutdown();

  const bool keep_arenas = release_all_goroutines();
  if (!keep_arenas) stack_release_all();
  for (P* pp : sched.all_p) delete pp;
  sched.all_p.clear();
  for (M* m : sched.all_m) delete m;
  sched.all_m.clear();
  const int code = sched.exit_code;
  sched.running.store(false);
  return code;
}

}  // namespace goro::detail

namespace goro {

using namespace detail;

int maxprocs() { return sched.gomaxprocs; }

int num_goroutine() {
  return static_cast<int>(sched.live_gs.load(std::memory_order_relaxed));
}

std::uint64_t goid() { return g_id(current_g()); }

}  // namespace goro
