// The runtime's signal handlers.
//
// Preemption (SIGURG). sysmon sends it to the thread of a goroutine that has run 2 ms
// without a scheduling point while something waits for its P (sysmon.cpp). If the
// signal lands while the goroutine runs user code (no RuntimeScope open, so it holds no
// runtime lock and is not touching its P), the handler leaves the P in syscall state,
// exactly as enter_syscall does, and marks the M "detached"; sysmon then hands the P
// off at once. The handler never switches stacks: C++ code interrupted inside malloc
// or holding a thread-local cache cannot be resumed later on another thread.
//
// Stack overflow (SIGSEGV, SIGBUS). A fault on a goroutine's guard page or red zone, or
// with the stack pointer just below its stack, is reported as "goroutine N: stack
// overflow" (on the alternate signal stack each M has). Any other fault goes to the
// handler that was installed before ours (or the default action).

#include "signals.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "syscall.hpp"

namespace goro::detail {
namespace {

struct sigaction old_segv;
struct sigaction old_bus;

// The nice value a detached hog runs at. Not SCHED_IDLE, though it gave requests beside
// hogs a lower p99 (1.6 against 2.6 ms): a hog there gets a fifth of nice 19's share of
// a busy core, and a CPU-bound goroutine the program waits for (a TLS client loading a
// CA bundle under TSan while other goroutines kept every P busy) took 95 s, and libpq
// gave up on its handshake.
constexpr int kHogNice = 19;
// Whether a thread's priority, once lowered, can be raised back (hog_priority_probe).
std::atomic<bool> hog_priority_ok{false};

// The raw system calls: per thread (glibc's wrappers are not async-signal-safe by the
// letter), and getpriority's raw result, 20 - nice, is never negative.
long thread_prio_raw() {
  return syscall(SYS_getpriority, PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
}
bool set_thread_nice(int nice) {
  return syscall(SYS_setpriority, PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice) ==
         0;
}

void preempt_handler(int, siginfo_t*, void*) {
  int saved = errno;
  M* m = this_m();
  G* g = m != nullptr ? m->curg.load(std::memory_order_relaxed) : nullptr;
  P* pp = m != nullptr ? m->p : nullptr;
  // Only the P's own M changes a running P's state, and that M is the one this handler
  // interrupted: the state cannot change under us, but for sysmon detaching it (when it
  // found this thread blocked in the kernel), which claims the detach the same way.
  if (g != nullptr && pp != nullptr && g->in_runtime == 0 &&
      g->preempt.load(std::memory_order_relaxed) &&
      pp->status.load(std::memory_order_relaxed) == PStatus::running) {
    int none = 0;
    if (m->preempt_detached.compare_exchange_strong(none, kDetachPending,
                                                    std::memory_order_acq_rel)) {
      // At exit nothing is left to protect from the hog, and run waits for its stretch.
      if (!sched.exiting.load(std::memory_order_relaxed)) hog_priority_lower(m);
      finish_detach(m, pp);
    }
  }
  errno = saved;
}

void overflow_handler(int sig, siginfo_t* info, void* uctx) {
  M* m = this_m();
  G* g = m ? m->curg.load(std::memory_order_relaxed) : nullptr;
  if (g != nullptr) {
    auto* uc = static_cast<ucontext_t*>(uctx);
#if defined(__x86_64__)
    auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
    auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.sp);
#endif
    const bool sp_below = sp < reinterpret_cast<std::uintptr_t>(g->stack.lo) &&
                          sp + 1024 * 1024 > reinterpret_cast<std::uintptr_t>(g->stack.lo);
    if (sp_below || stack_is_guard_fault(g->stack, info->si_addr)) report_stack_overflow(g);
  }
  // Not an overflow: let the previous handler (or the default action) deal with it
  // when the faulting instruction runs again.
  sigaction(sig, sig == SIGSEGV ? &old_segv : &old_bus, nullptr);
}

}  // namespace

void report_stack_overflow(const G* g) {
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "goroutine %llu: stack overflow\n",
                        static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)));
  if (write(2, buf, static_cast<std::size_t>(n)) < 0) {
  }
  // The default action, not a handler of the program's: this stack cannot run one.
  signal(SIGABRT, SIG_DFL);
  abort();
}

void hog_priority_probe() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* e = std::getenv("GORO_HOG_NICE"); e != nullptr && std::strcmp(e, "0") == 0)
      return;
    // On a thread of its own: a lowered priority that cannot be raised dies with it.
    std::thread([] {
      const long prio = thread_prio_raw();
      if (prio <= 0) return;
      const int nice = 20 - static_cast<int>(prio);
      if (nice >= kHogNice) return;
      if (set_thread_nice(kHogNice) && set_thread_nice(nice)) hog_priority_ok.store(true);
    }).join();
  });
}

void hog_priority_lower(M* m) {
  if (!hog_priority_ok.load(std::memory_order_relaxed)) return;
  const long prio = thread_prio_raw();
  if (prio <= 0 || 20 - prio >= kHogNice) return;
  if (set_thread_nice(kHogNice))
    m->hog_saved_prio.store(static_cast<int>(prio), std::memory_order_relaxed);
}

void hog_priority_restore(M* m) {
  const int saved = m->hog_saved_prio.exchange(0, std::memory_order_relaxed);
  if (saved != 0) syscall(SYS_setpriority, PRIO_PROCESS, static_cast<id_t>(m->tid), 20 - saved);
}

void install_runtime_signals() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  struct sigaction sa = {};
  sa.sa_sigaction = preempt_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGURG, &sa, nullptr);
  struct sigaction so = {};
  so.sa_sigaction = overflow_handler;
  so.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&so.sa_mask);
  sigaction(SIGSEGV, &so, &old_segv);
  sigaction(SIGBUS, &so, &old_bus);
}

}  // namespace goro::detail
