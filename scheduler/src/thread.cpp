// Ms: the OS threads that run goroutines. How they start (newm), sleep when there is
// nothing to do (stopm), are woken with a P to run (startm, wakep), and how a P whose
// M is stuck in a blocking call or was preempted goes to another M (handoffp).

#include "thread.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "machine_context.hpp"
#include "netpoll.hpp"
#include "queues.hpp"
#include "schedule.hpp"
#include "trace.hpp"

namespace goro::detail {
namespace {
void mthread_main(M* m);
}  // namespace

void setup_thread(M* m) {
  tls_m = m;
  m->tid = static_cast<int>(::syscall(SYS_gettid));
  m->errno_slot = &errno;
  m->eh_slot = reinterpret_cast<EhState*>(abi::__cxa_get_globals());
  // A new thread inherits the signal mask of the thread that started it: sysmon's,
  // which blocks the preemption signal, or that of a thread outside the runtime that
  // readied a goroutine (goro::signal_notify's relay blocks every signal). Every M takes
  // the mask of goro::run's caller instead, and must receive the runtime's own signals.
  sigset_t runtime_signals;
  sigemptyset(&runtime_signals);
  sigaddset(&runtime_signals, SIGURG);
  sigaddset(&runtime_signals, SIGSEGV);
  sigaddset(&runtime_signals, SIGBUS);
  pthread_sigmask(SIG_SETMASK, &sched.initial_sigmask, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &runtime_signals, nullptr);
  m->rand_state = (static_cast<std::uint64_t>(m->id) + 1) * 0x9E3779B97F4A7C15ULL ^
                  static_cast<std::uint64_t>(nanotime());
  if (m->rand_state == 0) m->rand_state = 1;
  // An alternate signal stack, so that a stack overflow can still be reported.
  const std::size_t size = 64 * 1024;
  m->sigstack = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m->sigstack != MAP_FAILED) {
    stack_t ss{};
    ss.ss_sp = m->sigstack;
    ss.ss_size = size;
    sigaltstack(&ss, nullptr);
  } else {
    m->sigstack = nullptr;
  }
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* lo = nullptr;
    std::size_t sz = 0;
    pthread_attr_getstack(&attr, &lo, &sz);
    m->g0_stack_lo = static_cast<const char*>(lo);
    m->g0_stack_size = sz;
    pthread_attr_destroy(&attr);
  }
#if defined(GORO_TSAN)
  m->tsan_fiber = __tsan_get_current_fiber();
#endif
}

void teardown_thread(M* m) {
  if (m->sigstack) {
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
    munmap(m->sigstack, 64 * 1024);
    m->sigstack = nullptr;
  }
  trace_flush_m(m);
  tls_m = nullptr;
}

namespace {

// Starts a new M that will run pp (spinning if asked).
void newm(P* pp, bool spinning) {
  sched.lock.lock();
  if (sched.exiting.load(std::memory_order_relaxed)) {
    // The run is ending: no thread starts. run_main's shutdown reads the fields of the
    // Ms it listed without the lock, and a retired M made new in place below would be
    // written under it (TSan saw that race).
    pidleput(pp);
    sched.lock.unlock();
    if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst);
    return;
  }
  if (sched.mcount.load(std::memory_order_relaxed) >= sched.max_m) {
    sched.lock.unlock();
    std::fprintf(stderr,
                 "goro: fatal error: thread limit exceeded: %d threads (goro::Config::max_threads); "
                 "too many goroutines are inside blocking calls at once\n",
                 sched.max_m);
    std::abort();
  }
  M* m;
  if (!sched.m_retired.empty()) {
    // An M whose thread exited idle: made new in place, keeping its id (all_m's index).
    m = sched.m_retired.back();
    sched.m_retired.pop_back();
    const int id = m->id;
    m->~M();
    m = ::new (m) M();
    m->id = id;
  } else {
    m = new M();
    m->id = static_cast<int>(sched.all_m.size());
    sched.all_m.push_back(m);
  }
  m->nextp = pp;
  m->spinning = spinning;
  sched.mcount.fetch_add(1, std::memory_order_relaxed);
  sched.lock.unlock();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1024 * 1024);
  int rc = pthread_create(
      &m->thread, &attr,
      [](void* arg) -> void* {
        mthread_main(static_cast<M*>(arg));
        return nullptr;
      },
      m);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    std::fprintf(stderr, "goro: fatal error: cannot create a thread: %s\n", std::strerror(rc));
    std::abort();
  }
}

}  // namespace

// Parks the current M until startm hands it a P (or the runtime exits).
void stopm(M* m) {
  sched.lock.lock();
  if (sched.exiting.load(std::memory_order_relaxed)) {
    sched.lock.unlock();
    return;
  }
  mput(m);
  sched.lock.unlock();
  trace_event(TraceKind::m_park, 0, 0);
  if (sched.idle_m_timeout == 0) {
    m->park.sleep();
  } else {
    while (!m->park.sleep_for(sched.idle_m_timeout)) {
      sched.lock.lock();
      // Still idle (startm did not take it) with enough others idle: this M leaves.
      // Taken meanwhile, its wake-up is on the way; else it keeps waiting.
      const bool listed = midle_contains(m);
      if (listed && !sched.exiting.load(std::memory_order_relaxed) &&
          sched.nmidle > sched.gomaxprocs) {
        midle_remove(m);
        sched.lock.unlock();
        m->retiring = true;
        return;
      }
      sched.lock.unlock();
      if (!listed) {
        m->park.sleep();
        break;
      }
    }
  }
  // Woken for the exit (run_main wakes every M), perhaps while a startm that took this
  // M before the exit began is still handing it a P: leave that P alone.
  if (sched.exiting.load(std::memory_order_acquire)) return;
  if (m->nextp) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
}

void startm(P* pp, bool spinning) {
  sched.lock.lock();
  if (pp == nullptr) {
    pp = pidleget();
    if (pp == nullptr) {
      sched.lock.unlock();
      if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
  }
  M* nm = sched.exiting.load(std::memory_order_relaxed) ? nullptr : mget();
  sched.lock.unlock();
  if (nm == nullptr) {
    newm(pp, spinning);
    return;
  }
  nm->spinning = spinning;
  nm->nextp = pp;
  nm->park.wakeup();
}

void wakep() {
  if (sched.npidle.load(std::memory_order_seq_cst) == 0) return;
  std::int32_t zero = 0;
  if (sched.nmspinning.load(std::memory_order_seq_cst) != 0 ||
      !sched.nmspinning.compare_exchange_strong(zero, 1, std::memory_order_seq_cst))
    return;
  startm(nullptr, true);
}

void wake_net_poller(std::int64_t when) {
  if (sched.lastpoll.load(std::memory_order_seq_cst) == 0) {
    // poll_until is 0 or the time the blocked poll runs to: at worst a spurious
    // break, never a missed one.
    std::int64_t until = sched.poll_until.load(std::memory_order_seq_cst);
    if (until == 0 || until > when) netpoll_break();
  } else {
    wakep();  // nobody in the poller: get an M there to watch the new timer
  }
}

// Hands off pp, whose M is blocked (in a syscall) or gone: start an M for it if there
// is work or nobody is spinning, else put it on the idle list.
void handoffp(P* pp) {
  trace_event(TraceKind::handoff, 0, static_cast<std::uint64_t>(pp->id));
  sched.handoffs.fetch_add(1, std::memory_order_relaxed);
  if (!pp->runq.empty() || sched.runq_size.load(std::memory_order_seq_cst) != 0) {
    startm(pp, false);
    return;
  }
  std::int32_t zero = 0;
  if (sched.nmspinning.load(std::memory_order_seq_cst) +
              sched.npidle.load(std::memory_order_seq_cst) ==
          0 &&
      sched.nmspinning.compare_exchange_strong(zero, 1, std::memory_order_seq_cst)) {
    startm(pp, true);
    return;
  }
  sched.lock.lock();
  if (sched.runq_size.load(std::memory_order_relaxed) != 0) {
    sched.lock.unlock();
    startm(pp, false);
    return;
  }
  // The last running P: somebody must keep polling the network and running timers.
  if (sched.npidle.load(std::memory_order_relaxed) == sched.gomaxprocs - 1 &&
      sched.lastpoll.load(std::memory_order_relaxed) != 0) {
    sched.lock.unlock();
    startm(pp, false);
    return;
  }
  std::int64_t when = pp->timers.timer0.load(std::memory_order_acquire);
  pidleput(pp);
  sched.lock.unlock();
  if (when != 0) wake_net_poller(when);
}

void start_locked_m(M* m, G* g) {
  M* lm = g->lockedm;
  P* pp = m->p;
  releasep(m);
  lm->nextp = pp;
  lm->park.wakeup();
}

bool stop_locked_m(M* m) {
  if (P* pp = m->p) {
    releasep(m);
    handoffp(pp);
  }
  // Only start_locked_m (which sets nextp before the wake-up) and the runtime's exit
  // wake this M: it is on no idle list. nextp is read only after a wake-up.
  do {
    m->park.sleep();
    if (sched.exiting.load(std::memory_order_relaxed)) return false;
  } while (m->nextp == nullptr);
  acquirep(m, m->nextp);
  m->nextp = nullptr;
  return true;
}

namespace {

void mthread_main(M* m) {
  setup_thread(m);
  if (m->nextp) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
  schedule_loop(m);
  teardown_thread(m);
  if (m->retiring) {
    // The thread ends on its own; the next newm reuses this M. Nothing touches m after
    // the unlock.
    pthread_detach(pthread_self());
    sched.lock.lock();
    m->retired = true;
    m->exited.store(true, std::memory_order_release);
    sched.m_retired.push_back(m);
    sched.mcount.fetch_sub(1, std::memory_order_relaxed);
    sched.lock.unlock();
    return;
  }
  m->exited.store(true, std::memory_order_release);
}

}  // namespace
}  // namespace goro::detail
