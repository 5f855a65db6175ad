// Starting and stopping the runtime: goro::run (run_main) sets up the Ps, the
// netpoller, the signal handlers and sysmon, queues the main goroutine for the Ms it
// starts, and waits on the calling thread (no M) until main returns; then every thread
// in the runtime leaves it, those in user code are abandoned, and what the run
// allocated is released.

#include <goro/scheduler/detail/cgroup.hpp>
#include <goro/scheduler/detail/introspect.hpp>
#include <goro/scheduler/runtime.hpp>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
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
  sched.exit_note.wakeup();
}

// How long run_main's shutdown waits for a thread outside the runtime before it abandons
// it. A goroutine is usually outside for a moment (a TLS write of a connection's writer,
// a short blocking call); once run returns, the caller's exit runs the process's static
// destructors and atexit handlers (OpenSSL's cleanup among them), and a thread still in
// user code then would use what they free.
constexpr std::int64_t kExitGrace = 100'000'000;

// run_main's shutdown: marks m abandoned if its thread is outside the runtime (in a
// blocking call, or a detached hog), so that it never comes back in (return_inside).
// Whether m is abandoned (now or in an earlier round).
bool abandon_outside(M* m) {
  MWhere expected = MWhere::outside;
  return m->where.compare_exchange_strong(expected, MWhere::abandoned,
                                          std::memory_order_seq_cst) ||
         expected == MWhere::abandoned;
}

// run_main's shutdown: asks the goroutine running on m, if any, to yield, as sysmon
// does a hog's: in user code, the signal handler detaches its P and puts the thread
// outside.
void preempt_for_exit(M* m) {
  G* g = m->curg.load(std::memory_order_acquire);
  if (g == nullptr || m->where.load(std::memory_order_seq_cst) != MWhere::inside) return;
  g->preempt.store(true, std::memory_order_relaxed);
  pthread_kill(m->thread, SIGURG);
}

}  // namespace
}  // namespace goro::detail

namespace goro {

using namespace detail;

namespace {

// Config::maxprocs, else GORO_MAXPROCS, else the CPUs this process may run on (its
// affinity mask, as Go's), fewer when its cgroup's CPU limit says so (rounded up).
int resolve_maxprocs(int configured) {
  if (configured > 0) return configured;
  if (const char* env = std::getenv("GORO_MAXPROCS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (cpus <= 0) cpus = 1;
  if (std::optional<double> limit = cgroup_cpu_limit()) {
    cpus = std::min(cpus, procs_from_cpu_limit(*limit));
  }
  return cpus;
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
  const char* async_preempt = std::getenv("GORO_ASYNC_PREEMPT");
  sched.async_preempt = async_preempt == nullptr || std::strcmp(async_preempt, "0") != 0;
  sched.coprimes.clear();
  for (int i = 1; i <= procs; ++i)
    if (std::gcd(i, procs) == 1) sched.coprimes.push_back(static_cast<std::uint32_t>(i));

  sched.all_p.clear();
  for (int i = 0; i < procs; ++i) {
    P* pp = new P();
    pp->id = i;
    sched.all_p.push_back(pp);
  }
  for (int i = procs - 1; i >= 0; --i) pidleput(sched.all_p[i]);

  trace_init();
  netpoll_init();
  install_sigquit_dump();
  install_runtime_signals();
  hog_priority_probe();
  pthread_sigmask(SIG_BLOCK, nullptr, &sched.initial_sigmask);

  sched.mcount.store(0);

  // The main goroutine, queued globally from this thread, which is no M: the first
  // wake-up starts an M for it. This thread only waits for the end of the run, so that
  // run returns here whatever the goroutines are doing.
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

  // Asynchronous signals go to the Ms (which take this mask, plus the runtime's
  // signals) while this thread waits.
  sigset_t waiting_mask;
  sigfillset(&waiting_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&waiting_mask, sig);
  pthread_sigmask(SIG_SETMASK, &waiting_mask, nullptr);
  sched.exit_note.sleep();
  pthread_sigmask(SIG_SETMASK, &sched.initial_sigmask, nullptr);

  // Shutdown, as Go's main returning: parked goroutines are abandoned, and so are the
  // threads of goroutines in user code, spinning or inside a blocking call: run returns
  // without waiting for them past kExitGrace. Each thread in the runtime leaves it; one
  // still holding its P in user code is detached by the preemption signal; one outside
  // (so detached, or in a blocking call) that has not come back within the grace is
  // marked abandoned (abandon_outside).
  pthread_join(sched.sysmon_thread, nullptr);
  const std::int64_t grace_until = nanotime() + kExitGrace;
  for (int round = 0;; ++round) {
    sched.lock.lock();
    std::vector<M*> ms = sched.all_m;
    sched.lock.unlock();
    const bool grace = nanotime() < grace_until;
    bool all = true;
    for (M* m : ms) {
      if (m->exited.load(std::memory_order_acquire)) continue;
      if (!grace && abandon_outside(m)) continue;
      all = false;
      // Wake it wherever it sleeps; every 10 ms, ask a goroutine that holds its P in
      // user code to let it go. A hog detached earlier gets its priority back, so that
      // its stretch ends within the grace on a busy machine too.
      m->park.wakeup();
      hog_priority_restore(m);
      if (round % 10 == 0) {
        CurgReaders reading;
        preempt_for_exit(m);
      }
    }
    netpoll_break();
    if (all) break;
    timespec ts{0, 1'000'000};
    nanosleep(&ts, nullptr);
  }
  // An abandoned thread keeps its M, its goroutine and that goroutine's stack (it may
  // run on them until the process ends): they leave all_m and are never freed.
  // (m_abandoned is never read: it keeps them reachable, for LeakSanitizer.)
  const auto abandoned = std::stable_partition(
      sched.all_m.begin(), sched.all_m.end(),
      [](const M* m) { return m->where.load(std::memory_order_relaxed) != MWhere::abandoned; });
  for (auto it = abandoned; it != sched.all_m.end(); ++it) {
    pthread_detach((*it)->thread);
    sched.m_abandoned.push_back(*it);
  }
  sched.all_m.erase(abandoned, sched.all_m.end());
  // A retired M's thread was detached as it exited.
  for (M* m : sched.all_m)
    if (!m->retired) pthread_join(m->thread, nullptr);
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
