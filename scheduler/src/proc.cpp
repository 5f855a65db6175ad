// goro's scheduler: the M:N model of Go's runtime, in C++20.
//
// Vocabulary (as in Go's proc.go)
//   G  a goroutine: a stack, saved registers and a status. Its struct lives at the top
//      of its own stack (stack.hpp), so a G and its stack are recycled together.
//   M  an OS thread. Each M runs the scheduler on its own thread stack ("g0") and
//      switches to a G to run it; the G switches back to g0 to park, yield or exit.
//   P  a processor: the right to run Gs, with a local run queue. There are exactly
//      GOMAXPROCS Ps; an M must hold a P to run a G. Ms are created on demand (for
//      spinning and syscall hand-off) and parked when idle.
//
// Finding work (find_runnable), in order:
//   0. this P's due timers (checked first, as Go does: DESIGN.md lists them fourth, but
//      a P whose local queue never drains would then never fire them);
//   1. every 61st schedule tick of a P, one G from the global queue (fairness: a P
//      whose local queue never empties still serves the global queue);
//   2. the P's runnext slot, then its local ring;
//   3. the global queue: a batch of min(len/GOMAXPROCS + 1, len, 128) moves to the ring;
//   4. stealing, if this M is already spinning or fewer than half of the busy Ps have
//      spinning Ms: 4 passes over the other Ps in random order (random start, stride
//      coprime with GOMAXPROCS), taking half of a victim's ring; on the last pass also
//      the victim's runnext and the expired timers of other Ps;
//   5. the global queue once more;
//   6. the netpoller, without blocking;
//   then the M gives up its P and, if no other M is already blocked there, blocks in
//   epoll_wait with the earliest timer as timeout; otherwise it parks on its note.
//
// Run queues. A fixed ring of 256 per P, pushed by the owner only and popped by the
// owner and thieves with a CAS on head (runq.hpp). A G made runnable by a running G
// goes to runnext and inherits the time slice (schedtick is not advanced), so a
// ping-pong pair stays on one P. When the ring is full, half of it (128) plus the new
// G move to the global queue in one batch.
//
// Spinning, and the protocol that loses no wake-up. An M looking for work holds a P and
// is "spinning" (counted in sched.nmspinning). When a G becomes runnable (ready, go,
// netpoll, timers) and there is an idle P and no spinning M, wakep() starts exactly one
// spinning M. A spinning M that finds work stops spinning and, if it was the last one,
// calls wakep() so that the remaining work is not left to a single thread. The race
// that matters: a spinner gives up (decrements nmspinning) while a producer readies a G
// and sees nmspinning != 0, so the producer does not wake anybody. Both sides use
// sequentially consistent atomics (the StoreLoad barrier): the producer writes the run
// queue, then reads nmspinning; the spinner decrements nmspinning, then re-reads every
// run queue. At least one of them sees the other's write, so either the producer wakes
// an M or the spinner finds the G. The same argument covers timers (checked after the
// decrement) and the global queue (rechecked under sched.lock before the P is
// released).
//
// Parking. A G that must wait calls park(commit, arg): it switches to g0 first, and g0
// runs commit (which publishes the G to its wakers, typically by unlocking a channel).
// Publishing only after leaving the stack means no other M can resume the G while this
// M still runs on it.
//
// Syscalls and preemption (sysmon.cpp has the details). enter_syscall marks the P
// "syscall" without releasing it; sysmon hands such a P to another M after a tick.
// A G that runs 10 ms without a scheduling point is asked to yield at its next safe
// point (any RuntimeScope), and if it never reaches one, the preemption signal moves
// its P into syscall state so that sysmon hands the P off — the hog keeps its thread,
// its P's other Gs keep running elsewhere.
//
// Rejected: ucontext (a syscall per switch for the signal mask); a mutex-protected
// local queue (the owner's push/pop would pay for thieves); asynchronous preemption by
// switching stacks inside a signal handler (C++ code interrupted inside malloc or a
// thread-local cache cannot be resumed on another thread safely).
//
// Locks, outermost first: sched.lock, a P's timer lock, sched.gfree_lock. None of them
// is held across a context switch except a park commit's own lock, released on g0.

#include "proc.hpp"

#include <goro/scheduler/detail/introspect.hpp>
#include <goro/scheduler/runtime.hpp>

#include <cxxabi.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <thread>

#include "context.hpp"
#include "trace.hpp"

#if defined(GORO_ASAN)
#include <sanitizer/lsan_interface.h>
#endif

namespace goro::detail {

Sched sched;

__attribute__((tls_model("initial-exec"))) thread_local M* tls_m = nullptr;  // see this_m()

namespace {

std::atomic<bool> runtime_running{false};

// Every G ever created, so that shutdown can release their stacks (allg_lock).
Lock allg_lock;
std::vector<G*> allgs;

// Numbers coprime with GOMAXPROCS: the strides of random victim orders.
std::vector<std::uint32_t> coprimes;

[[noreturn]] void fatal(const char* msg) {
  std::fprintf(stderr, "goro: fatal error: %s\n", msg);
  std::abort();
}

int futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const struct timespec* ts) {
  return static_cast<int>(
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, ts, nullptr, 0));
}

}  // namespace

// ---------------------------------------------------------------------------------
// Small primitives: clock, thread identity, notes, locks.

std::int64_t nanotime() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

#if !defined(__x86_64__)
__attribute__((noinline)) M* this_m() noexcept {
  asm volatile("" ::: "memory");
  return tls_m;
}
#endif

void Note::sleep() {
  while (key.load(std::memory_order_acquire) == 0) futex(&key, FUTEX_WAIT_PRIVATE, 0, nullptr);
  key.store(0, std::memory_order_relaxed);
}

bool Note::sleep_for(std::int64_t ns) {
  const std::int64_t deadline = nanotime() + ns;
  while (key.load(std::memory_order_acquire) == 0) {
    std::int64_t left = deadline - nanotime();
    if (left <= 0) return false;
    timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    futex(&key, FUTEX_WAIT_PRIVATE, 0, &ts);
  }
  key.store(0, std::memory_order_relaxed);
  return true;
}

void Note::wakeup() {
  key.store(1, std::memory_order_release);
  futex(&key, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

void Lock::lock_slow() noexcept {
  for (int spin = 0; spin < 64; ++spin) {
    std::uint32_t expected = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  // Mark contended and sleep until the holder's unlock wakes us.
  while (state_.exchange(2, std::memory_order_acquire) != 0)
    futex(&state_, FUTEX_WAIT_PRIVATE, 2, nullptr);
}

void Lock::unlock_slow() noexcept { futex(&state_, FUTEX_WAKE_PRIVATE, 1, nullptr); }

std::uint32_t fastrand(M* m) {
  // xorshift64*: cheap, per M, no shared state.
  std::uint64_t x = m->rand_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  m->rand_state = x;
  return static_cast<std::uint32_t>((x * 0x2545F4914F6CDD1DULL) >> 32);
}

// ---------------------------------------------------------------------------------
// Local run queue (runq.hpp has the contract).

namespace {

// Increments a statistic that only the P's owner writes: a plain load and store, no
// locked instruction on the hot path (readers may see a slightly old value).
inline void bump(std::atomic<std::uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Moves half of pp's ring plus g to the global queue. Owner only. Fails if a thief
// took something meanwhile (the caller then retries the fast path).
bool runqput_slow(P* pp, G* g, std::uint32_t h, std::uint32_t t) {
  constexpr std::uint32_t n = kRunQueueSize / 2;
  if (t - h != kRunQueueSize) fatal("runqput_slow: queue is not full");
  G* batch[n + 1];
  for (std::uint32_t i = 0; i < n; ++i)
    batch[i] = pp->runq.ring[(h + i) % kRunQueueSize].load(std::memory_order_relaxed);
  if (!pp->runq.head.compare_exchange_strong(h, h + n, std::memory_order_acq_rel,
                                             std::memory_order_relaxed))
    return false;
  batch[n] = g;
  sched.lock.lock();
  for (G* x : batch) sched.runq.push(x);
  sched.runq_size.fetch_add(static_cast<std::int32_t>(n + 1), std::memory_order_seq_cst);
  sched.lock.unlock();
  pp->stats.overflows.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Appends g to pp's ring if it has room. Owner only. Inline: it is the fast path of
// every switch that queues the G it leaves (after_resume).
inline bool runq_push_tail(P* pp, G* g) {
  std::uint32_t h = pp->runq.head.load(std::memory_order_acquire);
  std::uint32_t t = pp->runq.tail.load(std::memory_order_relaxed);
  if (t - h >= kRunQueueSize) return false;
  pp->runq.ring[t % kRunQueueSize].store(g, std::memory_order_relaxed);
  // Release is enough: a G on our own queue is run by us if nobody steals it, so a
  // wake-up lost to store/load reordering costs parallelism, never progress (as in Go,
  // whose StoreRel here is a plain store on x86).
  pp->runq.tail.store(t + 1, std::memory_order_release);
  return true;
}

// Puts g on pp's local queue; into runnext when `next` (the previous runnext is kicked
// to the ring's tail). Owner only.
void runqput(P* pp, G* g, bool next) {
  if (next) {
    G* old = pp->runq.runnext.exchange(g, std::memory_order_acq_rel);
    if (old == nullptr) return;
    g = old;
  }
  for (;;) {
    if (runq_push_tail(pp, g)) return;
    std::uint32_t h = pp->runq.head.load(std::memory_order_acquire);
    std::uint32_t t = pp->runq.tail.load(std::memory_order_relaxed);
    if (t - h < kRunQueueSize) continue;  // a thief made room meanwhile
    if (runqput_slow(pp, g, h, t)) return;
  }
}

// Takes a G from pp's local queue: runnext first (inherit = true), then the ring.
// Owner only.
// *left (if given): how many Gs were still in the ring behind the one returned (0 for
// runnext), as seen at the take.
G* runqget(P* pp, bool* inherit, std::uint32_t* left = nullptr) {
  G* next = pp->runq.runnext.load(std::memory_order_relaxed);
  if (next != nullptr &&
      pp->runq.runnext.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel)) {
    *inherit = true;
    if (left) *left = 0;
    bump(pp->stats.runnext_runs);
    return next;
  }
  for (;;) {
    std::uint32_t h = pp->runq.head.load(std::memory_order_acquire);
    std::uint32_t t = pp->runq.tail.load(std::memory_order_relaxed);
    if (t == h) return nullptr;
    G* g = pp->runq.ring[h % kRunQueueSize].load(std::memory_order_relaxed);
    if (pp->runq.head.compare_exchange_strong(h, h + 1, std::memory_order_acq_rel)) {
      *inherit = false;
      if (left) *left = t - h - 1;
      return g;
    }
  }
}

// Copies half of victim's ring into batch[batch_head...] (batch is the thief's ring)
// and commits by CAS on victim's head. Returns how many were taken.
std::uint32_t runqgrab(P* victim, std::atomic<G*>* batch, std::uint32_t batch_head,
                       bool steal_runnext) {
  for (;;) {
    std::uint32_t h = victim->runq.head.load(std::memory_order_acquire);
    std::uint32_t t = victim->runq.tail.load(std::memory_order_acquire);
    std::uint32_t n = t - h;
    n = n - n / 2;
    if (n == 0) {
      if (steal_runnext) {
        G* next = victim->runq.runnext.load(std::memory_order_acquire);
        if (next != nullptr) {
          // A running victim is likely about to schedule its runnext (a ping-pong
          // pair); give it a moment, as Go does, before stealing the G from under it.
          if (victim->status.load(std::memory_order_relaxed) == PStatus::running) {
            timespec ts{0, 3000};
            nanosleep(&ts, nullptr);
          }
          if (!victim->runq.runnext.compare_exchange_strong(next, nullptr,
                                                            std::memory_order_acq_rel))
            continue;
          batch[batch_head % kRunQueueSize].store(next, std::memory_order_relaxed);
          return 1;
        }
      }
      return 0;
    }
    if (n > kRunQueueSize / 2) continue;  // inconsistent h and t: retry
    for (std::uint32_t i = 0; i < n; ++i) {
      G* g = victim->runq.ring[(h + i) % kRunQueueSize].load(std::memory_order_relaxed);
      batch[(batch_head + i) % kRunQueueSize].store(g, std::memory_order_relaxed);
    }
    if (victim->runq.head.compare_exchange_strong(h, h + n, std::memory_order_acq_rel)) return n;
  }
}

// Steals half of victim's queue into pp's and returns one G to run. pp's owner only.
G* runqsteal(P* pp, P* victim, bool steal_runnext) {
  std::uint32_t t = pp->runq.tail.load(std::memory_order_relaxed);
  std::uint32_t n = runqgrab(victim, pp->runq.ring, t, steal_runnext);
  if (n == 0) return nullptr;
  pp->stats.steals.fetch_add(1, std::memory_order_relaxed);
  pp->stats.stolen_gs.fetch_add(n, std::memory_order_relaxed);
  n--;
  G* g = pp->runq.ring[(t + n) % kRunQueueSize].load(std::memory_order_relaxed);
  if (n == 0) return g;
  pp->runq.tail.store(t + n, std::memory_order_release);
  return g;
}

}  // namespace

// ---------------------------------------------------------------------------------
// Global run queue, idle Ps and idle Ms. Callers hold sched.lock.

void globrunqput(G* g) {
  sched.runq.push(g);
  sched.runq_size.fetch_add(1, std::memory_order_seq_cst);
}

namespace {

G* globrunqget_one() {
  if (sched.runq.empty()) return nullptr;
  G* g = sched.runq.pop();
  sched.runq_size.fetch_sub(1, std::memory_order_relaxed);
  return g;
}

// Takes min(len/GOMAXPROCS + 1, len, 128) Gs (at most `max` when max > 0): returns the
// first and puts the rest on pp's ring.
G* globrunqget(P* pp, int max) {
  int size = sched.runq_size.load(std::memory_order_relaxed);
  if (size == 0) return nullptr;
  int n = std::min(size, size / sched.gomaxprocs + 1);
  if (max > 0 && n > max) n = max;
  n = std::min<int>(n, kRunQueueSize / 2);
  G* g = globrunqget_one();
  if (n > 1) {
    pp->stats.global_batches.fetch_add(1, std::memory_order_relaxed);
    pp->stats.global_batch_gs.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  }
  for (int i = 1; i < n; ++i) runqput(pp, globrunqget_one(), false);
  return g;
}

void pidleput(P* pp) {
  pp->status.store(PStatus::idle, std::memory_order_seq_cst);
  pp->m = nullptr;
  pp->link = sched.pidle;
  sched.pidle = pp;
  sched.npidle.fetch_add(1, std::memory_order_seq_cst);
}

P* pidleget() {
  P* pp = sched.pidle;
  if (pp == nullptr) return nullptr;
  sched.pidle = pp->link;
  sched.npidle.fetch_sub(1, std::memory_order_seq_cst);
  if (sched.sysmon_wait) sysmon_wake();
  return pp;
}

void mput(M* m) {
  m->link = sched.midle;
  sched.midle = m;
  sched.nmidle++;
}

M* mget() {
  M* m = sched.midle;
  if (m) {
    sched.midle = m->link;
    sched.nmidle--;
  }
  return m;
}

void acquirep(M* m, P* pp) {
  m->p = pp;
  pp->m = m;
  pp->status.store(PStatus::running, std::memory_order_seq_cst);
}

void releasep(M* m) {
  m->p->m = nullptr;
  m->p = nullptr;
}

}  // namespace

void sysmon_wake() {
  sched.sysmon_wait = false;
  sched.sysmon_note.wakeup();
}

// ---------------------------------------------------------------------------------
// Threads.

namespace {

void mthread_main(M* m);

void setup_thread(M* m) {
  tls_m = m;
  m->errno_slot = &errno;
  m->eh_slot = reinterpret_cast<EhState*>(abi::__cxa_get_globals());
  // Threads started from sysmon inherit its signal mask, which blocks the preemption
  // signal: every M must receive it.
  sigset_t preempt_signal;
  sigemptyset(&preempt_signal);
  sigaddset(&preempt_signal, SIGURG);
  pthread_sigmask(SIG_UNBLOCK, &preempt_signal, nullptr);
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

// Starts a new M that will run pp (spinning if asked).
void newm(P* pp, bool spinning) {
  M* m = new M();
  m->nextp = pp;
  m->spinning = spinning;
  sched.lock.lock();
  if (static_cast<int>(sched.all_m.size()) >= sched.max_m) {
    sched.lock.unlock();
    std::fprintf(stderr, "goro: fatal error: thread limit reached (%d Ms)\n", sched.max_m);
    std::abort();
  }
  m->id = static_cast<int>(sched.all_m.size());
  sched.all_m.push_back(m);
  sched.lock.unlock();
  sched.mcount.fetch_add(1, std::memory_order_relaxed);
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
  m->park.sleep();
  if (m->nextp) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
}

}  // namespace

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

// ---------------------------------------------------------------------------------
// Switching between g0 and goroutines.

namespace {

[[noreturn]] void stack_overflow(G* g) {
  char buf[96];
  int n = std::snprintf(buf, sizeof buf, "goroutine %llu: stack overflow\n",
                        static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)));
  if (write(2, buf, static_cast<std::size_t>(n)) < 0) {
  }
  std::abort();
}

// Saves the leaving context's errno and C++ exception state from this thread (m's)
// and installs the entering context's. Through pointers looked up once per thread:
// errno and __cxa_get_globals() are thread-local, and the compiler may not reuse an
// address computed before a switch, after which a G can be on another thread.
inline void swap_thread_state(M* m, int* leaving_errno, EhState* leaving_eh,
                              const EhState* entering_eh) {
  *leaving_errno = *m->errno_slot;
  *leaving_eh = *m->eh_slot;
  *m->eh_slot = *entering_eh;
}

// Prefetching for switches. A switch leaves the return-address predictor useless, so
// a goroutine resuming through frames that were evicted since it last ran waits on one
// cache miss per return, one after another. With many connections (1,000 in
// loadtest/net) those misses are part of what goro pays over a bare epoll loop. So,
// when the local queue is long (a batch from the netpoller: each G in it last ran a
// whole batch ago), the lines a G touches first on resuming (its saved registers and
// the frames above them) are requested together just before switching to it, and
// the G line of the one queued after it, whose saved stack pointer the next switch
// reads. With a short queue the stacks are warm and the prefetches cost more than they
// save (yield: 19 -> 30 ns when always on). Measured: skynet (1M goroutines) 10%
// faster, echo with 1,000 connections 1-2% (within run-to-run noise, the same sign in
// three A/B sets), yield and channel ping-pong unchanged.
constexpr int kResumeLines = 16;
constexpr std::uint32_t kPrefetchQueue = 8;

// next: the G about to run, just taken from pp's queue with `left` Gs behind it. Only
// hints. The queued G is not dereferenced: a thief may have taken it meanwhile.
inline void prefetch_resume(P* pp, const G* next, std::uint32_t left) {
  if (left < kPrefetchQueue) return;
  const char* sp = static_cast<const char*>(next->sp);
  for (int i = 0; i < kResumeLines; ++i) __builtin_prefetch(sp + i * 64);
  const std::uint32_t h = pp->runq.head.load(std::memory_order_relaxed);
  __builtin_prefetch(pp->runq.ring[h % kRunQueueSize].load(std::memory_order_relaxed));
}

// g0 -> g. Returns when g switches back to g0.
void switch_to_g(M* m, G* g) {
  int g0_errno;
  swap_thread_state(m, &g0_errno, &m->g0_eh, &g->eh);
#if defined(GORO_ASAN)
  __sanitizer_start_switch_fiber(&m->asan_fake_stack, g->stack.lo, g->stack.size());
#endif
#if defined(GORO_TSAN)
  __tsan_switch_to_fiber(g->tsan_fiber, 0);
#endif
  goro_switch(&m->g0_sp, g->sp);
#if defined(GORO_ASAN)
  __sanitizer_finish_switch_fiber(m->asan_fake_stack, nullptr, nullptr);
#endif
  *m->errno_slot = g0_errno;
}

// Runs on a goroutine right after it was switched to: finishes a direct yield of the
// previous goroutine (see yield), now that its stack is no longer in use.
inline void after_resume(M* m) {
  if (G* prev = m->parked) {
    m->parked = nullptr;
    prev->status.store(GStatus::waiting, std::memory_order_seq_cst);
    ParkCommit commit = m->park_commit;
    m->park_commit = nullptr;
    if (commit && !commit(prev, m->park_arg)) {
      // The wait was cancelled before it was published: run prev next.
      prev->status.store(GStatus::runnable, std::memory_order_relaxed);
      runqput(m->p, prev, true);
    }
  }
  if (G* prev = m->yielded) {
    m->yielded = nullptr;
    prev->status.store(GStatus::runnable, std::memory_order_relaxed);
    if (!runq_push_tail(m->p, prev)) runqput(m->p, prev, false);
  }
}

// g -> its M's g0, telling g0 why. Returns when some M runs g again.
void switch_to_g0(G* g, SwitchReason reason) {
  M* m = g->m;
  m->switch_reason = reason;
  char probe;
  if (!stack_ok(g->stack, &probe, g->low_water, reason == SwitchReason::exit)) stack_overflow(g);
  swap_thread_state(m, &g->saved_errno, &g->eh, &m->g0_eh);
#if defined(GORO_ASAN)
  __sanitizer_start_switch_fiber(reason == SwitchReason::exit ? nullptr : &g->asan_fake_stack,
                                 m->g0_stack_lo, m->g0_stack_size);
#endif
#if defined(GORO_TSAN)
  __tsan_switch_to_fiber(m->tsan_fiber, 0);
#endif
  goro_switch(&g->sp, m->g0_sp);
#if defined(GORO_ASAN)
  __sanitizer_finish_switch_fiber(g->asan_fake_stack, nullptr, nullptr);
#endif
  after_resume(g->m);
  *g->m->errno_slot = g->saved_errno;
}

// Fast path of yield and park: picks the next G of the local queue and switches to it
// directly, without a round trip through g0. Not taken when this schedule is the
// 1-in-61 that must look at the global queue, when the tracer is on (it records every
// switch on g0), or when the preemption signal left the M without its P. Returns false
// if the caller must take the slow path. Precondition: g->in_runtime > 0.
bool switch_direct(G* g, M* m, G** handoff_slot) {
  if (m->preempt_detached || trace_enabled.load(std::memory_order_relaxed)) return false;
  P* pp = m->p;
  if (pp->schedtick % 61 == 0 && sched.runq_size.load(std::memory_order_relaxed) != 0) return false;
  // Due timers are run by find_runnable; look every 8th switch (a clock read). Counted
  // apart from schedtick, which a pair of goroutines handing runnext back and forth
  // never advances: timers would wait for sysmon (about 10 ms late) behind them.
  if (std::int64_t t0 = pp->timers.timer0.load(std::memory_order_relaxed);
      t0 != 0 && (++pp->switches & 7) == 0 && t0 <= nanotime())
    return false;
  bool inherit = false;
  std::uint32_t left = 0;
  G* next = runqget(pp, &inherit, &left);
  if (next == nullptr) return false;
  prefetch_resume(pp, next, left);
  if (!inherit) {
    pp->schedtick++;
    pp->schedtick_pub.store(pp->schedtick, std::memory_order_relaxed);
  }
  bump(pp->stats.runs);
  *handoff_slot = g;
  m->curg.store(next, std::memory_order_release);
  next->m = m;
  next->status.store(GStatus::running, std::memory_order_relaxed);
  char probe;
  if (!stack_ok(g->stack, &probe, g->low_water, false)) stack_overflow(g);
  swap_thread_state(m, &g->saved_errno, &g->eh, &next->eh);
#if defined(GORO_ASAN)
  __sanitizer_start_switch_fiber(&g->asan_fake_stack, next->stack.lo, next->stack.size());
#endif
#if defined(GORO_TSAN)
  __tsan_switch_to_fiber(next->tsan_fiber, 0);
#endif
  goro_switch(&g->sp, next->sp);
#if defined(GORO_ASAN)
  __sanitizer_finish_switch_fiber(g->asan_fake_stack, nullptr, nullptr);
#endif
  after_resume(g->m);
  *g->m->errno_slot = g->saved_errno;
  return true;
}

void runtime_exit(int code);

// Every goroutine starts here, on its own stack.
void g_main(void* arg) {
  G* g = static_cast<G*>(arg);
#if defined(GORO_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  after_resume(g->m);
  *g->m->errno_slot = 0;
  g->in_runtime = 0;
  try {
    g->entry(g->closure);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "goroutine %llu: uncaught exception: %s\n",
                 static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "goroutine %llu: uncaught exception: (not a std::exception)\n",
                 static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)));
    std::abort();
  }
  {
    // A safe point before exiting: if the preemption signal detached our P while the
    // body ran, get a P back first, so the M never leaves a G with stale syscall state.
    RuntimeScope scope;
    g->in_runtime++;
  }
  switch_to_g0(g, SwitchReason::exit);
  fatal("a dead goroutine was resumed");
}

// Frees g or caches it on pp for reuse.
void gfput(P* pp, G* g) {
  g->status.store(GStatus::dead, std::memory_order_relaxed);
  if (g->stack.size() != sched.default_stack) {
    allg_lock.lock();
    allgs[g->allg_index] = allgs.back();
    allgs[g->allg_index]->allg_index = g->allg_index;
    allgs.pop_back();
    allg_lock.unlock();
#if defined(GORO_TSAN)
    __tsan_destroy_fiber(g->tsan_fiber);
#endif
    Stack s = g->stack;
    stack_free(s);
    return;
  }
  pp->gfree[pp->gfree_count++] = g;
  if (pp->gfree_count == 64) {
    sched.gfree_lock.lock();
    while (pp->gfree_count > 32) sched.gfree.push(pp->gfree[--pp->gfree_count]);
    sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
    sched.gfree_lock.unlock();
  }
}

G* gfget(P* pp) {
  if (pp == nullptr) {
    sched.gfree_lock.lock();
    G* g = sched.gfree.empty() ? nullptr : sched.gfree.pop_back();
    sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
    sched.gfree_lock.unlock();
    return g;
  }
  if (pp->gfree_count == 0 && sched.gfree_count.load(std::memory_order_relaxed) > 0) {
    sched.gfree_lock.lock();
    while (pp->gfree_count < 32 && !sched.gfree.empty())
      pp->gfree[pp->gfree_count++] = sched.gfree.pop_back();
    sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
    sched.gfree_lock.unlock();
  }
  return pp->gfree_count > 0 ? pp->gfree[--pp->gfree_count] : nullptr;
}

std::uint64_t next_goid(P* pp) {
  if (pp == nullptr) return sched.goid_gen.fetch_add(1, std::memory_order_relaxed) + 1;
  if (pp->goid_next == pp->goid_end) {
    constexpr std::uint64_t batch = 16;
    pp->goid_next = sched.goid_gen.fetch_add(batch, std::memory_order_relaxed) + 1;
    pp->goid_end = pp->goid_next + batch;
  }
  return pp->goid_next++;
}

}  // namespace

// ---------------------------------------------------------------------------------
// find_runnable and the M's scheduling loop.

namespace {

G* steal_work(M* m, P* pp, bool* inherit, std::int64_t& now) {
  const std::uint32_t procs = static_cast<std::uint32_t>(sched.gomaxprocs);
  for (int pass = 0; pass < 4; ++pass) {
    const bool last = pass == 3;
    std::uint32_t pos = fastrand(m) % procs;
    std::uint32_t stride = coprimes[fastrand(m) % coprimes.size()];
    for (std::uint32_t i = 0; i < procs; ++i, pos = (pos + stride) % procs) {
      if (sched.exiting.load(std::memory_order_relaxed)) return nullptr;
      P* victim = sched.all_p[pos];
      if (victim == pp) continue;
      if (last) {
        std::int64_t t0 = victim->timers.timer0.load(std::memory_order_acquire);
        if (t0 != 0) {
          if (now == 0) now = nanotime();
          if (t0 <= now) {
            run_timers(victim, now);
            if (G* g = runqget(pp, inherit)) return g;
          }
        }
      }
      if (G* g = runqsteal(pp, victim, last)) {
        *inherit = false;
        trace_event(TraceKind::steal, g->id.load(std::memory_order_relaxed),
                    static_cast<std::uint64_t>(victim->id));
        return g;
      }
    }
  }
  return nullptr;
}

// Makes m a spinning M if fewer than half of the busy Ps have one. The check and the
// increment are one CAS, so concurrent Ms cannot overshoot the bound together.
bool try_become_spinning(M* m) {
  const int busy = sched.gomaxprocs - sched.npidle.load(std::memory_order_seq_cst);
  std::int32_t n = sched.nmspinning.load(std::memory_order_seq_cst);
  while (2 * n < busy) {
    if (sched.nmspinning.compare_exchange_weak(n, n + 1, std::memory_order_seq_cst)) {
      m->spinning = true;
      return true;
    }
  }
  return false;
}

// Puts a list of Gs made runnable by the netpoller on pp's queue (or the global queue
// when pp is null) and wakes Ms for them.
void inject_list(P* pp, G* list, int n) {
  if (list == nullptr) return;
  for (G* g = list; g; g = g->link) {
    GStatus expected = GStatus::waiting;
    if (!g->status.compare_exchange_strong(expected, GStatus::runnable))
      fatal("netpoll readied a goroutine that was not waiting");
  }
  if (pp == nullptr) {
    sched.lock.lock();
    while (list) {
      G* next = list->link;
      globrunqput(list);
      list = next;
    }
    sched.lock.unlock();
    for (int i = 0; i < n && sched.npidle.load(std::memory_order_relaxed) > 0; ++i)
      startm(nullptr, false);
    return;
  }
  while (list) {
    G* next = list->link;
    runqput(pp, list, false);
    list = next;
  }
  for (int i = 0; i < n; ++i) wakep();
}

G* find_runnable(M* m, bool* inherit) {
top:
  if (sched.exiting.load(std::memory_order_relaxed)) return nullptr;
  P* pp = m->p;
  std::int64_t now = 0;
  *inherit = false;

  // 0. This P's due timers first, as Go does (DESIGN.md lists them fourth): a P whose
  // local queue never drains — a goroutine that keeps yielding — would otherwise
  // never fire them. Costs a clock read only when a timer is pending.
  if (std::int64_t t0 = pp->timers.timer0.load(std::memory_order_acquire); t0 != 0) {
    now = nanotime();
    if (t0 <= now) run_timers(pp, now);
  }

  // 1. Fairness: a P whose local queue never drains still serves the global queue.
  if (pp->schedtick % 61 == 0 && sched.runq_size.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* g = globrunqget(pp, 1);
    sched.lock.unlock();
    if (g) {
      pp->stats.global_fair.fetch_add(1, std::memory_order_relaxed);
      return g;
    }
  }
  // 2. runnext, then the local ring.
  if (G* g = runqget(pp, inherit)) return g;
  // 3. The global queue, in a batch.
  if (sched.runq_size.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* g = globrunqget(pp, 0);
    sched.lock.unlock();
    if (g) return g;
  }
  // 4. Steal, with a bounded number of spinning Ms.
  if (m->spinning || try_become_spinning(m)) {
    if (G* g = steal_work(m, pp, inherit, now)) return g;
  }
  // 5. The global queue once more.
  if (sched.runq_size.load(std::memory_order_relaxed) > 0) {
    sched.lock.lock();
    G* g = globrunqget(pp, 0);
    sched.lock.unlock();
    if (g) return g;
  }
  // 6. The netpoller, without blocking.
  if (std::int64_t last = sched.lastpoll.load(std::memory_order_relaxed);
      netpoll_anything_waiting() && last != 0) {
    int n = 0;
    G* list = netpoll(0, &n);
    // Tell sysmon the network is being polled: a server busy enough never to block in
    // epoll_wait would otherwise look starved to it every 10 ms, and sysmon would poll
    // too, hand the events to the global queue and wake Ms for them.
    sched.lastpoll.compare_exchange_strong(last, nanotime(), std::memory_order_relaxed);
    if (list) {
      G* g = list;
      inject_list(pp, list->link, n - 1);
      GStatus expected = GStatus::waiting;
      if (!g->status.compare_exchange_strong(expected, GStatus::runnable))
        fatal("netpoll readied a goroutine that was not waiting");
      trace_event(TraceKind::netpoll, g->id.load(std::memory_order_relaxed),
                  static_cast<std::uint64_t>(n));
      return g;
    }
  }

  // Nothing to do: give up the P.
  sched.lock.lock();
  if (sched.exiting.load(std::memory_order_relaxed)) {
    sched.lock.unlock();
    return nullptr;
  }
  if (sched.runq_size.load(std::memory_order_relaxed) != 0) {
    G* g = globrunqget(pp, 0);
    sched.lock.unlock();
    return g;
  }
  releasep(m);
  pidleput(pp);
  sched.lock.unlock();

  const bool was_spinning = m->spinning;
  if (m->spinning) {
    m->spinning = false;
    if (sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) <= 0)
      fatal("find_runnable: negative nmspinning");
    // The StoreLoad dance (see the top of this file): having published that we stop
    // spinning, look at every run queue again.
    for (P* p2 : sched.all_p) {
      if (!p2->runq.empty()) {
        sched.lock.lock();
        P* got = pidleget();
        sched.lock.unlock();
        if (got) {
          acquirep(m, got);
          try_become_spinning(m);
          goto top;
        }
        break;
      }
    }
  }
  // Timers of every P (idle Ps keep theirs): the blocking poll must wake for them.
  std::int64_t poll_until = earliest_timer();

  if ((netpoll_anything_waiting() || poll_until != 0) &&
      sched.lastpoll.exchange(0, std::memory_order_seq_cst) != 0) {
    // Look at the timers again now that lastpoll == 0 is published: a timer added in
    // between either is seen here or sees us polling and breaks the poll.
    poll_until = earliest_timer();
    sched.poll_until.store(poll_until, std::memory_order_seq_cst);
    std::int64_t delay = -1;
    if (poll_until != 0) delay = std::max<std::int64_t>(0, poll_until - nanotime());
    // Recheck the global queue after publishing poll_until: a G readied meanwhile by a
    // thread without a P either woke an M or will break this poll.
    if (sched.runq_size.load(std::memory_order_seq_cst) != 0) delay = 0;
    int n = 0;
    G* list = netpoll(delay, &n);
    if (list)
      trace_event(TraceKind::netpoll, list->id.load(std::memory_order_relaxed),
                  static_cast<std::uint64_t>(n));
    sched.poll_until.store(0, std::memory_order_seq_cst);
    sched.lastpoll.store(nanotime(), std::memory_order_seq_cst);
    sched.lock.lock();
    P* got = sched.exiting.load(std::memory_order_relaxed) ? nullptr : pidleget();
    sched.lock.unlock();
    if (got == nullptr) {
      inject_list(nullptr, list, n);
    } else {
      acquirep(m, got);
      if (list) {
        G* g = list;
        inject_list(got, list->link, n - 1);
        GStatus expected = GStatus::waiting;
        if (!g->status.compare_exchange_strong(expected, GStatus::runnable))
          fatal("netpoll readied a goroutine that was not waiting");
        return g;
      }
      if (was_spinning) try_become_spinning(m);
      goto top;
    }
  } else if (poll_until != 0) {
    // Another M is blocked in the netpoller: make sure it wakes up in time.
    std::int64_t until = sched.poll_until.load(std::memory_order_seq_cst);
    if (until == 0 || until > poll_until) netpoll_break();
  }
  stopm(m);
  if (m->p == nullptr) return nullptr;  // exiting
  goto top;
}

// Runs g on m until it switches back, then does what it asked for.
void execute(M* m, G* g, bool inherit) {
  for (;;) {
    P* pp = m->p;
    if (!inherit) {
      pp->schedtick++;
      pp->schedtick_pub.store(pp->schedtick, std::memory_order_relaxed);
    }
    bump(pp->stats.runs);
    m->curg.store(g, std::memory_order_release);  // sysmon reads it (acquire)
    g->m = m;
    g->status.store(GStatus::running, std::memory_order_relaxed);
    trace_event(TraceKind::g_start, g->id.load(std::memory_order_relaxed),
                static_cast<std::uint64_t>(pp->id), g->name[0] ? g->name : nullptr);
    switch_to_g(m, g);
    g = m->curg.load(std::memory_order_relaxed);  // another G, if g yielded directly
    pp = m->p;
    m->curg.store(nullptr, std::memory_order_relaxed);
    trace_event(TraceKind::g_stop, g->id.load(std::memory_order_relaxed),
                static_cast<std::uint64_t>(m->switch_reason) |
                    (static_cast<std::uint64_t>(g->wait_reason) << 8));
    switch (m->switch_reason) {
      case SwitchReason::park: {
        g->status.store(GStatus::waiting, std::memory_order_seq_cst);
        ParkCommit commit = m->park_commit;
        m->park_commit = nullptr;
        if (commit && !commit(g, m->park_arg)) {
          g->status.store(GStatus::running, std::memory_order_relaxed);
          inherit = true;
          continue;  // the wait was cancelled: resume g at once
        }
        return;
      }
      case SwitchReason::yield:
        // To the local ring's tail, not the global queue as Go's Gosched: cheaper,
        // keeps the G's cache, and the 1-in-61 check still serves the global queue.
        g->status.store(GStatus::runnable, std::memory_order_relaxed);
        runqput(m->p, g, false);
        return;
      case SwitchReason::preempt:
        g->status.store(GStatus::runnable, std::memory_order_relaxed);
        sched.lock.lock();
        globrunqput(g);
        sched.lock.unlock();
        wakep();  // an idle P may take it (Go's goschedImpl does the same)
        return;
      case SwitchReason::syscall_no_p: {
        // Back from a blocking call without a P. Look for an idle P and queue g under
        // one hold of the lock: a P released between two separate steps would sit idle
        // next to a runnable g, with every M asleep (a lost wake-up).
        sched.lock.lock();
        P* idle = sched.exiting.load(std::memory_order_relaxed) ? nullptr : pidleget();
        if (idle == nullptr) {
          g->status.store(GStatus::runnable, std::memory_order_relaxed);
          globrunqput(g);
        }
        sched.lock.unlock();
        if (idle == nullptr) return;
        acquirep(m, idle);
        inherit = true;
        continue;
      }
      case SwitchReason::exit:
        if (m->p) gfput(m->p, g);
        return;
    }
  }
}

void schedule_loop(M* m) {
  for (;;) {
    if (sched.exiting.load(std::memory_order_relaxed)) return;
    if (m->p == nullptr) {
      stopm(m);
      continue;
    }
    bool inherit = false;
    G* g = find_runnable(m, &inherit);
    if (g == nullptr) continue;
    if (m->spinning) {
      m->spinning = false;
      // The last spinner found work: start another so the rest is not left waiting.
      if (sched.nmspinning.fetch_sub(1, std::memory_order_seq_cst) == 1) wakep();
    }
    execute(m, g, inherit);
  }
}

void mthread_main(M* m) {
  setup_thread(m);
  if (m->nextp) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
  schedule_loop(m);
  teardown_thread(m);
  m->exited.store(true, std::memory_order_release);
}

void runtime_exit(int code) {
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

// ---------------------------------------------------------------------------------
// The runtime interface (detail/runtime.hpp).

G* current_g() noexcept {
  M* m = this_m();
  return m ? m->curg.load(std::memory_order_relaxed) : nullptr;
}

std::uint64_t g_id(const G* g) noexcept { return g ? g->id.load(std::memory_order_relaxed) : 0; }

void park(ParkCommit commit, void* arg, WaitReason reason) {
  G* g = current_g();
  if (g == nullptr) fatal("park called outside a goroutine");
  M* m = g->m;
  m->park_commit = commit;
  m->park_arg = arg;
  g->wait_reason = reason;
  // Callers hold a RuntimeScope (see detail/runtime.hpp); without one the direct path
  // could race with the preemption signal.
  if (g->in_runtime > 0 && switch_direct(g, m, &m->parked)) return;
  switch_to_g0(g, SwitchReason::park);
}

void ready(G* g) {
  GStatus expected = GStatus::waiting;
  if (!g->status.compare_exchange_strong(expected, GStatus::runnable, std::memory_order_seq_cst))
    fatal("ready of a goroutine that is not waiting");
  trace_event(TraceKind::g_ready, g->id.load(std::memory_order_relaxed), 0);
  RuntimeScope scope;
  M* m = this_m();
  if (m && m->p) {
    // Next in line, as Go's goready: the readied G runs before the rest of the queue,
    // also when a timer readies it from the scheduler stack (else a pair of goroutines
    // trading runnext would keep a woken sleeper waiting behind them).
    runqput(m->p, g, true);
  } else {
    sched.lock.lock();
    globrunqput(g);
    sched.lock.unlock();
  }
  wakep();
}

void ready_list(G* list, int n) { inject_list(nullptr, list, n); }

G* new_g(std::size_t stack_size, std::string_view name, std::size_t closure_size,
         std::size_t closure_align, void** closure_slot) {
  // A goroutine belongs to a running runtime: before goro::run, or after it returned,
  // it would be dropped or handed a stack already unmapped.
  if (!runtime_running.load(std::memory_order_acquire))
    fatal("goro::go called while no goro::run is running");
  RuntimeScope scope;
  M* m = this_m();
  P* pp = m ? m->p : nullptr;
  const std::size_t page = page_size();
  std::size_t want =
      stack_size == 0 ? sched.default_stack : ((stack_size + page - 1) & ~(page - 1));
  if (want < 16 * 1024) want = 16 * 1024;
  G* g = nullptr;
  if (want == sched.default_stack) g = gfget(pp);
#if defined(GORO_ASAN)
  // The previous goroutine on this stack may have left poisoned shadow behind.
  if (g)
    __asan_unpoison_memory_region(
        g->stack.lo, static_cast<std::size_t>(reinterpret_cast<char*>(g) - g->stack.lo));
#endif
  if (g == nullptr) {
    Stack s = stack_alloc(want, want == sched.default_stack);
    void* top = s.hi - sizeof(G);
    top = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(top) & ~std::uintptr_t{63});
    g = ::new (top) G();
    g->stack = s;
#if defined(GORO_TSAN)
    g->tsan_fiber = __tsan_create_fiber(0);
#endif
    allg_lock.lock();
    g->allg_index = allgs.size();
    allgs.push_back(g);
    allg_lock.unlock();
  }
  g->id.store(next_goid(pp), std::memory_order_relaxed);
  g->link = nullptr;
  g->m = nullptr;
  g->low_water = g->stack.hi;
  g->eh = EhState{};
  g->in_runtime = 1;  // not preemptible until g_main has finished switching in
  g->preempt.store(false, std::memory_order_relaxed);
  g->wait_reason = WaitReason::none;
  g->saved_errno = 0;
  std::size_t len = std::min(name.size(), sizeof g->name - 1);
  // Never cut a UTF-8 character in two (the tracer writes names into JSON).
  while (len < name.size() && len > 0 && (static_cast<unsigned char>(name[len]) & 0xC0) == 0x80)
    len--;
  if (len != 0) std::memcpy(g->name, name.data(), len);  // data() may be null
  g->name[len] = '\0';
  // The closure goes right below the G, the first frame right below the closure.
  auto top = reinterpret_cast<std::uintptr_t>(g);
  auto slot = (top - closure_size) & ~(static_cast<std::uintptr_t>(closure_align) - 1);
  if (slot - 1024 < reinterpret_cast<std::uintptr_t>(g->stack.lo))
    fatal("go: closure too large for the stack");
  g->closure = reinterpret_cast<void*>(slot);
  *closure_slot = g->closure;
  return g;
}

void start_g(G* g, void (*entry)(void*)) {
  RuntimeScope scope;
  g->entry = entry;
  g->sp = make_context(g->closure, &g_main, g);
  g->status.store(GStatus::runnable, std::memory_order_relaxed);
  trace_event(TraceKind::g_create, g->id.load(std::memory_order_relaxed), 0, g->name);
  M* m = this_m();
  if (m && m->p) {
    runqput(m->p, g, true);
  } else {
    sched.lock.lock();
    globrunqput(g);
    sched.lock.unlock();
  }
  wakep();
}

// RuntimeScope: see detail/runtime.hpp. The outermost scope is a safe point.
RuntimeScope::RuntimeScope() noexcept : g_(current_g()) {
  if (g_ == nullptr) return;
  if (g_->in_runtime++ != 0) return;
  // The preemption signal handler runs on this thread and reads in_runtime: the
  // increment must be in place before we look at the P.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  M* m = g_->m;
  if (m->preempt_detached) {
    // The preemption signal left our P for sysmon; get a P back before touching one.
    m->preempt_detached = 0;
    exit_syscall_after_preempt();
  }
  if (g_->status.load(std::memory_order_relaxed) == GStatus::syscall) {
    // A runtime call from inside goro::blocking (a channel, a lock, a sleep, the
    // network): it may park or touch a P, and this thread gave its P up. Leave the
    // syscall state for the call, as if the blocking function had returned, and go
    // back into it when the call is done. Nothing of the runtime is held here: this is
    // the outermost scope.
    exit_syscall();
    reenter_syscall_ = true;
  }
  if (g_->preempt.load(std::memory_order_relaxed)) {
    g_->preempt.store(false, std::memory_order_relaxed);
    switch_to_g0(g_, SwitchReason::preempt);
  }
}

RuntimeScope::~RuntimeScope() {
  if (g_ == nullptr) return;
  if (reenter_syscall_) enter_syscall(false);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_->in_runtime--;
}

// ---------------------------------------------------------------------------------
// Syscalls: the P stays with a G in a blocking call unless sysmon retakes it.

void enter_syscall(bool hand_off_now) {
  M* m = this_m();
  G* g = m->curg;
  P* pp = m->p;
  trace_event(TraceKind::syscall_enter, g->id.load(std::memory_order_relaxed),
              static_cast<std::uint64_t>(pp->id));
  g->status.store(GStatus::syscall, std::memory_order_relaxed);
  m->oldp = pp;
  m->p = nullptr;
  pp->m = nullptr;
  pp->status.store(PStatus::syscall, std::memory_order_seq_cst);
  sched.nmsys.fetch_add(1, std::memory_order_relaxed);
  if (hand_off_now) {
    PStatus expected = PStatus::syscall;
    if (pp->status.compare_exchange_strong(expected, PStatus::idle, std::memory_order_seq_cst)) {
      m->oldp = nullptr;
      pp->syscalltick.fetch_add(1, std::memory_order_relaxed);
      handoffp(pp);
    }
  } else if (sched.sysmon_wait) {
    // sysmon sleeps while the runtime is idle; it must watch this call, closely.
    sched.sysmon_kick.store(true, std::memory_order_release);
    sched.lock.lock();
    if (sched.sysmon_wait) sysmon_wake();
    sched.lock.unlock();
  } else if (sched.sysmon_delay.load(std::memory_order_relaxed) > 1'000'000 &&
             !sched.sysmon_kick.exchange(true, std::memory_order_acq_rel)) {
    // sysmon has backed off (up to 10 ms): the P of this call would wait that long to
    // be handed off. Kick it back to its shortest delay (once per back-off).
    sched.sysmon_note.wakeup();
  }
}

void exit_syscall() {
  M* m = this_m();
  G* g = m->curg;
  sched.nmsys.fetch_sub(1, std::memory_order_relaxed);
  P* oldp = m->oldp;
  m->oldp = nullptr;
  // Fast path: our P was not retaken.
  if (oldp) {
    PStatus expected = PStatus::syscall;
    if (oldp->status.compare_exchange_strong(expected, PStatus::running,
                                             std::memory_order_seq_cst)) {
      m->p = oldp;
      oldp->m = m;
      oldp->syscalltick.fetch_add(1, std::memory_order_relaxed);
      g->status.store(GStatus::running, std::memory_order_relaxed);
      trace_event(TraceKind::syscall_exit, g->id.load(std::memory_order_relaxed), 0);
      return;
    }
  }
  // Any idle P.
  sched.lock.lock();
  P* pp = sched.exiting.load(std::memory_order_relaxed) ? nullptr : pidleget();
  sched.lock.unlock();
  if (pp) {
    acquirep(m, pp);
    g->status.store(GStatus::running, std::memory_order_relaxed);
    trace_event(TraceKind::syscall_exit, g->id.load(std::memory_order_relaxed), 1);
    return;
  }
  // None: queue the G globally and park this M (it picks up work when woken).
  trace_event(TraceKind::syscall_exit, g->id.load(std::memory_order_relaxed), 2);
  g->in_runtime++;
  switch_to_g0(g, SwitchReason::syscall_no_p);
  g->in_runtime--;
}

void exit_syscall_after_preempt() {
  sched.nmsys.fetch_add(1, std::memory_order_relaxed);  // balanced by exit_syscall
  M* m = this_m();
  if (m->oldp) m->oldp->detached_by_signal.store(false, std::memory_order_release);
  exit_syscall();
}

SyscallScope::SyscallScope(bool hand_off_now) noexcept : active_(false) {
  G* g = current_g();
  if (g == nullptr) return;  // not on a goroutine: nothing to hand off
  // goro::blocking inside goro::blocking: already in the syscall state.
  if (g->status.load(std::memory_order_relaxed) == GStatus::syscall) return;
  RuntimeScope scope;  // safe point, and no preemption signal in between
  enter_syscall(hand_off_now);
  active_ = true;
}

SyscallScope::~SyscallScope() {
  if (!active_) return;
  G* g = current_g();
  g->in_runtime++;
  exit_syscall();
  g->in_runtime--;
}

}  // namespace goro::detail

// ---------------------------------------------------------------------------------
// Public API (runtime.hpp).

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
  if (runtime_running.exchange(true)) fatal("goro::run called while the runtime is running");
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
  sched.mcount.store(0);
  sched.gfree.clear();
  sched.gfree_count.store(0);
  sched.goid_gen.store(0);
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
  coprimes.clear();
  for (int i = 1; i <= procs; ++i)
    if (std::gcd(i, procs) == 1) coprimes.push_back(static_cast<std::uint32_t>(i));

  sched.all_p.clear();
  for (int i = 0; i < procs; ++i) {
    P* pp = new P();
    pp->id = i;
    sched.all_p.push_back(pp);
  }
  for (int i = procs - 1; i >= 1; --i) pidleput(sched.all_p[i]);

  trace_init();
  netpoll_init();
  preempt_signal_install();

  M* m0 = new M();
  m0->id = 0;
  m0->thread = pthread_self();
  sched.all_m.push_back(m0);
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
  for (M* m : sched.all_m)
    if (m != m0) pthread_join(m->thread, nullptr);
  teardown_thread(m0);
  trace_shutdown();
  netpoll_shutdown();

  allg_lock.lock();
  bool keep_arenas = false;
  for (G* g : allgs) {
#if defined(GORO_ASAN)
    // An abandoned goroutine (parked when main returned) still references what it
    // allocated. Go's exit leaks it all; so do we in ASan builds, keeping the stack
    // mapped and telling LeakSanitizer to scan it, so only real leaks are reported.
    if (GStatus st = g->status.load(); st == GStatus::waiting || st == GStatus::runnable) {
      auto* sp = static_cast<char*>(g->sp);
      __lsan_register_root_region(sp, static_cast<std::size_t>(g->stack.hi - sp));
      keep_arenas |= g->stack.arena;
      continue;
    }
#endif
#if defined(GORO_TSAN)
    __tsan_destroy_fiber(g->tsan_fiber);
#endif
    Stack s = g->stack;
    stack_free(s);
  }
  allgs.clear();
  allg_lock.unlock();
  // The free lists point into the stacks just unmapped: empty them now, not at the next
  // run(), so nothing can take a G from them in between.
  sched.gfree_lock.lock();
  sched.gfree.clear();
  sched.gfree_count.store(0);
  sched.gfree_lock.unlock();
  if (!keep_arenas) stack_release_all();
  for (P* pp : sched.all_p) delete pp;
  sched.all_p.clear();
  for (M* m : sched.all_m) delete m;
  sched.all_m.clear();
  const int code = sched.exit_code;
  runtime_running.store(false);
  return code;
}

}  // namespace goro::detail

namespace goro {

void yield() {
  M* m = this_m();
  G* g = m ? m->curg.load(std::memory_order_relaxed) : nullptr;
  if (g == nullptr) {
    sched_yield();
    return;
  }
  // We cannot queue ourselves before leaving our stack (a thief could resume us while
  // we still run on it): the G we switch to does it (after_resume). Inside
  // goro::blocking there is no P to switch on: the scope below takes one first.
  if (g->in_runtime == 0 && g->status.load(std::memory_order_relaxed) != GStatus::syscall) {
    g->in_runtime = 1;  // from here on the preemption signal leaves our P alone
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g->preempt.store(false, std::memory_order_relaxed);  // yielding is what it asks
    bool done = switch_direct(g, m, &m->yielded);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g->in_runtime = 0;
    if (done) return;
  }
  RuntimeScope scope;
  switch_to_g0(g, SwitchReason::yield);
}

namespace {
void sleep_fire(Timer* t) { ready(static_cast<G*>(t->arg)); }
bool sleep_commit(G*, void* arg) {
  timer_start(static_cast<Timer*>(arg));
  return true;
}
}  // namespace

void sleep(std::chrono::nanoseconds d) {
  G* g = current_g();
  if (g == nullptr) {
    std::this_thread::sleep_for(d);
    return;
  }
  RuntimeScope scope;
  if (d.count() <= 0) {
    switch_to_g0(g, SwitchReason::yield);
    return;
  }
  Timer t;
  t.when = nanotime_after(d.count());
  t.fire = sleep_fire;
  t.arg = g;
  park(sleep_commit, &t, WaitReason::sleep);
}

int maxprocs() { return sched.gomaxprocs; }

std::uint64_t goid() { return g_id(current_g()); }

}  // namespace goro
