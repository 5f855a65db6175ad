// The netpoller: one epoll instance for the whole process, an eventfd to break a
// blocking wait, and a PollDesc per registered descriptor.
//
// The contract between the netpoller and the scheduler (as Go's netpoll.go states its
// own). The netpoller owns no thread and runs no goroutine; the scheduler calls it:
//   netpoll_init / netpoll_shutdown   run_main, once per run.
//   netpoll(0)                        find_runnable (step 6), and sysmon when nobody has
//                                     polled for 10 ms: look without waiting.
//   netpoll(delay), delay != 0        find_runnable, by the one M that has nothing to
//                                     run: wait for an event, a break, or until the
//                                     earliest timer of any P (delay < 0: no timer).
//   netpoll_break                     anyone who needs that M awake: a new earliest
//                                     timer (wake_net_poller), a G queued while every P
//                                     is idle, shutdown.
// netpoll returns the Gs its events made runnable, linked through G::link and still
// marked waiting; the caller makes them runnable and queues them (inject_list): on its
// own P when it has one, else on the global queue, waking Ms for them. The netpoller
// itself calls ready() only for wake-ups that are not I/O events: a deadline timer
// firing and poll_evict.
//
// sched.lastpoll is 0 while an M is blocked in netpoll(delay) and otherwise the time of
// the last poll; exchanging it to 0 is how an M claims the blocking poll (one M at a
// time). sched.poll_until is when that blocked poll returns by itself (0: never), so
// that a timer adder knows whether a break is needed (wake_net_poller); it is set after
// lastpoll is claimed and cleared before lastpoll is restored. The break is an eventfd
// (level-triggered, at most one write pending): only a blocking poll consumes it, so a
// non-blocking poll cannot swallow the break meant for the M that is blocked.
// netpoll_anything_waiting says whether any G is parked on a PollDesc: with none and no
// timer, an idle M does not block in epoll at all but parks on its note.
//
// Registration: poll_open once per descriptor, edge-triggered for in, out, rdhup and
// pri (TCP urgent data stops a read short with data still queued, so the reader must
// not take a short read as proof that the queue is drained). Edges are kept in the
// slots below, so none is lost between two waits.
//
// A PollDesc's slot (rg for the reader, wg for the writer) holds kEmpty, kReady (an
// edge arrived that nobody consumed yet), kWait (a G is committing to wait), a G*, or,
// in rg only, kStart (no G waits: poll_start_on_read asked for a new one to start).
// Transitions, all by CAS:
//   waiter:  empty -> wait (before parking), wait -> G* (in the park commit, on g0);
//            ready -> empty (consumes a pending edge without parking);
//   starter: empty -> start;
//   notifier (epoll event, deadline, evict): wait/G*/start -> ready or empty, readying
//            the G, or making the G that kStart asked for (new_waiting_g) and readying
//            that, outside any lock.
// A notifier that replaces kWait makes the waiter's commit fail, so the G never parks.
// A slot in kStart counts as a waiter for netpoll_anything_waiting (an idle M blocks in
// epoll for it), not for netpoll_waiter_count, which counts goroutines.
// Deadlines are Timers. Moving a deadline later while its timer is pending for an
// earlier time leaves the timer alone (a server moves a connection's read deadline at
// every request): when it fires, it finds the deadline in force still ahead and arms
// itself again for that. A firing timer reads the deadline under the lock, so one armed
// for an older deadline that fires late does nothing but re-arm.
//
// PollDescs are recycled. An event that epoll_wait returned for a descriptor closed
// (and its PollDesc reused) before the event was looked at must not reach the new
// user: epoll's data word carries the PollDesc's address and, in the top 16 bits, the
// registration's sequence number, and netpoll drops events whose number is stale (as
// Go's taggedPointer and fdseq do).

#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/base/object_pool.hpp>

#include "goroutine.hpp"
#include "netpoll.hpp"
#include "timer.hpp"
#include "trace.hpp"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(GORO_ASAN)
#include <sanitizer/lsan_interface.h>
#endif

#if defined(GORO_TSAN)
extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}
#endif

namespace goro::detail {

namespace {
constexpr std::uintptr_t kEmpty = 0;
constexpr std::uintptr_t kReady = 1;
constexpr std::uintptr_t kWait = 2;
constexpr std::uintptr_t kStart = 3;
// What unblock returns for a kStart it cleared; start_or_g turns it into a new G.
G* const kStartTaken = reinterpret_cast<G*>(kStart);
}  // namespace

class PollDesc : public goro::Pooled {
 public:
  struct DeadlineTimer {
    Timer timer;
    PollDesc* pd = nullptr;
    IoMode mode = IoMode::read;
    // (lock) When the timer was last added for, until a fire finds nothing more to wait
    // for or the deadline is cleared: 0 when no fire is to come.
    std::int64_t armed = 0;
  };

  int fd = -1;
  Lock lock;  // guards the fields below `lock`
  std::atomic<std::uintptr_t> rg{kEmpty};
  std::atomic<std::uintptr_t> wg{kEmpty};
  std::atomic<bool> closing{false};
  std::atomic<bool> hangup{false};  // epoll reported rdhup, hup, err or pri
  std::atomic<bool> rd_expired{false};
  std::atomic<bool> wd_expired{false};
  // When a poll last returned the descriptor readable (nanotime; 0: never since
  // poll_open). Relaxed: a timestamp for whoever asks, ordered with nothing.
  std::atomic<std::int64_t> read_ready_at{0};
  // The G whose waits poll_interrupt interrupted, until poll_clear_interrupt.
  std::atomic<G*> r_interrupted{nullptr};
  std::atomic<G*> w_interrupted{nullptr};
  std::atomic<std::uint16_t> seq{0};  // bumped by poll_open and poll_close
  // Armed by poll_start_on_hangup until a hang-up, an evict or poll_cancel_start_on_hangup
  // takes it (whoever exchanges it to false); what it starts is written before it is
  // armed and read by the one party that takes it.
  std::atomic<bool> hangup_armed{false};
  void (*hangup_fn)(void*) = nullptr;
  void* hangup_arg = nullptr;
  std::size_t hangup_stack = 0;
  const char* hangup_name = "";
  // What a notifier that clears kStart starts: written before the slot becomes kStart,
  // read by the one party that clears it.
  void (*start_fn)(void*) = nullptr;
  void* start_arg = nullptr;
  std::size_t start_stack = 0;
  const char* start_name = "";
  std::int64_t rd = 0, wd = 0;  // deadlines in force, 0 = none
  DeadlineTimer rt, wt;
  PollDesc* link = nullptr;  // free list (cache_mu)
};

namespace {

int epfd = -1;
int breakfd = -1;
std::atomic<bool> break_pending{false};
std::atomic<std::int32_t> waiters{0};  // Gs parked (or parking) on a PollDesc
std::atomic<std::int32_t> start_slots{0};  // read slots in kStart (poll_start_on_read)
std::atomic<std::int32_t> hangup_starts{0};  // armed by poll_start_on_hangup
std::uint32_t runs = 0;                   // netpoll_init calls so far
std::atomic<std::uint32_t> generation{0};  // see poll_generation

std::mutex cache_mu;  // guards free_pds and all_pds
PollDesc* free_pds = nullptr;
std::vector<PollDesc*> all_pds;

std::atomic<std::uintptr_t>& slot(PollDesc* pd, IoMode mode) {
  return mode == IoMode::read ? pd->rg : pd->wg;
}

// epoll's data word for a registration: the address, below bit 48, and the sequence.
constexpr int kTagShift = 48;
constexpr std::uint64_t kAddrMask = (std::uint64_t{1} << kTagShift) - 1;

std::uint64_t tagged(PollDesc* pd, std::uint16_t seq) {
  return reinterpret_cast<std::uintptr_t>(pd) | (std::uint64_t{seq} << kTagShift);
}

// Clears a waiting slot; returns the G to ready, if one was parked there (kStartTaken
// for a kStart: see start_or_g). With io_ready, leaves kReady behind so a later wait
// does not miss this edge.
G* unblock(PollDesc* pd, IoMode mode, bool io_ready) {
  auto& s = slot(pd, mode);
  for (;;) {
    std::uintptr_t old = s.load(std::memory_order_acquire);
    if (old == kReady) return nullptr;
    if (old == kEmpty && !io_ready) return nullptr;
    std::uintptr_t next = io_ready ? kReady : kEmpty;
    if (s.compare_exchange_weak(old, next, std::memory_order_acq_rel)) {
      if (old == kWait || old == kEmpty) return nullptr;
      (old == kStart ? start_slots : waiters).fetch_sub(1, std::memory_order_relaxed);
      return reinterpret_cast<G*>(old);
    }
  }
}

// The G that unblock's result asks to ready: itself, or, for kStartTaken, a new
// goroutine for pd's start_fn. Called with no lock held (making a G may map a stack).
G* start_or_g(PollDesc* pd, G* g) {
  if (g != kStartTaken) return g;
  return new_waiting_g(pd->start_fn, pd->start_arg, pd->start_stack, pd->start_name);
}

bool wait_commit(G* g, void* arg) {
  auto* s = static_cast<std::atomic<std::uintptr_t>*>(arg);
  std::uintptr_t expected = kWait;
  bool ok = s->compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(g),
                                       std::memory_order_acq_rel);
  if (ok) waiters.fetch_add(1, std::memory_order_relaxed);
  return ok;
}

void deadline_fire(Timer* t) {
  auto* dt = reinterpret_cast<PollDesc::DeadlineTimer*>(t);
  PollDesc* pd = dt->pd;
  pd->lock.lock();
  const std::int64_t deadline = dt->mode == IoMode::read ? pd->rd : pd->wd;
  if (deadline == 0) {  // cleared since this timer was armed
    pd->lock.unlock();
    return;
  }
  if (deadline > nanotime()) {
    // Moved later since this timer was armed: arm it for the deadline in force. Stopped
    // first, in case poll_set_deadline added it again while this fire was pending.
    timer_stop_nowait(&dt->timer);
    dt->armed = deadline;
    dt->timer.when = deadline;
    const std::int64_t wake = timer_add(&dt->timer);
    pd->lock.unlock();
    timer_wake(wake);
    return;
  }
  dt->armed = 0;
  G* g = nullptr;
  if (dt->mode == IoMode::read) {
    pd->rd_expired.store(true, std::memory_order_release);
    g = unblock(pd, IoMode::read, false);
  } else {
    pd->wd_expired.store(true, std::memory_order_release);
    g = unblock(pd, IoMode::write, false);
  }
  pd->lock.unlock();
  if (g) ready(start_or_g(pd, g));
}

// Takes pd's armed hang-up start, if any: the G to ready for it, or nullptr. Called with
// no lock held (making a G may map a stack).
G* take_hangup_start(PollDesc* pd) {
  if (!pd->hangup_armed.exchange(false, std::memory_order_seq_cst)) return nullptr;
  hangup_starts.fetch_sub(1, std::memory_order_relaxed);
  return new_waiting_g(pd->hangup_fn, pd->hangup_arg, pd->hangup_stack, pd->hangup_name);
}

}  // namespace

void netpoll_init() {
  if (epfd >= 0) return;
  epfd = epoll_create1(EPOLL_CLOEXEC);
  breakfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd < 0 || breakfd < 0) {
    std::fprintf(stderr, "goro: fatal error: netpoll init: %s\n", std::strerror(errno));
    std::abort();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the eventfd
  epoll_ctl(epfd, EPOLL_CTL_ADD, breakfd, &ev);
  break_pending.store(false);
  waiters.store(0);
  start_slots.store(0);
  hangup_starts.store(0);
  if (++runs == 0) ++runs;
  generation.store(runs, std::memory_order_release);
}

void netpoll_shutdown() {
  generation.store(0, std::memory_order_release);
  if (epfd >= 0) close(epfd);
  if (breakfd >= 0) close(breakfd);
  epfd = breakfd = -1;
  std::lock_guard<std::mutex> guard(cache_mu);
  for (PollDesc* pd : all_pds) {
#if defined(GORO_ASAN)
    // Armed by poll_start_on_read: start_arg is what its owner left to be resumed (a
    // parked connection). Abandoned at exit as a parked goroutine is, and, like that
    // goroutine's stack, kept and scanned by LeakSanitizer so only real leaks show.
    if (pd->rg.load(std::memory_order_relaxed) == kStart ||
        pd->hangup_armed.load(std::memory_order_relaxed)) {
      __lsan_register_root_region(pd, sizeof *pd);
      continue;
    }
#endif
    delete pd;
  }
  all_pds.clear();
  free_pds = nullptr;
}

bool netpoll_inited() { return epfd >= 0; }

std::uint32_t poll_generation() noexcept { return generation.load(std::memory_order_acquire); }

bool netpoll_anything_waiting() {
  return waiters.load(std::memory_order_relaxed) > 0 ||
         start_slots.load(std::memory_order_relaxed) > 0 ||
         hangup_starts.load(std::memory_order_relaxed) > 0;
}

int netpoll_waiter_count() { return waiters.load(std::memory_order_relaxed); }

void netpoll_break() {
  if (breakfd < 0) return;
  bool expected = false;
  if (!break_pending.compare_exchange_strong(expected, true)) return;
  std::uint64_t one = 1;
  if (write(breakfd, &one, sizeof one) < 0 && errno != EAGAIN) {
    std::fprintf(stderr, "goro: fatal error: netpoll break: %s\n", std::strerror(errno));
    std::abort();
  }
}

G* netpoll(std::int64_t delay_ns, int* count) {
  *count = 0;
  if (epfd < 0) return nullptr;
  timespec ts{}, *tsp = nullptr;
  if (delay_ns >= 0) {
    ts.tv_sec = static_cast<time_t>(delay_ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(delay_ns % 1'000'000'000);
    tsp = &ts;
  }
  struct epoll_event events[128];
  int n;
  // epoll_pwait2 (Linux 5.11) takes the timeout in nanoseconds; older kernels get
  // epoll_wait, in milliseconds rounded up, once the first call has said ENOSYS.
  static std::atomic<bool> have_pwait2{true};
  for (;;) {
    n = -1;
    if (have_pwait2.load(std::memory_order_relaxed)) {
      n = epoll_pwait2(epfd, events, 128, tsp, nullptr);
      if (n < 0 && errno == ENOSYS) have_pwait2.store(false, std::memory_order_relaxed);
    }
    if (!have_pwait2.load(std::memory_order_relaxed)) {
      int ms = delay_ns < 0 ? -1 : static_cast<int>((delay_ns + 999'999) / 1'000'000);
      n = epoll_wait(epfd, events, 128, ms);
    }
    if (n >= 0) break;
    if (errno != EINTR) {
      std::fprintf(stderr, "goro: fatal error: epoll_wait: %s\n", std::strerror(errno));
      std::abort();
    }
    if (delay_ns > 0) return nullptr;  // let the caller recompute the timeout
  }
  return netpoll_ready(events, n, delay_ns != 0, count);
}

G* netpoll_ready(const struct epoll_event* events, int n, bool take_break, int* count) {
  *count = 0;
  G* list = nullptr;
  G** tail = &list;
  const std::int64_t polled_at = n > 0 ? nanotime() : 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t data = events[i].data.u64;
    auto* pd = reinterpret_cast<PollDesc*>(static_cast<std::uintptr_t>(data & kAddrMask));
    if (pd == nullptr) {
      // Only a blocking poll takes the break. The eventfd is level-triggered, so a
      // break stays visible until then; were a non-blocking poll (find_runnable's, or
      // sysmon's) to read it, the M blocked in epoll_wait, woken for it, would find
      // nothing and sleep on past the timer it was woken for.
      if (take_break) {
        std::uint64_t v;
        if (read(breakfd, &v, sizeof v) < 0) {
        }
        break_pending.store(false);
      }
      continue;
    }
#if defined(GORO_TSAN)
    __tsan_acquire(pd);  // see poll_open
#endif
    if (static_cast<std::uint16_t>(data >> kTagShift) != pd->seq.load(std::memory_order_acquire))
      continue;  // for an earlier registration of this PollDesc
    std::uint32_t ev = events[i].events;
    // Before unblocking: a reader that consumes this readiness must also see it; and
    // seq_cst against poll_start_on_hangup, which arms and then looks at the flag.
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI))
      pd->hangup.store(true, std::memory_order_seq_cst);
    G* gs[3] = {nullptr, nullptr, nullptr};
    if (ev & EPOLLIN) pd->read_ready_at.store(polled_at, std::memory_order_relaxed);
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI))
      gs[0] = start_or_g(pd, unblock(pd, IoMode::read, true));
    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) gs[1] = unblock(pd, IoMode::write, true);
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) gs[2] = take_hangup_start(pd);
    for (G* g : gs) {
      if (!g) continue;
      g->link = nullptr;
      *tail = g;
      tail = &g->link;
      ++*count;
    }
  }
  return list;
}

PollDesc* poll_open(int fd) {
  PollDesc* pd;
  {
    std::lock_guard<std::mutex> guard(cache_mu);
    if (free_pds) {
      pd = free_pds;
      free_pds = pd->link;
    } else {
      pd = new PollDesc();
      all_pds.push_back(pd);
    }
  }
  if ((reinterpret_cast<std::uintptr_t>(pd) & ~kAddrMask) != 0) {
    std::fprintf(stderr, "goro: fatal error: poll descriptor above 2^48 (%p)\n",
                 static_cast<void*>(pd));
    std::abort();
  }
  pd->lock.lock();
  // A new number first: an event of the last registration looked at from now on is
  // dropped before it can touch the state reset below.
  const std::uint16_t seq = static_cast<std::uint16_t>(pd->seq.load(std::memory_order_relaxed) + 1);
  pd->seq.store(seq, std::memory_order_release);
  pd->fd = fd;
  pd->rg.store(kEmpty);
  pd->wg.store(kEmpty);
  pd->read_ready_at.store(0, std::memory_order_relaxed);
  pd->closing.store(false);
  pd->hangup.store(false);
  pd->rd_expired.store(false);
  pd->wd_expired.store(false);
  pd->r_interrupted.store(nullptr);
  pd->w_interrupted.store(nullptr);
  pd->rd = pd->wd = 0;
  pd->rt.armed = pd->wt.armed = 0;
  pd->hangup_armed.store(false);
  pd->rt.pd = pd->wt.pd = pd;
  pd->rt.mode = IoMode::read;
  pd->wt.mode = IoMode::write;
  pd->lock.unlock();
#if defined(GORO_TSAN)
  // The kernel orders this epoll_ctl before the epoll_pwait2 that returns pd, but TSan
  // (LLVM 14) intercepts only epoll_wait, so it would take the initialisation above and
  // netpoll's first touch of pd for a race. Released before the ADD, acquired there.
  __tsan_release(pd);
#endif
  epoll_event ev{};
  // EPOLLPRI: TCP urgent data stops a read short at the urgent mark with the rest of
  // the stream still queued; the reader must know a short read no longer proves the
  // queue drained (see poll_hangup_or_urgent_seen).
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
  ev.data.u64 = tagged(pd, seq);
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    int saved = errno;
    std::lock_guard<std::mutex> guard(cache_mu);
    pd->link = free_pds;
    free_pds = pd;
    errno = saved;
    return nullptr;
  }
  return pd;
}

void poll_close(PollDesc* pd) {
  epoll_ctl(epfd, EPOLL_CTL_DEL, pd->fd, nullptr);
  poll_forget(pd);
}

void poll_forget(PollDesc* pd) {
  pd->lock.lock();
  pd->seq.store(static_cast<std::uint16_t>(pd->seq.load(std::memory_order_relaxed) + 1),
                std::memory_order_release);
  pd->rd = pd->wd = 0;
  pd->rt.armed = pd->wt.armed = 0;
  pd->lock.unlock();
  timer_stop(&pd->rt.timer);
  timer_stop(&pd->wt.timer);
  std::lock_guard<std::mutex> guard(cache_mu);
  pd->link = free_pds;
  free_pds = pd;
}

void poll_evict(PollDesc* pd) {
  pd->lock.lock();
  pd->closing.store(true, std::memory_order_seq_cst);  // see poll_start_on_hangup
  G* r = unblock(pd, IoMode::read, false);
  G* w = unblock(pd, IoMode::write, false);
  pd->lock.unlock();
  if (r) ready(start_or_g(pd, r));
  if (w) ready(w);
  // An armed hang-up start runs too: its owner gets its argument back that way.
  if (G* h = take_hangup_start(pd)) ready(h);
}

namespace {

// Interrupts waiter in one mode. The waiter finds the mark when it checks before
// parking; if it is past that check, committing (kWait) or parked, it is woken. A kWait
// of another G is woken too, harmlessly: its commit fails and it waits again.
G* interrupt_one(PollDesc* pd, IoMode mode, G* waiter) {
  auto& mark = mode == IoMode::read ? pd->r_interrupted : pd->w_interrupted;
  mark.store(waiter, std::memory_order_release);
  const std::uintptr_t held = slot(pd, mode).load(std::memory_order_acquire);
  if (held != kWait && held != reinterpret_cast<std::uintptr_t>(waiter)) return nullptr;
  return unblock(pd, mode, false);
}

}  // namespace

void poll_interrupt(PollDesc* pd, IoMode mode, G* waiter) {
  G* woken[2] = {nullptr, nullptr};
  pd->lock.lock();
  if (mode != IoMode::write) woken[0] = interrupt_one(pd, IoMode::read, waiter);
  if (mode != IoMode::read) woken[1] = interrupt_one(pd, IoMode::write, waiter);
  pd->lock.unlock();
  for (G* g : woken)
    if (g) ready(start_or_g(pd, g));
}

void poll_clear_interrupt(PollDesc* pd, IoMode mode, G* waiter) {
  G* expected = waiter;
  if (mode != IoMode::write)
    pd->r_interrupted.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  expected = waiter;
  if (mode != IoMode::read)
    pd->w_interrupted.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
}

PollStatus poll_wait(PollDesc* pd, IoMode mode) {
  RuntimeScope scope;
  auto& s = slot(pd, mode);
  auto& expired = mode == IoMode::read ? pd->rd_expired : pd->wd_expired;
  auto& interrupt_mark = mode == IoMode::read ? pd->r_interrupted : pd->w_interrupted;
  G* self = current_g();
  auto interrupted = [&] { return interrupt_mark.load(std::memory_order_acquire) == self; };
  for (;;) {
    if (pd->closing.load(std::memory_order_acquire)) return PollStatus::closed;
    if (expired.load(std::memory_order_acquire)) return PollStatus::timeout;
    if (interrupted()) return PollStatus::interrupted;
    std::uintptr_t old = s.load(std::memory_order_acquire);
    if (old == kReady) {
      if (s.compare_exchange_strong(old, kEmpty, std::memory_order_acq_rel))
        return PollStatus::ready;
      continue;
    }
    if (old != kEmpty) {
      std::fprintf(stderr, "goro: fatal error: two goroutines wait on one descriptor\n");
      std::abort();
    }
    if (!s.compare_exchange_strong(old, kWait, std::memory_order_acq_rel)) continue;
    // Recheck after announcing the wait: an evict or deadline in between saw kWait
    // and will have cleared it, making the commit fail.
    if (!pd->closing.load(std::memory_order_acquire) && !expired.load(std::memory_order_acquire) &&
        !interrupted()) {
      self->wait_fd = pd->fd;  // for goroutine dumps
      park(wait_commit, &s, mode == IoMode::read ? WaitReason::io_read : WaitReason::io_write);
    }
    old = s.exchange(kEmpty, std::memory_order_acq_rel);
    if (old == kReady) return PollStatus::ready;
  }
}

void poll_start_on_read(PollDesc* pd, void (*fn)(void*), void* arg, std::size_t stack_size,
                        const char* name) {
  pd->start_fn = fn;
  pd->start_arg = arg;
  pd->start_stack = stack_size;
  pd->start_name = name;
  auto& s = pd->rg;
  auto due = [pd] {
    return pd->closing.load(std::memory_order_acquire) ||
           pd->rd_expired.load(std::memory_order_acquire);
  };
  for (;;) {
    if (due()) break;
    std::uintptr_t old = s.load(std::memory_order_acquire);
    if (old == kReady) {
      if (s.compare_exchange_strong(old, kEmpty, std::memory_order_acq_rel)) break;
      continue;
    }
    if (old != kEmpty) {
      std::fprintf(stderr,
                   "goro: fatal error: a goroutine waits on a descriptor armed to start one\n");
      std::abort();
    }
    // Counted first: a notifier that clears kStart at once counts it down.
    start_slots.fetch_add(1, std::memory_order_relaxed);
    if (!s.compare_exchange_strong(old, kStart, std::memory_order_acq_rel)) {
      start_slots.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    // Recheck after arming, as poll_wait does: an evict or deadline in between saw the
    // slot empty. Take kStart back and start here, unless a notifier already took it.
    if (!due()) return;
    old = kStart;
    if (!s.compare_exchange_strong(old, kEmpty, std::memory_order_acq_rel)) return;
    start_slots.fetch_sub(1, std::memory_order_relaxed);
    break;
  }
  ready(new_waiting_g(fn, arg, stack_size, name));
}

void poll_start_on_hangup(PollDesc* pd, void (*fn)(void*), void* arg, std::size_t stack_size,
                          const char* name) {
  pd->hangup_fn = fn;
  pd->hangup_arg = arg;
  pd->hangup_stack = stack_size;
  pd->hangup_name = name;
  // Counted first: a notifier that takes it at once counts it down.
  hangup_starts.fetch_add(1, std::memory_order_relaxed);
  if (pd->hangup_armed.exchange(true, std::memory_order_seq_cst)) {
    std::fprintf(stderr, "goro: fatal error: a descriptor armed twice to start on hang-up\n");
    std::abort();
  }
  // Armed, then the flags looked at (seq_cst both here and in netpoll_ready): a hang-up
  // or an evict that came first is seen here, or sees the start armed.
  if (pd->hangup.load(std::memory_order_seq_cst) || pd->closing.load(std::memory_order_seq_cst)) {
    if (G* g = take_hangup_start(pd)) ready(g);
  }
}

bool poll_cancel_start_on_hangup(PollDesc* pd) {
  if (!pd->hangup_armed.exchange(false, std::memory_order_seq_cst)) return false;
  hangup_starts.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

std::uint64_t poll_event_data(PollDesc* pd) {
  return tagged(pd, pd->seq.load(std::memory_order_acquire));
}

bool poll_hangup_or_urgent_seen(PollDesc* pd) { return pd->hangup.load(std::memory_order_acquire); }

std::int64_t poll_read_ready_at(const PollDesc* pd) {
  return pd->read_ready_at.load(std::memory_order_relaxed);
}

bool poll_deadline_expired(const PollDesc* pd, IoMode mode) {
  return (mode == IoMode::read ? pd->rd_expired : pd->wd_expired).load(std::memory_order_acquire);
}

void poll_set_deadline(PollDesc* pd, std::int64_t deadline, IoMode mode) {
  G* woken[2] = {nullptr, nullptr};
  std::int64_t wake[2] = {0, 0};  // timer_wake after the unlock: it may start a thread
  pd->lock.lock();
  auto apply = [&](IoMode which, std::int64_t& field, PollDesc::DeadlineTimer& dt,
                   std::atomic<bool>& expired, G*& out, std::int64_t& wake_at) {
    field = deadline;
    expired.store(false, std::memory_order_release);
    // Not earlier than the pending timer: it fires first and then re-arms itself for
    // this deadline, or expires it if this one has passed too. The common case (a
    // connection's deadline pushed a little later for each request) reads no clock.
    if (dt.armed != 0 && dt.armed <= deadline) return;
    timer_stop_nowait(&dt.timer);
    dt.armed = 0;
    if (deadline == 0) return;
    if (deadline <= nanotime()) {
      expired.store(true, std::memory_order_release);
      out = unblock(pd, which, false);
      return;
    }
    dt.armed = deadline;
    dt.timer.when = deadline;
    dt.timer.fire = deadline_fire;
    wake_at = timer_add(&dt.timer);
  };
  if (mode != IoMode::write) apply(IoMode::read, pd->rd, pd->rt, pd->rd_expired, woken[0], wake[0]);
  if (mode != IoMode::read) apply(IoMode::write, pd->wd, pd->wt, pd->wd_expired, woken[1], wake[1]);
  pd->lock.unlock();
  for (std::int64_t w : wake) timer_wake(w);
  for (G* g : woken)
    if (g) ready(start_or_g(pd, g));
}

}  // namespace goro::detail
