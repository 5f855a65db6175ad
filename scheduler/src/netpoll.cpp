// The netpoller: one epoll instance (edge-triggered, in|out|rdhup|pri), an eventfd to break
// a blocking wait, and a PollDesc per registered descriptor with a reader and a writer
// slot. See detail/netpoll.hpp for the contract.
//
// A slot (rg / wg) holds kEmpty, kReady (an edge arrived that nobody consumed yet),
// kWait (a G is committing to wait) or a G*. Transitions, all by CAS:
//   waiter:  empty -> wait (before parking), wait -> G* (in the park commit, on g0);
//            ready -> empty (consumes a pending edge without parking);
//   notifier (epoll event, deadline, evict): wait/G* -> ready or empty, readying the G.
// A notifier that replaces kWait makes the waiter's commit fail, so the G never parks.
// Deadlines are Timers. A firing deadline timer checks, under the lock, that the
// deadline now in force has really passed, so a timer armed for an older deadline
// that fires late does nothing.
//
// PollDescs are recycled. An event that epoll_wait returned for a descriptor closed
// (and its PollDesc reused) before the event was looked at must not reach the new
// user: epoll's data word carries the PollDesc's address and, in the top 16 bits, the
// registration's sequence number, and netpoll drops events whose number is stale (as
// Go's taggedPointer and fdseq do).

#include <goro/scheduler/detail/netpoll.hpp>

#include "netpoll.hpp"
#include "timer.hpp"
#include "trace.hpp"

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
}  // namespace

class PollDesc {
 public:
  struct DeadlineTimer {
    Timer timer;
    PollDesc* pd = nullptr;
    char mode = 'r';
  };

  int fd = -1;
  Lock lock;  // guards the fields below `lock`
  std::atomic<std::uintptr_t> rg{kEmpty};
  std::atomic<std::uintptr_t> wg{kEmpty};
  std::atomic<bool> closing{false};
  std::atomic<bool> hangup{false};  // epoll reported rdhup, hup, err or pri
  std::atomic<bool> rd_expired{false};
  std::atomic<bool> wd_expired{false};
  std::atomic<std::uint16_t> seq{0};  // bumped by poll_open and poll_close
  // (lock)
  std::int64_t rd = 0, wd = 0;  // deadlines in force, 0 = none
  DeadlineTimer rt, wt;
  PollDesc* link = nullptr;  // free list (cache_mu)
};

namespace {

int epfd = -1;
int breakfd = -1;
std::atomic<bool> break_pending{false};
std::atomic<std::int32_t> waiters{0};  // Gs parked (or parking) on a PollDesc

std::mutex cache_mu;  // guards free_pds and all_pds
PollDesc* free_pds = nullptr;
std::vector<PollDesc*> all_pds;

std::atomic<std::uintptr_t>& slot(PollDesc* pd, char mode) { return mode == 'r' ? pd->rg : pd->wg; }

// epoll's data word for a registration: the address, below bit 48, and the sequence.
constexpr int kTagShift = 48;
constexpr std::uint64_t kAddrMask = (std::uint64_t{1} << kTagShift) - 1;

std::uint64_t tagged(PollDesc* pd, std::uint16_t seq) {
  return reinterpret_cast<std::uintptr_t>(pd) | (std::uint64_t{seq} << kTagShift);
}

// Clears a waiting slot; returns the G to ready, if one was parked there. With
// io_ready, leaves kReady behind so a later wait does not miss this edge.
G* unblock(PollDesc* pd, char mode, bool io_ready) {
  auto& s = slot(pd, mode);
  for (;;) {
    std::uintptr_t old = s.load(std::memory_order_acquire);
    if (old == kReady) return nullptr;
    if (old == kEmpty && !io_ready) return nullptr;
    std::uintptr_t next = io_ready ? kReady : kEmpty;
    if (s.compare_exchange_weak(old, next, std::memory_order_acq_rel)) {
      if (old == kWait || old == kEmpty) return nullptr;
      waiters.fetch_sub(1, std::memory_order_relaxed);
      return reinterpret_cast<G*>(old);
    }
  }
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
  const std::int64_t deadline = dt->mode == 'r' ? pd->rd : pd->wd;
  if (deadline == 0 || deadline > nanotime()) {  // changed since this timer was armed
    pd->lock.unlock();
    return;
  }
  G* g = nullptr;
  if (dt->mode == 'r') {
    pd->rd_expired.store(true, std::memory_order_release);
    g = unblock(pd, 'r', false);
  } else {
    pd->wd_expired.store(true, std::memory_order_release);
    g = unblock(pd, 'w', false);
  }
  pd->lock.unlock();
  if (g) ready(g);
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
}

void netpoll_shutdown() {
  if (epfd >= 0) close(epfd);
  if (breakfd >= 0) close(breakfd);
  epfd = breakfd = -1;
  std::lock_guard<std::mutex> guard(cache_mu);
  for (PollDesc* pd : all_pds) delete pd;
  all_pds.clear();
  free_pds = nullptr;
}

bool netpoll_inited() { return epfd >= 0; }

bool netpoll_anything_waiting() { return waiters.load(std::memory_order_relaxed) > 0; }

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
    // Before unblocking: a reader that consumes this readiness must also see it.
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI))
      pd->hangup.store(true, std::memory_order_release);
    G* gs[2] = {nullptr, nullptr};
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI))
      gs[0] = unblock(pd, 'r', true);
    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) gs[1] = unblock(pd, 'w', true);
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
  pd->closing.store(false);
  pd->hangup.store(false);
  pd->rd_expired.store(false);
  pd->wd_expired.store(false);
  pd->rd = pd->wd = 0;
  pd->rt.pd = pd->wt.pd = pd;
  pd->rt.mode = 'r';
  pd->wt.mode = 'w';
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
  pd->lock.lock();
  pd->seq.store(static_cast<std::uint16_t>(pd->seq.load(std::memory_order_relaxed) + 1),
                std::memory_order_release);
  pd->rd = pd->wd = 0;
  pd->lock.unlock();
  timer_stop(&pd->rt.timer);
  timer_stop(&pd->wt.timer);
  std::lock_guard<std::mutex> guard(cache_mu);
  pd->link = free_pds;
  free_pds = pd;
}

void poll_evict(PollDesc* pd) {
  pd->lock.lock();
  pd->closing.store(true, std::memory_order_release);
  G* r = unblock(pd, 'r', false);
  G* w = unblock(pd, 'w', false);
  pd->lock.unlock();
  if (r) ready(r);
  if (w) ready(w);
}

PollStatus poll_wait(PollDesc* pd, char mode) {
  RuntimeScope scope;
  auto& s = slot(pd, mode);
  auto& expired = mode == 'r' ? pd->rd_expired : pd->wd_expired;
  for (;;) {
    if (pd->closing.load(std::memory_order_acquire)) return PollStatus::closed;
    if (expired.load(std::memory_order_acquire)) return PollStatus::timeout;
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
    if (!pd->closing.load(std::memory_order_acquire) && !expired.load(std::memory_order_acquire)) {
      park(wait_commit, &s, mode == 'r' ? WaitReason::io_read : WaitReason::io_write);
    }
    old = s.exchange(kEmpty, std::memory_order_acq_rel);
    if (old == kReady) return PollStatus::ready;
  }
}

std::uint64_t poll_event_data(PollDesc* pd) {
  return tagged(pd, pd->seq.load(std::memory_order_acquire));
}

bool poll_hangup_or_urgent_seen(PollDesc* pd) { return pd->hangup.load(std::memory_order_acquire); }

void poll_set_deadline(PollDesc* pd, std::int64_t deadline, char mode) {
  G* woken[2] = {nullptr, nullptr};
  std::int64_t wake[2] = {0, 0};  // timer_wake after the unlock: it may start a thread
  pd->lock.lock();
  const std::int64_t now = nanotime();
  auto apply = [&](char which, std::int64_t& field, PollDesc::DeadlineTimer& dt,
                   std::atomic<bool>& expired, G*& out, std::int64_t& wake_at) {
    field = deadline;
    timer_stop_nowait(&dt.timer);
    expired.store(false, std::memory_order_release);
    if (deadline == 0) return;
    if (deadline <= now) {
      expired.store(true, std::memory_order_release);
      out = unblock(pd, which, false);
      return;
    }
    dt.timer.when = deadline;
    dt.timer.fire = deadline_fire;
    wake_at = timer_add(&dt.timer);
  };
  if (mode == 'r' || mode == 'b') apply('r', pd->rd, pd->rt, pd->rd_expired, woken[0], wake[0]);
  if (mode == 'w' || mode == 'b') apply('w', pd->wd, pd->wt, pd->wd_expired, woken[1], wake[1]);
  pd->lock.unlock();
  for (std::int64_t w : wake) timer_wake(w);
  for (G* g : woken)
    if (g) ready(g);
}

}  // namespace goro::detail
