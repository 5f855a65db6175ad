// goro runtime: boot the scheduler, start goroutines, yield, sleep, run blocking calls.
//
// A goroutine ("G") is a function with its own small stack, run by the M:N scheduler
// described in docs/design.md and at the top of scheduler/src/schedule.cpp. Every blocking
// operation offered by goro (channels, Mutex, sleep, network I/O) parks the G, never the OS thread.
//
// Thread-local hazards: a G may resume on a different OS thread after any goro call
// that can block, so `thread_local` variables are per-thread, not per-goroutine, and a
// std::mutex must not be held across a goro call that can block (use goro::Mutex).
// errno and the C++ exception state (std::uncaught_exceptions, `throw;`) are saved with
// the goroutine across every switch. One caveat for errno: glibc declares its accessor
// const, so inside one function the compiler may keep errno's address from before a
// goro call; read errno right after the call that set it, not across a goro call.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

#include <goro/scheduler/detail/runtime.hpp>

namespace goro {

// How the runtime is set up. Every field has a safe default.
struct Config {
  // Number of Ps (processors). 0: GORO_MAXPROCS from the environment, else the CPUs of
  // the process's affinity mask, lowered to its cgroup's CPU limit (v1 or v2, the
  // tightest of its cgroup and those above it, rounded up, at least 1).
  int maxprocs = 0;
  // Virtual size of a goroutine stack when go() is not given one. Stacks are
  // committed lazily: a G costs the pages it touched.
  std::size_t stack_size = 256 * 1024;
  // Most OS threads the runtime may have at once (Go's debug.SetMaxThreads, 10,000):
  // past it, a blocking call that needs another thread ends the process with a fatal
  // error naming the limit. Threads are made for goroutines inside blocking calls.
  int max_threads = 10000;
  // A thread idle this long, while more than GOMAXPROCS threads are idle, exits: a
  // burst of blocking calls does not keep its threads forever. Zero: threads stay.
  std::chrono::nanoseconds idle_thread_timeout = std::chrono::seconds(60);
};

namespace detail {
int run_main(std::function<int()> main_fn, Config config);
}

// Boots the scheduler, runs main_fn as the main goroutine and returns when it returns,
// like Go's main: the other goroutines are abandoned, whatever they are doing. Those
// parked have their stacks released without unwinding. One still running user code (a
// loop) or inside goro::blocking keeps its thread and stack: that thread goes on with
// the code it is in and stops for good at its next call into the runtime (the loop's
// end, the blocking call's return), while run returns at once. To wait for goroutines,
// main waits for them (a WaitGroup), as in Go. main_fn runs on a thread the runtime
// starts; the calling thread waits for the end of the run. The value main_fn returns
// (0 for a void function) is the result. Only one run() at a time per process; run()
// may be called again after it returns.
template <class F>
int run(F&& main_fn, Config config = {}) {
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    return detail::run_main(
        [fn = std::forward<F>(main_fn)]() mutable {
          fn();
          return 0;
        },
        config);
  } else {
    return detail::run_main(std::function<int()>(std::forward<F>(main_fn)), config);
  }
}

// Options for one go() call.
struct GoOptions {
  std::size_t stack_size = 0;  // 0: Config::stack_size
  std::string_view name = {};  // shown in traces; copied (up to 31 bytes)
};

// Starts fn as a new goroutine. Never blocks. The callable is moved onto the new
// goroutine's stack, so spawning allocates nothing besides a (usually cached) stack.
// An exception escaping fn prints "goroutine N: uncaught exception: <what>" and
// aborts the process, like a Go panic.
// (Always inlined, so that the runtime records the caller as the goroutine's creator.)
template <class F>
[[gnu::always_inline]] inline void go(GoOptions options, F&& fn) {
  using Fn = std::decay_t<F>;
  static_assert(std::is_invocable_v<Fn&>, "goro::go needs a callable taking no arguments");
  void* slot = nullptr;
  detail::G* g = detail::new_g(options.stack_size, options.name, sizeof(Fn), alignof(Fn), &slot);
  ::new (slot) Fn(std::forward<F>(fn));
  detail::start_g(g, [](void* p) {
    Fn* f = static_cast<Fn*>(p);
    (*f)();
    f->~Fn();
  });
}
template <class F>
[[gnu::always_inline]] inline void go(F&& fn) {
  go(GoOptions{}, std::forward<F>(fn));
}

// Lets other goroutines run: the caller goes to the tail of its P's local run queue
// (Go's Gosched puts it on the global queue; see docs/design.md) and runs again after
// the goroutines queued before it.
void yield();

// Parks the calling goroutine for at least d (a timer; no thread sleeps).
void sleep(std::chrono::nanoseconds d);

// Wires the calling goroutine to the thread it runs on (Go's runtime.LockOSThread):
// until as many unlock_os_thread() calls, it runs only on this thread, across every
// park, yield and blocking call, and the thread runs no other goroutine. For C
// libraries that keep state in thread-locals between calls, and for per-thread kernel
// state (setns, unshare, a thread's signal mask or priority). A goroutine that returns
// still wired ends its thread with it, since it may have changed the thread's state
// (as Go does). Each park or yield of a wired goroutine costs two thread wake-ups: its
// thread sleeps while it waits, and the thread that finds it runnable hands it a P.
// Calls nest; no-ops outside a goroutine.
void lock_os_thread();
void unlock_os_thread();

// lock_os_thread() for a scope.
class OsThreadLock {
 public:
  OsThreadLock() { lock_os_thread(); }
  ~OsThreadLock() { unlock_os_thread(); }
  OsThreadLock(const OsThreadLock&) = delete;
  OsThreadLock& operator=(const OsThreadLock&) = delete;
};

// Asks for memory the process holds unused to go back to the kernel about 50 ms from
// now (Go's debug.FreeOSMemory, deferred and rate-limited), for a caller that has just let
// much of it go: connections going idle, freeing their buffers and goroutines. Then the
// stacks of finished goroutines past 64 are released, and malloc's free memory is
// returned (malloc_trim: glibc gives back free memory from the middle of its heaps only
// when asked, walking every heap under its lock, so this runs at most four times a
// second, inside goro::blocking, on a goroutine of its own). Outside a run nothing happens.
void return_freed_memory_soon();

// Gives the pages of the calling goroutine's stack below its current frame back to the
// kernel (they read as zero when touched again): for a goroutine about to wait long at a
// shallow point after deep work, such as an idle connection's. Returns the bytes
// released; 0 off a goroutine.
std::size_t release_unused_stack() noexcept;

// Number of Ps the runtime was started with (GOMAXPROCS).
int maxprocs();

// Goroutines that exist now: started and not yet returned, the main one included
// (Go's runtime.NumGoroutine). Meaningful while goro::run runs.
int num_goroutine();

// The runtime's numbers now (what /metrics and /debug/goro/sched show). Each is read on
// its own, so they are a consistent picture only roughly; the goroutine states and the
// stack memory come from one pass over every goroutine, which costs about a microsecond
// per goroutine (a mincore(2) call each): read it once per scrape, not per request.
struct RuntimeStats {
  int procs = 0;       // Ps (GOMAXPROCS)
  int idle_procs = 0;  // Ps with nothing to run
  int goroutines = 0;  // alive: running + runnable + waiting + syscall
  int running = 0;     // on a thread now
  int runnable = 0;    // queued to run
  int waiting = 0;     // parked (channel, lock, sleep, network, ...)
  int syscall = 0;     // inside goro::blocking
  int threads = 0;     // OS threads (Ms) made, the monitor not included
  int idle_threads = 0;
  int spinning_threads = 0;  // looking for work
  int global_runqueue = 0;   // goroutines in the global run queue
  int local_runqueues = 0;   // in the Ps' own queues, all Ps
  int netpoll_waiters = 0;   // goroutines parked on a socket
  std::uint64_t goroutine_runs = 0;  // times a goroutine was switched to
  std::uint64_t steals = 0;          // successful steals between Ps
  std::uint64_t handoffs = 0;        // Ps handed to another thread
  std::uint64_t preemptions = 0;     // Ps taken by the preemption signal
  std::uint64_t sysmon_wakeups = 0;
  // Goroutine stacks, those of finished goroutines kept for reuse included: address
  // space mapped for them, and the part of it resident in memory (pages touched and not
  // yet given back).
  std::uint64_t stack_reserved_bytes = 0;
  std::uint64_t stack_committed_bytes = 0;
};
// All zero while no goro::run runs. Callable from any thread.
RuntimeStats stats();

// Id of the calling goroutine (1 is the main goroutine); 0 when not on a goroutine.
std::uint64_t goid();

// Runs fn, a call that may block in the kernel (file I/O, getaddrinfo, a C library),
// under the syscall protocol: the P stays with this thread for short calls, and the
// monitor thread hands it to another thread if the call lasts a whole tick, so the other
// goroutines of this P keep running. A call site whose calls have lasted that long hands
// its P off at once from then on, as blocking_long does, until one of them is short
// again (under 50 us): the other goroutines then do not wait for the monitor's tick.
// Returns fn's result; rethrows its exception.
template <class F>
decltype(auto) blocking(F&& fn) {
  static detail::BlockingSite site;  // one per call site: each lambda has its own type
  detail::SyscallScope scope(&site);
  return std::forward<F>(fn)();
}

// Like blocking(), for calls known to block long (waiting on a pipe, a lock held by
// another process): the P is handed off at once instead of after a tick.
template <class F>
decltype(auto) blocking_long(F&& fn) {
  detail::SyscallScope scope(true);
  return std::forward<F>(fn)();
}

}  // namespace goro
