// The runtime's internal interface for goro's own headers (channels, sync, net).
// Not for applications: nothing here is stable. Everything is in goro::detail.
//
// Parking protocol (as Go's gopark): a G that must wait first takes the lock guarding
// the wait queue, enqueues a waiter that points at itself, then calls park(commit, arg).
// park switches to the M's scheduler stack (g0) and only there calls commit(g, arg),
// which typically releases that lock. Wakers therefore can only see the G after it
// has left its stack; a waker calls ready(g). If commit returns false the G is resumed
// at once (the wait was cancelled before it was published).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace goro::detail {

struct G;  // a goroutine; opaque outside the runtime

// Monotonic clock in nanoseconds (CLOCK_MONOTONIC).
std::int64_t nanotime() noexcept;
// The same clock at a few ms resolution, cheaper (CLOCK_MONOTONIC_COARSE).
std::int64_t coarse_nanotime() noexcept;
// nanotime() + d, saturating: a duration too long to add (nanoseconds::max(), "forever")
// is a time that never comes, not one in the past.
inline std::int64_t nanotime_after(std::int64_t d) noexcept {
  const std::int64_t now = nanotime();
  return d > INT64_MAX - now ? INT64_MAX : now + d;
}

// The running goroutine, or nullptr on a scheduler stack / foreign thread.
G* current_g() noexcept;
std::uint64_t g_id(const G* g) noexcept;

// Gives the pages of the calling goroutine's stack below its current frame back to the
// kernel (madvise MADV_DONTNEED; they read as zero when touched again): for a goroutine
// about to wait long at a shallow point after deep work, an idle connection's. Returns
// the bytes released; 0 off a goroutine.
std::size_t release_unused_stack() noexcept;

// Why a G is parked (shown by the tracer and in tests).
enum class WaitReason : std::uint8_t {
  none,
  chan_send,
  chan_recv,
  select,
  select_no_cases,
  sleep,
  mutex,
  waitgroup,
  cond,
  once,
  io_read,
  io_write,
  syscall_exit,
  preempted,
  other
};

using ParkCommit = bool (*)(G* g, void* arg);

// Parks the calling G (see protocol above). Precondition: called on a goroutine.
// Returns once ready(g) has been called for it (or commit returned false).
void park(ParkCommit commit, void* arg, WaitReason reason);

// Makes a parked G runnable. Callable from any thread, with or without a P.
// Called from a goroutine, the G goes to this P's runnext slot (it inherits the time
// slice, so a ping-pong pair stays on one P).
void ready(G* g);

// Spawning (used by goro::go).
G* new_g(std::size_t stack_size, std::string_view name, std::size_t closure_size,
         std::size_t closure_align, void** closure_slot);
void start_g(G* g, void (*entry)(void* closure));

// Marks a stretch of runtime work inside a goroutine during which it must not be
// preempted: while any RuntimeScope is open on a G, the preemption signal leaves its P
// alone. Opening the outermost scope is a safe point: a pending preemption request is
// honoured there (the G may yield or move to another thread before the constructor
// returns). Hold one around any critical section that takes a runtime Lock.
class RuntimeScope {
 public:
  RuntimeScope() noexcept;
  ~RuntimeScope();
  RuntimeScope(const RuntimeScope&) = delete;
  RuntimeScope& operator=(const RuntimeScope&) = delete;

 private:
  G* g_;
  bool reenter_syscall_ = false;  // entered from inside goro::blocking (syscall.cpp)
};

// A small lock for runtime data structures: spins briefly, then sleeps on a futex.
// Critical sections are a few dozen instructions. A G holding one must be inside a
// RuntimeScope; the lock may be released on the scheduler stack by a park commit.
class Lock {
 public:
  void lock() noexcept {
    std::uint32_t expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed))
      lock_slow();
  }
  bool try_lock() noexcept {
    std::uint32_t expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) unlock_slow();
  }

 private:
  void lock_slow() noexcept;
  void unlock_slow() noexcept;
  std::atomic<std::uint32_t> state_{0};  // 0 free, 1 locked, 2 locked with sleepers
};

// A one-shot timer in the runtime's per-P timer heaps. `fire` runs on a scheduler
// thread (never on a goroutine stack), must not block, and typically calls ready().
// The Timer object must stay alive until fire has returned or timer_stop() returned.
struct Timer {
  std::int64_t when = 0;  // absolute nanotime()
  void (*fire)(Timer*) = nullptr;
  void* arg = nullptr;  // for fire's use
  // Runtime-owned state: the heap it was last added to and its index there (-1: not
  // armed), both guarded by that heap's lock.
  std::atomic<void*> heap{nullptr};
  std::int32_t index = -1;
};

// Arms t to fire at t->when (now or in the past fires at the next scheduling point).
// The timer must not be armed already. Anything that can fire and call ready(g) for a
// parking G must be armed in that G's park commit, never before it parks.
void timer_start(Timer* t);

// timer_start in two halves, for a caller that holds a lock while arming: timer_add
// arms t and returns the time to wake the netpoller for (0: nothing to do); the caller
// passes it to timer_wake once its locks are released (timer_wake(0) does nothing).
// Waking may start a thread, which is better not done under a lock.
std::int64_t timer_add(Timer* t);
void timer_wake(std::int64_t when);

// Disarms t. Returns true if it was removed before firing; false if it already fired
// (in that case fire has returned by the time timer_stop returns).
bool timer_stop(Timer* t);

// What the calls made at one goro::blocking call site have shown (one per callable type):
// whether they last long enough that its P is better handed off at once. Set when the
// monitor had to take a call's P; cleared when a call handed off at once was short.
struct BlockingSite {
  std::atomic<bool> hand_off{false};
};

// The syscall protocol behind goro::blocking / blocking_long.
class SyscallScope {
 public:
  explicit SyscallScope(bool hand_off_now) noexcept;
  // For goro::blocking: hands off at once when the site's calls have lately lasted long.
  explicit SyscallScope(BlockingSite* site) noexcept;
  ~SyscallScope();
  SyscallScope(const SyscallScope&) = delete;
  SyscallScope& operator=(const SyscallScope&) = delete;

 private:
  void enter(bool hand_off_now) noexcept;

  bool active_ = false;
  BlockingSite* site_ = nullptr;
  std::int64_t start_ = 0;  // when a call handed off at once began (0: not handed off)
};

}  // namespace goro::detail
