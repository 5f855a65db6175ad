// The runtime's data structures: G (a goroutine), M (an OS thread), P (a processor: the
// right to run Gs) and Sched (what they share). What each state means and who owns the
// object in it is written beside the state. The model, the invariants and the race
// protocols are described at the top of schedule.cpp.
#pragma once

#include <goro/scheduler/detail/runtime.hpp>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "os.hpp"
#include "runq.hpp"
#include "stack.hpp"

namespace goro::detail {

struct M;
struct P;

// A goroutine's state. The transitions and who makes them:
//   dead -> runnable        start_g (a new G), or a free G taken again by new_g
//   runnable -> running     the M that takes it from a run queue (execute, direct switch)
//   running -> waiting      park: the G's own M, on g0 or in the G it switched to
//   waiting -> runnable     ready (any thread), the netpoller, a timer
//   running -> runnable     yield, preemption at a safe point
//   running -> syscall      enter_syscall; syscall -> running in exit_syscall
//   running -> dead         the G's function returned (g_main); its M frees it
enum class GStatus : std::uint32_t {
  // On a run queue (a P's ring or runnext, or the global queue), not on any CPU. The
  // queue owns it: whoever takes it from there runs it.
  runnable,
  // Executing on g->m, whose curg it is. Its stack is in use; nobody else touches it.
  running,
  // Parked. Exactly one party holds a reference that will ready it (a wait queue of a
  // channel or lock, a poll descriptor's slot, a timer); its stack is not in use.
  waiting,
  // Inside goro::blocking on g->m, which has given its P up (the P is in syscall state,
  // or handed off). Its stack is in use.
  syscall,
  // Not running user code: on a free list (with its stack), or not started yet.
  dead,
  // Waiting, and a goroutine dump is reading its stack (debug.hpp): whoever would make
  // it runnable waits until the dump puts it back to waiting (leave_waiting).
  scanning,
};

// M::preempt_detached.
inline constexpr int kDetached = 1;
inline constexpr int kDetachPending = 2;

// Where an M's thread is (M::where). outside -> inside is the thread's own CAS as it
// comes back (return_inside); outside -> abandoned is run_main's, as it returns without
// the thread.
enum class MWhere : std::uint8_t { inside, outside, abandoned };

// A P's state.
enum class PStatus : std::uint32_t {
  // On sched.pidle; no M. Whoever takes it from there (pidleget, under sched.lock)
  // owns it.
  idle,
  // Owned by p->m, which runs its Gs. Only that M touches the P's owner-only fields.
  running,
  // Its M is in a blocking call (enter_syscall) or was detached by the preemption
  // signal. The M gets it back by CAS syscall -> running (exit_syscall); sysmon may
  // take it instead by CAS syscall -> idle and hand it off (handoffp).
  syscall,
};

// What the scheduler stack does after a goroutine switched to it.
enum class SwitchReason : std::uint8_t { park, yield, preempt, exit, syscall_no_p };

// The C++ runtime's per-thread exception state (libsupc++'s __cxa_eh_globals): the
// stack of caught exceptions (for `throw;`) and std::uncaught_exceptions(). It belongs
// to the goroutine, not the thread: every switch saves the leaving context's and
// installs the entering one's (switch.hpp).
struct EhState {
  void* caught = nullptr;
  unsigned int uncaught = 0;
};

// A goroutine. It lives at the top of its own stack, so a G and its stack are one
// allocation, recycled together through the per-P and global free lists.
struct LocalSlots;
// Destroys g's goro::local values (on g, as it returns).
void local_release(G* g);

struct G {
  void* sp = nullptr;                // saved stack pointer while switched out
  std::atomic<std::uint64_t> id{0};  // atomic: sysmon may read a G being reused
  std::atomic<GStatus> status{GStatus::dead};
  M* m = nullptr;     // the M running it (valid while running)
  G* link = nullptr;  // netpoll's ready list
  Stack stack;
  void (*entry)(void*) = nullptr;
  void* closure = nullptr;
  WaitReason wait_reason = WaitReason::none;
  std::uint32_t in_runtime = 0;      // RuntimeScope depth: non-zero = not preemptible
  // Open goro::ThreadLocal scopes (thread_local.cpp): non-zero = the G holds this
  // thread's state and must not enter the runtime, let alone park.
  std::uint32_t thread_local_scopes = 0;
  std::atomic<bool> preempt{false};  // sysmon's request to yield at the next safe point
  int saved_errno = 0;
  EhState eh;
  std::size_t allg_index = 0;       // position in the runtime's list of all Gs
  // For goroutine dumps: who started it and where, and since when and on what it waits
  // (wait_since: CLOCK_MONOTONIC_COARSE at the last park; wait_fd: the descriptor of an
  // IO wait). Written by the G itself (or new_g) before it is published.
  std::uint64_t parent_id = 0;
  void* creator_pc = nullptr;
  std::int64_t wait_since = 0;
  int wait_fd = -1;
  const char* low_water = nullptr;  // lowest sp seen at a switch (stack.hpp)
  LocalSlots* locals = nullptr;     // goro::local values (local.cpp), the G's own
  // lock_os_thread: the M this G is wired to (nullptr: any), and the lock's nesting
  // depth. Written by the G itself while it runs; read by the M that takes it from a
  // run queue.
  M* lockedm = nullptr;
  std::uint32_t lock_depth = 0;
  char name[32] = {};
#if defined(GORO_ASAN)
  void* asan_fake_stack = nullptr;
#endif
#if defined(GORO_TSAN)
  void* tsan_fiber = nullptr;
#endif
};

// Ends the process when g holds a goro::ThreadLocal scope: what (park, yield, a runtime
// call, a blocking call) could move it to another thread (thread_local.cpp).
void check_no_thread_local_scope(const G* g, const char* what);

// waiting -> to, for whoever makes a parked G runnable (or resumes it when its park
// commit failed): waits out a goroutine dump that is reading its stack (scanning).
// Returns false when g was in neither state.
inline bool leave_waiting(G* g, GStatus to) noexcept {
  for (;;) {
    GStatus expected = GStatus::waiting;
    if (g->status.compare_exchange_weak(expected, to, std::memory_order_seq_cst)) return true;
    if (expected == GStatus::waiting) continue;  // a spurious failure
    if (expected != GStatus::scanning) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }
}

// An OS thread. Its fields are its own thread's, except where marked.
struct M {
  int id = 0;
  pthread_t thread{};
  int tid = 0;  // the kernel's id of the thread (setup_thread)
  std::atomic<G*> curg{nullptr};  // running goroutine, nullptr on g0 (read by sysmon)
  P* p = nullptr;                 // attached P
  P* nextp = nullptr;             // P handed over by startm (set before its wakeup)
  P* oldp = nullptr;              // P left in syscall state by enter_syscall
  bool spinning = false;          // looking for work (counted in nmspinning)
  Note park;                      // stopm sleeps here
  M* link = nullptr;              // idle M list (sched.lock)
  std::uint64_t rand_state = 0;
  void* g0_sp = nullptr;  // g0's saved stack pointer while a G runs
  EhState g0_eh;          // g0's exception state while a G runs
  // This thread's errno and C++ exception state, looked up once (setup_thread): a
  // switch saves and restores them through these pointers, with no call.
  int* errno_slot = nullptr;
  EhState* eh_slot = nullptr;
  // What the G that just switched to g0 wants done (see SwitchReason).
  SwitchReason switch_reason = SwitchReason::park;
  ParkCommit park_commit = nullptr;
  void* park_arg = nullptr;
  // A G that yielded or parked by switching straight to another G (the fast paths of
  // yield and park); whoever resumes on this M finishes the job — queues it, or runs
  // its park commit — once its stack is no longer in use.
  G* yielded = nullptr;
  G* parked = nullptr;
  // kDetached: the P was left in syscall state for sysmon to hand off, by the preemption
  // signal handler on this thread or by sysmon itself for a thread blocked in the
  // kernel; the G must reacquire a P at its next safe point. kDetachPending: one of
  // them has claimed the detach and is deciding (sysmon: detach_blocked), and the
  // thread, at its safe point, waits for the outcome. Lock-free, so async-signal safe.
  std::atomic<int> preempt_detached{0};
  // Set with preempt_detached when the handler also lowered this thread's priority
  // (hog_priority_lower): the nice value to restore, as the kernel reports it (20 -
  // nice), 0 when it was not lowered. Atomic: run_main's shutdown restores it from its
  // own thread (hog_priority_restore). Lock-free, so async-signal safe.
  std::atomic<int> hog_saved_prio{0};
  std::atomic<bool> exited{false};  // read by run_main's shutdown
  // The goroutine wired to this M by lock_os_thread: while it is set, this M runs no
  // other goroutine; when that one is not running, it waits, without a P, for the M
  // that finds it runnable to hand over a P (start_locked_m, stop_locked_m).
  G* lockedg = nullptr;
  // Where this thread is, for run_main's shutdown (startup.cpp): inside the runtime or
  // holding a P; outside, in user code with no P (a blocking call, or a hog the
  // preemption signal detached); or abandoned by a run that returned without it.
  std::atomic<MWhere> where{MWhere::inside};
  // Set by stopm when this M, idle for sched.idle_m_timeout, left the idle list to exit;
  // retired once its thread is detached and gone (sched.lock): its M is then reused.
  bool retiring = false;
  bool retired = false;
  void* sigstack = nullptr;
  const char* g0_stack_lo = nullptr;  // for ASan's fiber annotations
  std::size_t g0_stack_size = 0;
#if defined(GORO_ASAN)
  void* asan_fake_stack = nullptr;
#endif
#if defined(GORO_TSAN)
  void* tsan_fiber = nullptr;
#endif
  void* trace_buffer = nullptr;
};

// A random number for m's scheduling decisions (no shared state).
inline std::uint32_t fastrand(M* m) { return next_random(m->rand_state); }

// Per-P timer heap (4-ary, by `when`), guarded by `lock`. timer0 mirrors the earliest
// deadline (0 = none) so other threads can look without the lock.
struct TimerHeap {
  Lock lock;
  std::vector<Timer*> heap;
  std::atomic<std::int64_t> timer0{0};
  // The timer whose fire() is running (lock to set, acquire to read), so that
  // timer_stop can wait for it; and whether some M is running this heap's timers.
  std::atomic<Timer*> running_timer{nullptr};
  bool running = false;  // (lock) one M runs a heap's timers at a time
};

// Counters the tests read to show a mechanism happening. Relaxed: they are statistics.
struct PStats {
  std::atomic<std::uint64_t> runnext_runs{0};     // Gs run from runnext
  std::atomic<std::uint64_t> global_fair{0};      // 1-in-61 global checks that found a G
  std::atomic<std::uint64_t> global_batches{0};   // batch takes from the global queue
  std::atomic<std::uint64_t> global_batch_gs{0};  // Gs moved by those batches
  std::atomic<std::uint64_t> overflows{0};        // ring full: half moved to global
  std::atomic<std::uint64_t> steals{0};           // successful steals by this P
  std::atomic<std::uint64_t> stolen_gs{0};        // Gs taken by those steals
  std::atomic<std::uint64_t> runs{0};             // Gs executed on this P
};

// Increments a statistic that only the P's owner writes: a plain load and store, no
// locked instruction on the hot path (readers may see a slightly old value).
inline void bump(std::atomic<std::uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// A processor: the right to run Gs, with its local run queue. Fields marked (owner)
// are touched only by the M that holds the P.
struct P {
  int id = 0;
  std::atomic<PStatus> status{PStatus::idle};
  std::atomic<M*> m{nullptr};  // read by sysmon to preempt
  P* link = nullptr;           // idle P list (sched.lock)
  RunQueue runq;
  std::uint32_t schedtick = 0;                  // (owner) incremented at every schedule
  std::uint32_t switches = 0;                   // (owner) every direct switch, inheriting ones too
  std::atomic<std::uint32_t> schedtick_pub{0};  // schedtick, published for sysmon
  std::atomic<std::uint32_t> syscalltick{0};
  // Set by the preemption signal handler when it moved this P to syscall state:
  // sysmon hands such a P off at once instead of waiting a tick.
  std::atomic<bool> detached_by_signal{false};
  TimerHeap timers;
  G* gfree[64];  // (owner) dead Gs with default-size stacks
  int gfree_count = 0;
  std::uint64_t goid_next = 0, goid_end = 0;  // (owner) a batch of goroutine ids
  // sysmon's last observation of this P (sysmon only).
  std::uint32_t seen_schedtick = 0;
  std::int64_t seen_schedwhen = 0;
  std::int64_t seen_blockcheck = 0;  // when sysmon last looked whether its M is in the kernel
  std::uint32_t seen_syscalltick = 0;
  std::int64_t seen_syscallwhen = 0;
  PStats stats;
};

// A FIFO of G pointers in a growable ring. Used for the global run queue and the
// global free list instead of a list linked through the Gs: each G sits on its own
// stack page, so walking links costs a cache and TLB miss per G, while moving a batch
// of pointers touches none of them. Not thread-safe: its owner's lock guards it.
class GQueue {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  void push(G* g) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = g;
    size_++;
  }
  G* pop() {
    G* g = slots_[head_];
    head_ = (head_ + 1) & (slots_.size() - 1);
    size_--;
    return g;
  }
  G* pop_back() {
    size_--;
    return slots_[(head_ + size_) & (slots_.size() - 1)];
  }
  void clear() { head_ = size_ = 0; }

 private:
  [[gnu::noinline]] void grow() {
    std::vector<G*> bigger(slots_.empty() ? 256 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = slots_[(head_ + i) & (slots_.size() - 1)];
    slots_.swap(bigger);
    head_ = 0;
  }
  std::vector<G*> slots_;  // capacity: a power of two
  std::size_t head_ = 0, size_ = 0;
};

// Global scheduler state. `lock` guards the fields marked (lock); the atomics beside
// them can be read without it.
struct Sched {
  // Whether a goro::run is running (set and cleared by run_main; new_g checks it).
  std::atomic<bool> running{false};

  Lock lock;
  // Global run queue (lock); size also readable without the lock.
  GQueue runq;
  std::atomic<std::int32_t> runq_size{0};
  // Idle Ps (lock); npidle readable without the lock.
  P* pidle = nullptr;
  std::atomic<std::int32_t> npidle{0};
  // Idle Ms (lock).
  M* midle = nullptr;
  int nmidle = 0;
  std::atomic<std::int32_t> nmspinning{0};
  std::atomic<std::int32_t> nmsys{0};  // Ms inside a blocking call
  std::vector<M*> all_m;               // (lock) every M ever created
  std::vector<M*> m_retired;           // (lock) Ms whose thread exited idle, for reuse
  std::vector<M*> m_abandoned;         // Ms of threads a run returned without; kept
  std::atomic<int> mcount{0};          // Ms with a thread now
  int max_m = 10000;
  Note exit_note;                      // goro::run's thread waits here for the exit
  std::int64_t idle_m_timeout = 0;     // ns an idle M waits before it exits; 0: never

  int gomaxprocs = 0;
  std::vector<P*> all_p;
  std::size_t default_stack = 256 * 1024;
  // Numbers coprime with gomaxprocs: the strides of random victim orders (stealing).
  std::vector<std::uint32_t> coprimes;

  // Global free Gs with default-size stacks (gfree_lock).
  Lock gfree_lock;
  GQueue gfree;
  std::atomic<int> gfree_count{0};  // also read without the lock, as a hint

  std::atomic<std::uint64_t> goid_gen{0};
  std::atomic<std::int64_t> live_gs{0};  // started and not yet exited (num_goroutine)
  std::atomic<std::int64_t> lastpoll{0};    // 0 while an M is blocked in the netpoller
  std::atomic<std::int64_t> poll_until{0};  // when that blocked poll wakes up by itself

  // sysmon sleeps for good while everything is idle (written under lock; enter_syscall
  // also reads it without, to skip the lock when sysmon is awake).
  std::atomic<bool> sysmon_wait{false};
  Note sysmon_note;
  std::atomic<std::int64_t> sysmon_delay{0};  // how long sysmon sleeps now (ns)
  std::atomic<bool> sysmon_kick{false};       // watch again from the shortest delay
  // Threads that may be using a G they found as some M's curg (sysmon's retake,
  // run_main's shutdown): a G lives at the top of its stack, and release_g waits for
  // none before it gives a dead G's stack back (CurgReaders).
  std::atomic<int> curg_readers{0};
  std::atomic<std::uint64_t> sysmon_wakeups{0};
  pthread_t sysmon_thread{};
  // The signal mask of the thread that called goro::run; every M takes it (Go's
  // initSigmask), whatever the thread that started the M had blocked.
  sigset_t initial_sigmask{};

  std::atomic<std::uint64_t> handoffs{0};
  std::atomic<std::uint64_t> preemptions{0};

  std::atomic<bool> exiting{false};
  int exit_code = 0;
  std::int64_t start_time = 0;
  std::int64_t schedtrace_ns = 0;
  // GORO_ASYNC_PREEMPT=0: sysmon asks a hog to yield at its next safe point but sends
  // no signal (Go's asyncpreemptoff), for tools that handle signals badly (valgrind).
  bool async_preempt = true;
};

extern Sched sched;

// A scope in which the calling thread may load some M's curg and use that G (not its
// own): release_g does not give a G's stack back while one is open. For threads that
// run no goroutine (sysmon, run_main's); seq_cst, paired with release_g's fence, so a
// G read as curg here is seen as read by the release that follows its clearing.
class CurgReaders {
 public:
  CurgReaders() noexcept { sched.curg_readers.fetch_add(1, std::memory_order_seq_cst); }
  ~CurgReaders() { sched.curg_readers.fetch_sub(1, std::memory_order_seq_cst); }
  CurgReaders(const CurgReaders&) = delete;
  CurgReaders& operator=(const CurgReaders&) = delete;
};

// The M of the calling thread. A goroutine can resume on another thread after any
// switch, and compilers treat the thread pointer as constant within a function, so a
// plain thread_local read could be served from a register loaded before the switch.
// On x86-64 an asm volatile load through %fs is re-executed every time; elsewhere a
// function the compiler cannot inline does the same.
#if defined(__x86_64__)
extern __attribute__((tls_model("initial-exec"))) thread_local M* tls_m asm("goro_tls_m");
inline M* this_m() noexcept {
  M* m;
  asm volatile("movq goro_tls_m@gottpoff(%%rip), %0\n\tmovq %%fs:(%0), %0" : "=r"(m) : : "memory");
  return m;
}
#else
extern __attribute__((tls_model("initial-exec"))) thread_local M* tls_m;
M* this_m() noexcept;
#endif

}  // namespace goro::detail
