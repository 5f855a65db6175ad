// The CPU profile (profile.hpp): SIGPROF at 100 Hz, the interrupted stack of each
// signal into a preallocated buffer, drained by the profiling goroutine.
//
// The timers: one per thread, timer_create on the thread's CPU-time clock with
// SIGEV_THREAD_ID, as Go does since 1.18, for every thread of the process (Ms and any
// other), listed from /proc/self/task at the start and again at every drain, so a
// thread that starts during the profile is sampled from within 100 ms. Not the simpler
// setitimer(ITIMER_PROF): its one process-wide timer fires at most once per kernel tick
// check and its signal is pending at most once, so once more than a couple of cores are
// busy the profile undercounts (why Go moved to per-thread timers in 1.18), and its
// signal goes to any thread that does not block SIGPROF, not always the one that used
// the CPU. What per-thread timers cost: a thread that starts and ends between two
// drains is not seen, a thread that blocks SIGPROF is not sampled, and a kernel timer
// per thread (a few dozen in a server).
//
// The handler is async-signal-safe: it takes no lock of ours and allocates nothing. It
// claims a free slot of the buffer by CAS, writes the stack into it and marks it full;
// the goroutine copies full slots out every 100 ms and frees them. With no free slot
// (the drain fell far behind) the sample is counted as lost, and the profile shows
// the count as a frame of its own.
//
// The stack is walked by libunwind (loaded with dlopen as goroutine dumps load it,
// scheduler/src/dump.cpp) from the signal's context: unw_init_local2 with
// UNW_INIT_SIGNAL_FRAME and unw_step. Not unw_backtrace: its fast path keeps a cache per
// thread in __thread storage of the dlopen'd library, and the first touch of such
// storage on a thread allocates in glibc's __tls_get_addr. libunwind's own caches lock
// with every signal blocked, so a handler never interrupts its own thread holding one;
// its search for unwind tables goes through dl_iterate_phdr, whose lock is recursive.
// The one hazard left, as in gperftools: a sample that interrupts dlopen or dlclose on
// its own thread reads the loader's list of modules while it changes. The first walk,
// which runs libunwind's one-time initialisation, is made by the profiling goroutine
// before the timers start. Without libunwind (or off x86-64) a sample is the interrupted
// instruction alone, and so under TSan (below).
//
// Where the handler runs: every M has a 64 KiB alternate signal stack and the handler
// is installed with SA_ONSTACK, so a sample never grows a goroutine's stack (a walk's
// cursor and unwind state take a few KiB). A thread of the program's own without an alternate stack
// runs the handler on its own stack, as it would any signal handler. SIGURG (preemption) may arrive
// inside it: that handler does not switch stacks, so it returns into this one.

#include <dirent.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <goro/scheduler/runtime.hpp>

#include "profile.hpp"

// Under TSan a sample is its innermost frame only: TSan runs a handler for an
// asynchronous signal later, at the thread's next interception point, with a copy of
// the context the signal interrupted, whose stack has been written over since; walking
// it would read garbage. The copied instruction pointer is still where the CPU was.
#if defined(GORO_HAVE_LIBUNWIND) && defined(__x86_64__) && !defined(GORO_TSAN)
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#define GORO_PROFILE_UNWIND 1
#endif

namespace goro::http::debug::pprof {
namespace {

constexpr std::chrono::nanoseconds kSamplePeriod = std::chrono::milliseconds(10);
constexpr std::chrono::nanoseconds kDrainEvery = std::chrono::milliseconds(100);
constexpr int kMaxFrames = 64;
// 100 Hz for each busy thread, drained every 100 ms: room for a thousand busy threads.
constexpr std::size_t kSlots = 1024;
// How many slots a handler tries before it counts its sample as lost.
constexpr std::size_t kClaimTries = 8;

enum SlotState : int { kFree = 0, kWriting = 1, kFull = 2 };

// Contract: a handler writes depth and pcs only between its CAS free→writing and its
// release store of full; the drain reads them only after an acquire load of full, and
// hands the slot back with a release store of free.
struct Slot {
  std::atomic<int> state{kFree};
  int depth = 0;
  std::uintptr_t pcs[kMaxFrames];
};

struct SampleBuffer {
  Slot slots[kSlots];
  std::atomic<std::size_t> next{0};  // where the next claim starts looking; relaxed
};
static_assert(std::atomic<int>::is_always_lock_free &&
                  std::atomic<std::size_t>::is_always_lock_free &&
                  std::atomic<SampleBuffer*>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

// The buffer handlers write into while a profile runs, else nullptr. Handlers and the
// profiler use seq_cst on it and on handlers_running: a handler counts itself in, then
// reads it; the profiler clears it, then waits for the count to be zero, after which no
// handler can still write into the buffer (one that counts itself in later reads null).
std::atomic<SampleBuffer*> active_buffer{nullptr};
std::atomic<int> handlers_running{0};
std::atomic<std::uint64_t> lost_samples{0};
// One profile at a time in the process.
std::atomic<bool> profiling{false};

#if GORO_PROFILE_UNWIND
struct Unwinder {
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int) = nullptr;
  int (*step)(unw_cursor_t*) = nullptr;
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*) = nullptr;
  bool ok = false;
};

// Set by the profiler before the first timer starts, read by handlers: libunwind's
// entry points, or ok false.
Unwinder unwinder;

void load_unwinder() {
  static const bool loaded = [] {
    void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) h = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return false;
    unwinder.init_local2 =
        reinterpret_cast<decltype(unwinder.init_local2)>(dlsym(h, "_ULx86_64_init_local2"));
    unwinder.step = reinterpret_cast<decltype(unwinder.step)>(dlsym(h, "_ULx86_64_step"));
    unwinder.get_reg = reinterpret_cast<decltype(unwinder.get_reg)>(dlsym(h, "_ULx86_64_get_reg"));
    unwinder.ok = unwinder.init_local2 && unwinder.step && unwinder.get_reg;
    if (!unwinder.ok) return false;
    // libunwind initialises itself on its first walk: here, not in a handler.
    ucontext_t here;
    getcontext(&here);  // unw_context_t is ucontext_t on x86-64
    unw_cursor_t cursor;
    if (unwinder.init_local2(&cursor, &here, 0) == 0) {
      for (int i = 0; i < kMaxFrames && unwinder.step(&cursor) > 0; ++i) {
      }
    }
    return true;
  }();
  (void)loaded;
}
#else
void load_unwinder() {}
#endif

std::uintptr_t interrupted_pc(const ucontext_t* uc) {
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#endif
}

Slot* claim_slot(SampleBuffer& buffer) {
  const std::size_t first = buffer.next.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < kClaimTries; ++i) {
    Slot& slot = buffer.slots[(first + i) % kSlots];
    int expected = kFree;
    // acquire: pairs with the drain's release of free, so its reads are done.
    if (slot.state.compare_exchange_strong(expected, kWriting, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
      return &slot;
    }
  }
  return nullptr;
}

// The entry points of the other signals' handlers (SIGURG's, the program's), noted by
// the profiler before the timers start, read by handlers.
//
// Why: when SIGURG and SIGPROF are both pending, the kernel sets up SIGURG's frame
// first (the lower number) and then SIGPROF's over it, so the sample finds the thread
// at the first instruction of the preemption handler, which has not run yet. Half the
// samples of a switch-heavy load were there. Such a sample is the interrupted code's:
// the handler's entry and the sigreturn trampoline under it are dropped.
constexpr int kMaxHandlers = 64;
std::uintptr_t handler_entries[kMaxHandlers];
int handler_count = 0;

void note_handler_entries() {
  handler_count = 0;
  for (int sig = 1; sig < NSIG && handler_count < kMaxHandlers; ++sig) {
    struct sigaction current {};
    if (sig == SIGPROF || sigaction(sig, nullptr, &current) != 0) continue;
    const auto entry = (current.sa_flags & SA_SIGINFO) != 0
                           ? reinterpret_cast<std::uintptr_t>(current.sa_sigaction)
                           : reinterpret_cast<std::uintptr_t>(current.sa_handler);
    if (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN) continue;
    handler_entries[handler_count++] = entry;
  }
}

bool is_handler_entry(std::uintptr_t pc) {
  for (int i = 0; i < handler_count; ++i) {
    if (handler_entries[i] == pc) return true;
  }
  return false;
}

void record_sample(SampleBuffer& buffer, ucontext_t* uc) {
  Slot* slot = claim_slot(buffer);
  if (slot == nullptr) {
    lost_samples.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  int depth = 0;
#if GORO_PROFILE_UNWIND
  if (unwinder.ok) {
    unw_cursor_t cursor;
    if (unwinder.init_local2(&cursor, uc, UNW_INIT_SIGNAL_FRAME) == 0) {
      do {
        unw_word_t ip = 0;
        if (unwinder.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
        slot->pcs[depth++] = static_cast<std::uintptr_t>(ip);
      } while (depth < kMaxFrames && unwinder.step(&cursor) > 0);
    }
  }
#endif
  if (depth == 0) slot->pcs[depth++] = interrupted_pc(uc);
  if (depth > 2 && is_handler_entry(slot->pcs[0])) {
    for (int i = 2; i < depth; ++i) slot->pcs[i - 2] = slot->pcs[i];
    depth -= 2;
  }
  slot->depth = depth;
  slot->state.store(kFull, std::memory_order_release);
}

void on_sigprof(int, siginfo_t*, void* context) {
  const int saved_errno = errno;
  handlers_running.fetch_add(1, std::memory_order_seq_cst);
  if (SampleBuffer* buffer = active_buffer.load(std::memory_order_seq_cst)) {
    record_sample(*buffer, static_cast<ucontext_t*>(context));
  }
  handlers_running.fetch_sub(1, std::memory_order_seq_cst);
  errno = saved_errno;
}

// Allocated by the first profile and kept: 0.5 MiB, touched only while profiling.
SampleBuffer& sample_buffer() {
  static SampleBuffer* buffer = new SampleBuffer;
  return *buffer;
}

using StackCounts = std::map<std::vector<std::uintptr_t>, std::int64_t>;

void drain(SampleBuffer& buffer, StackCounts& counts) {
  for (Slot& slot : buffer.slots) {
    if (slot.state.load(std::memory_order_acquire) != kFull) continue;
    std::vector<std::uintptr_t> stack(slot.pcs, slot.pcs + slot.depth);
    slot.state.store(kFree, std::memory_order_release);
    ++counts[std::move(stack)];
  }
}

// The kernel's clock for the CPU time of thread tid (CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED
// below the inverted id), what pthread_getcpuclockid gives for a pthread_t: here from
// a tid, which every thread of the process has, the program's own included.
clockid_t thread_cpu_clock(pid_t tid) {
  return static_cast<clockid_t>(~static_cast<unsigned>(tid) << 3 | 6u);
}

// A CPU-time timer for each thread of the process, each sending SIGPROF to its own
// thread every period of that thread's CPU time. Used by the profiling goroutine only.
class ThreadTimers {
 public:
  explicit ThreadTimers(std::chrono::nanoseconds period) : period_(period) {}
  ThreadTimers(const ThreadTimers&) = delete;
  ThreadTimers& operator=(const ThreadTimers&) = delete;
  ~ThreadTimers() {
    for (const auto& [tid, timer] : timers_) timer_delete(timer);
  }

  // Arms a timer for each thread listed in /proc/self/task that has none yet. A thread
  // that ends between the listing and its timer is skipped.
  void arm_new_threads() {
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) {
      if (error_.empty()) error_ = std::string("/proc/self/task: ") + std::strerror(errno);
      return;
    }
    while (const dirent* entry = readdir(dir)) {
      char* end = nullptr;
      const long tid = std::strtol(entry->d_name, &end, 10);
      if (*end != '\0' || tid <= 0 || timers_.contains(static_cast<pid_t>(tid))) continue;
      sigevent event{};
      event.sigev_notify = SIGEV_THREAD_ID;
      event.sigev_signo = SIGPROF;
      event._sigev_un._tid = static_cast<pid_t>(tid);  // sigev_notify_thread_id
      timer_t timer{};
      if (timer_create(thread_cpu_clock(static_cast<pid_t>(tid)), &event, &timer) != 0) {
        if (error_.empty()) error_ = std::string("timer_create: ") + std::strerror(errno);
        continue;
      }
      itimerspec every{};
      every.it_interval.tv_nsec = static_cast<long>(period_.count());
      every.it_value = every.it_interval;
      timer_settime(timer, 0, &every, nullptr);
      timers_.emplace(static_cast<pid_t>(tid), timer);
    }
    closedir(dir);
  }

  bool any() const { return !timers_.empty(); }
  // Why the first timer that could not be armed was not.
  const std::string& error() const { return error_; }

 private:
  std::chrono::nanoseconds period_;
  std::unordered_map<pid_t, timer_t> timers_;
  std::string error_;
};

bool prof_timer_armed() {
  itimerval current{};
  return getitimer(ITIMER_PROF, &current) == 0 &&
         (current.it_value.tv_sec != 0 || current.it_value.tv_usec != 0);
}

}  // namespace

CpuProfileResult profile_cpu(std::chrono::nanoseconds window) {
  CpuProfileResult result;
  bool idle = false;
  if (!profiling.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
    result.busy = true;
    result.error =
        "cpu profiling already in use: one CPU profile at a time, try again when it ends";
    return result;
  }
  struct Done {
    ~Done() { profiling.store(false, std::memory_order_release); }
  } done;
  if (prof_timer_armed()) {
    result.busy = true;
    result.error =
        "cpu profiling already in use: ITIMER_PROF is armed by another profiler "
        "in this process";
    return result;
  }

  load_unwinder();
  note_handler_entries();
  SampleBuffer& buffer = sample_buffer();
  for (Slot& slot : buffer.slots) slot.state.store(kFree, std::memory_order_relaxed);
  lost_samples.store(0, std::memory_order_relaxed);
  active_buffer.store(&buffer, std::memory_order_seq_cst);

  struct sigaction handler {};
  handler.sa_sigaction = on_sigprof;
  handler.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&handler.sa_mask);
  struct sigaction previous {};
  sigaction(SIGPROF, &handler, &previous);

  const auto wall_start = std::chrono::system_clock::now();
  const auto start = std::chrono::steady_clock::now();
  StackCounts counts;
  bool started = false;
  std::string start_error;
  {
    ThreadTimers timers(kSamplePeriod);
    timers.arm_new_threads();
    started = timers.any();
    start_error = timers.error();
    const auto deadline = start + window;
    for (auto now = start; started && now < deadline; now = std::chrono::steady_clock::now()) {
      goro::sleep(std::min<std::chrono::nanoseconds>(kDrainEvery, deadline - now));
      drain(buffer, counts);
      timers.arm_new_threads();
    }
  }  // every timer is deleted here
  const auto elapsed = std::chrono::steady_clock::now() - start;
  active_buffer.store(nullptr, std::memory_order_seq_cst);
  // A SIGPROF raised before its timer was deleted and not yet taken (its thread blocks
  // it) would meet the previous disposition, and SIG_DFL ends the
  // process: setting SIG_IGN discards pending ones first.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPROF, &ignore, nullptr);
  sigaction(SIGPROF, &previous, nullptr);
  // A handler that began before the buffer was cleared may still be writing; a walk
  // takes microseconds, so 100 ms is ample.
  for (int i = 0; i < 100 && handlers_running.load(std::memory_order_seq_cst) != 0; ++i) {
    goro::sleep(std::chrono::milliseconds(1));
  }
  drain(buffer, counts);

  if (!started) {
    result.error = start_error.empty() ? "no thread's CPU clock could be timed" : start_error;
    return result;
  }
  Profile& p = result.profile;
  p.sample_types = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  p.period_type = {"cpu", "nanoseconds"};
  p.period = kSamplePeriod.count();
  p.time_nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall_start.time_since_epoch()).count();
  p.duration_nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
  for (const auto& [stack, count] : counts) {
    Sample s;
    s.addresses = stack;
    // Callers' frames are return addresses: the call is the instruction before.
    for (std::size_t i = 1; i < s.addresses.size(); ++i) --s.addresses[i];
    s.values = {count, count * p.period};
    p.samples.push_back(std::move(s));
  }
  if (const auto lost = static_cast<std::int64_t>(lost_samples.load(std::memory_order_relaxed));
      lost > 0) {
    p.samples.push_back({{}, {lost, lost * p.period}, "goro_profile_lost_samples"});
  }
  return result;
}

}  // namespace goro::http::debug::pprof
