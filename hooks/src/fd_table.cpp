// The descriptor table and the goroutine's wait (fd_table.hpp).
//
// A tracked socket that a goroutine had to wait on has a Watch: a net::FdWatch (its
// registration with the netpoller, made once and kept until close) with a reference
// count. The entry holds one reference, each waiter another for the length of its wait,
// so forget_fd can release the watch (waking the waiters with errc::closed, which the
// hooks report as EBADF) while waiters are still inside FdWatch::wait, and the last one
// out deletes it.

#include "fd_table.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <new>
#include <utility>

#include <goro/net/errors.hpp>
#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>

#include "libc.hpp"

namespace goro::hooks::detail {

namespace rt = goro::detail;

struct Watch {
  explicit Watch(net::FdWatch w) noexcept
      : fd_watch(std::move(w)), generation(rt::poll_generation()) {}
  net::FdWatch fd_watch;
  const std::uint32_t generation;  // the goro::run whose netpoller holds the registration
  std::atomic<int> refs{1};        // the entry's, and one per waiter
};

namespace {

constexpr int kPageBits = 12;
constexpr int kPageSize = 1 << kPageBits;
constexpr int kPages = 1024;

std::atomic<FdState*> pages[kPages];

FdState* state_of(int fd, bool create) noexcept {
  if (fd < 0 || fd >= kPages * kPageSize) return nullptr;
  std::atomic<FdState*>& slot = pages[fd >> kPageBits];
  // Acquire pairs with the release of the CAS below: the page's zeroed entries are
  // constructed before another thread uses them.
  FdState* page = slot.load(std::memory_order_acquire);
  if (page == nullptr) {
    if (!create) return nullptr;
    void* mem = ::mmap(nullptr, sizeof(FdState) * kPageSize, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    auto* fresh = static_cast<FdState*>(mem);
    for (int i = 0; i < kPageSize; ++i) new (&fresh[i]) FdState();
    if (slot.compare_exchange_strong(page, fresh, std::memory_order_acq_rel)) {
      page = fresh;
    } else {
      ::munmap(mem, sizeof(FdState) * kPageSize);  // another thread's page won
    }
  }
  return &page[fd & (kPageSize - 1)];
}

// The entry's spin lock. Held for a few instructions (and FdWatch::open, which makes
// two system calls); a goroutine that finds it taken yields its P, a thread its core.
class EntryLock {
 public:
  explicit EntryLock(FdState& st) noexcept : st_(st) {
    for (int spins = 0;; ++spins) {
      std::uint32_t expected = 0;
      if (st_.lock.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed))
        return;
      if (spins > 64) {
        if (on_goroutine()) {
          goro::yield();
        } else {
          ::sched_yield();
        }
      }
    }
  }
  ~EntryLock() { st_.lock.store(0, std::memory_order_release); }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  FdState& st_;
};

void drop(Watch* w) noexcept {
  if (w->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete w;
}

// Releases w (waking its waiters) and drops the entry's reference.
void retire(Watch* w) noexcept {
  if (w == nullptr) return;
  w->fd_watch.release();
  drop(w);
}

// The watch of fd with a reference for the caller, opened if there is none; null when
// the netpoller will not take fd (already registered by goro itself, or not pollable).
Watch* acquire_watch(int fd, FdState& st) noexcept {
  Watch* stale = nullptr;
  Watch* w = nullptr;
  {
    EntryLock lock(st);
    if (st.watch != nullptr && st.watch->generation != rt::poll_generation()) {
      stale = std::exchange(st.watch, nullptr);  // registered in an earlier goro::run
    }
    if (st.watch == nullptr) {
      auto opened = net::FdWatch::open(fd, net::Trigger::edge);
      if (opened) st.watch = new (std::nothrow) Watch(std::move(*opened));
    }
    w = st.watch;
    if (w != nullptr) w->refs.fetch_add(1, std::memory_order_relaxed);
  }
  retire(stale);
  return w;
}

WaitResult result_of(std::error_code ec) noexcept {
  if (!ec) return WaitResult::ready;
  if (ec == net::errc::timeout) return WaitResult::timeout;
  if (ec == net::errc::closed || ec == std::errc::bad_file_descriptor) return WaitResult::closed;
  set_errno(ec.category() == std::generic_category() ? ec.value() : EIO);
  return WaitResult::failed;
}

net::Deadline deadline_of(std::int64_t deadline) noexcept {
  // nanotime() is CLOCK_MONOTONIC, as steady_clock is on Linux.
  return deadline == 0 ? net::no_deadline : net::Deadline(std::chrono::nanoseconds(deadline));
}

}  // namespace

FdState* socket_state(int fd) noexcept { return state_of(fd, false); }

void track_socket(int fd, bool user_nonblock) noexcept {
  FdState* st = state_of(fd, true);
  if (st == nullptr) return;
  Watch* stale;
  {
    EntryLock lock(*st);
    stale = std::exchange(st->watch, nullptr);
    st->recv_timeout.store(0, std::memory_order_relaxed);
    st->send_timeout.store(0, std::memory_order_relaxed);
    st->flags.store(kSocket | (user_nonblock ? kUserNonblock : 0), std::memory_order_relaxed);
  }
  retire(stale);
}

void track_duplicate(int fd, int copy) noexcept {
  FdState* from = socket_state(fd);
  if (from == nullptr) return;
  const std::uint32_t flags = from->flags.load(std::memory_order_relaxed);
  if ((flags & kSocket) == 0) return;
  track_socket(copy, (flags & kUserNonblock) != 0);
  FdState* to = socket_state(copy);
  if (to == nullptr) return;
  to->recv_timeout.store(from->recv_timeout.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
  to->send_timeout.store(from->send_timeout.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
  to->flags.fetch_or(flags & kHookNonblock, std::memory_order_relaxed);
}

void forget_fd(int fd) noexcept {
  FdState* st = state_of(fd, false);
  if (st == nullptr || st->flags.load(std::memory_order_relaxed) == 0) return;
  Watch* w;
  {
    EntryLock lock(*st);
    w = std::exchange(st->watch, nullptr);
    st->flags.store(0, std::memory_order_relaxed);
  }
  retire(w);
}

// A child of fork() has no runtime: only the forking thread was copied, and if it was
// running a goroutine, its thread-local state still says so. From the fork on, the
// child is never on a goroutine, and every call is libc's (a socket the hooks made
// non-blocking underneath blocks the thread in poll(), as for any other thread).
namespace {

std::atomic<bool> in_forked_child{false};

[[gnu::constructor]] void watch_for_fork() {
  ::pthread_atfork(nullptr, nullptr,
                   [] { in_forked_child.store(true, std::memory_order_relaxed); });
}

}  // namespace

#ifdef GORO_HOOKS_PRELOAD
bool preload_runtime_found() noexcept;  // preload/preload.cpp
#endif

bool on_goroutine() noexcept {
#ifdef GORO_HOOKS_PRELOAD
  // Preloaded into a program without goro's runtime: never touch it (see preload.cpp).
  if (!preload_runtime_found()) return false;
#endif
  return rt::current_g() != nullptr && !in_forked_child.load(std::memory_order_relaxed);
}

[[gnu::noinline]] int errno_now() noexcept {
  asm volatile("" ::: "memory");
  return errno;
}

[[gnu::noinline]] void set_errno(int value) noexcept {
  asm volatile("" ::: "memory");
  errno = value;
}

bool make_nonblocking(int fd, FdState& st) noexcept {
  if ((st.flags.load(std::memory_order_relaxed) & kHookNonblock) != 0) return true;
  const int fl = libc::fcntl(fd, F_GETFL);
  if (fl < 0 || libc::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return false;
  st.flags.fetch_or(kHookNonblock, std::memory_order_relaxed);
  return true;
}

WaitResult wait_socket(int fd, FdState& st, net::Interest interest,
                       std::int64_t deadline) noexcept {
  Watch* w = acquire_watch(fd, st);
  if (w == nullptr) return wait_any_fd(fd, interest, deadline);
  const std::error_code ec = w->fd_watch.wait(interest, deadline_of(deadline));
  drop(w);
  return result_of(ec);
}

WaitResult wait_one(int fd, net::Interest interest, std::int64_t deadline) noexcept {
  FdState* st = socket_state(fd);
  if (st != nullptr && (st->flags.load(std::memory_order_relaxed) & kSocket) != 0)
    return wait_socket(fd, *st, interest, deadline);
  return wait_any_fd(fd, interest, deadline);
}

WaitResult wait_any_fd(int fd, net::Interest interest, std::int64_t deadline) noexcept {
  return result_of(net::wait_fd(fd, interest, deadline_of(deadline)));
}

int poll_thread(int fd, net::Interest interest, std::int64_t timeout_ns) noexcept {
  pollfd p{fd, static_cast<short>(interest == net::Interest::read ? POLLIN : POLLOUT), 0};
  int ms = -1;
  if (timeout_ns > 0) ms = static_cast<int>((timeout_ns + 999'999) / 1'000'000);
  return libc::poll(&p, 1, ms);
}

}  // namespace goro::hooks::detail
