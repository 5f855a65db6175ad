// FdWatch and wait_fd: a foreign descriptor on the netpoller (wait_fd.hpp has the rules).
//
// A watch is a State on the heap: the poll descriptor, the file's identity, and an
// FdMutex, the reference count and reader/writer locks of NetFd. Every wait holds a
// reference and the read or write lock, which keeps at most one goroutine per direction
// in poll_wait, as the netpoller requires. release() marks the FdMutex closed and evicts
// the poll descriptor, so parked waits return at once; whoever drops the last reference
// unregisters (poll_close, or poll_forget when the number no longer names the file).
// The State is freed when both the registration and the FdWatch are gone, so a release
// from outside the runtime, which cannot wait for the waiters to leave, frees nothing
// under them.

#include <goro/net/wait_fd.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>

#include <goro/net/errors.hpp>
#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/detail/waitq.hpp>

#include "fd_mutex.hpp"
#include "internal.hpp"

namespace goro::net {

namespace rt = goro::detail;

class FdWatch::State {
 public:
  // number_is_ours: the descriptor is wait_fd's own duplicate, which nobody else can
  // close or reuse, so its identity needs no checking.
  State(int fd, Trigger trigger, bool number_is_ours, const struct stat& st,
        rt::PollDesc* pd) noexcept
      : fd(fd),
        trigger_(trigger),
        number_is_ours_(number_is_ours),
        dev_(st.st_dev),
        ino_(st.st_ino),
        pd_(pd),
        generation_(rt::poll_generation()) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Precondition: on a goroutine. ctx may be null (no context).
  std::error_code wait(Interest interest, std::int64_t deadline, const Context* ctx) noexcept;

  // Marks the watch released and wakes its waiters; unregisters once the last is out.
  // With wait_for_waiters (the caller is a goroutine), returns only after that.
  void release(bool wait_for_waiters) noexcept;
  // The number's file was closed by its owner: unregister() must not look at it.
  void mark_closed_elsewhere() noexcept {
    closed_elsewhere_.store(true, std::memory_order_release);
  }

  // The FdWatch is gone: frees this once the registration is gone too.
  void drop_owner() noexcept { drop_lifetime(); }

  // Whether fd still names the file registered.
  bool same_file() const noexcept {
    struct stat st;
    return ::fstat(fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
  }

  bool released() const noexcept { return mu_.closed(); }

  const int fd;

 private:
  class WaitGuard;

  rt::PollStatus park(rt::IoMode mode, const Context* ctx) noexcept;
  // After the last reference: takes the descriptor out of the netpoller.
  void unregister() noexcept;
  // The last reference was a waiter's: unregister, then let a parked release() go.
  void finish_for_releaser() noexcept;
  void drop_lifetime() noexcept {
    if (lifetimes_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  const Trigger trigger_;
  const bool number_is_ours_;
  const dev_t dev_;
  const ino_t ino_;
  rt::PollDesc* const pd_;
  const std::uint32_t generation_;  // the netpoller run pd_ belongs to
  net::detail::FdMutex mu_;
  rt::Semaphore unregistered_;  // released by the waiter that unregistered
  // One for the FdWatch, one for the registration: the last of them to go frees this.
  std::atomic<int> lifetimes_{2};
  std::atomic<bool> closed_elsewhere_{false};  // forget_closed()
};

// The read or write lock and a reference, for one wait.
class FdWatch::State::WaitGuard {
 public:
  WaitGuard(State& s, bool read) noexcept : s_(s), read_(read), held_(s.mu_.rwlock(read)) {}
  ~WaitGuard() {
    if (held_ && s_.mu_.rwunlock(read_)) s_.finish_for_releaser();
  }
  WaitGuard(const WaitGuard&) = delete;
  WaitGuard& operator=(const WaitGuard&) = delete;
  bool held() const noexcept { return held_; }

 private:
  State& s_;
  bool read_;
  bool held_;
};

namespace {

// Whether fd is ready for interest now. A descriptor that is not open counts as ready
// with *closed set, so the caller reports it instead of waiting.
bool ready_now(int fd, Interest interest, bool* closed) noexcept {
  pollfd p{fd, static_cast<short>(interest == Interest::read ? POLLIN : POLLOUT), 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  *closed = n > 0 && (p.revents & POLLNVAL) != 0;
  return n > 0;
}

rt::IoMode mode_of(Interest interest) noexcept {
  return interest == Interest::read ? rt::IoMode::read : rt::IoMode::write;
}

const std::error_code kNotOpen = std::make_error_code(std::errc::bad_file_descriptor);
// Called off a goroutine, or with no goro::run (no netpoller).
const std::error_code kNotPermitted = std::make_error_code(std::errc::operation_not_permitted);

// Registers fd; the identity recorded is the file fd names now.
Result<FdWatch::State*> register_fd(int fd, Trigger trigger, bool number_is_ours) {
  if (rt::poll_generation() == 0) return kNotPermitted;
  struct stat st;
  if (::fstat(fd, &st) != 0) return net::detail::last_errno();
  rt::PollDesc* pd = rt::poll_open(fd);
  if (pd == nullptr) return net::detail::last_errno();  // EEXIST, EPERM (a regular file)
  return new FdWatch::State(fd, trigger, number_is_ours, st, pd);
}

}  // namespace

std::error_code FdWatch::State::wait(Interest interest, std::int64_t deadline,
                                     const Context* ctx) noexcept {
  const bool read = interest == Interest::read;
  const rt::IoMode mode = mode_of(interest);
  WaitGuard guard(*this, read);
  if (!guard.held() || generation_ != rt::poll_generation()) return errc::closed;
  if (ctx != nullptr) {
    if (auto e = ctx->err()) return e;
  }
  if (deadline != 0 && rt::nanotime() >= deadline) return errc::timeout;
  bool closed = false;
  if (trigger_ == Trigger::level && ready_now(fd, interest, &closed)) {
    return closed ? std::error_code(errc::closed) : std::error_code();
  }
  if (deadline != 0) rt::poll_set_deadline(pd_, deadline, mode);
  const rt::PollStatus status = park(mode, ctx);
  if (deadline != 0) rt::poll_set_deadline(pd_, 0, mode);
  switch (status) {
    case rt::PollStatus::ready: return {};
    case rt::PollStatus::timeout: return errc::timeout;
    case rt::PollStatus::interrupted:
      if (ctx != nullptr) {
        if (auto e = ctx->err()) return e;
      }
      return errc::interrupted;
    case rt::PollStatus::closed: break;
  }
  return errc::closed;
}

// poll_wait, interrupted by ctx's cancellation as Stream's with_context does it: the
// hook marks this goroutine's wait in this direction, waking it if parked.
rt::PollStatus FdWatch::State::park(rt::IoMode mode, const Context* ctx) noexcept {
  if (ctx == nullptr || !ctx->can_cancel()) return rt::poll_wait(pd_, mode);
  struct Target {
    rt::PollDesc* pd;
    rt::IoMode mode;
    rt::G* waiter;
  } target{pd_, mode, rt::current_g()};
  auto fire = [](rt::CancelHook* h) {
    auto* t = static_cast<Target*>(h->arg);
    rt::poll_interrupt(t->pd, t->mode, t->waiter);
  };
  rt::PollStatus status = rt::PollStatus::interrupted;
  {
    rt::ContextWatch watch(*ctx, fire, &target);
    if (watch.ok()) status = rt::poll_wait(pd_, mode);
  }
  // The hook is gone: clear what it may have set after the wait returned.
  rt::poll_clear_interrupt(pd_, mode, target.waiter);
  return status;
}

void FdWatch::State::release(bool wait_for_waiters) noexcept {
  if (!mu_.incref_and_close()) return;
  // A watch that outlived its goro::run: the poll descriptor went with that run.
  if (generation_ == rt::poll_generation()) rt::poll_evict(pd_);
  if (mu_.decref()) {
    unregister();
    return;
  }
  // A waiter still holds a reference; woken by the eviction (or failing at the lock),
  // the last one out unregisters.
  if (wait_for_waiters) unregistered_.acquire(false, rt::WaitReason::other);
}

void FdWatch::State::unregister() noexcept {
  if (generation_ == rt::poll_generation()) {
    // Unregistering by number is right only while the number names the file
    // registered: closed since, its registration went with it (unless a duplicate
    // keeps the file open), and the number may be another file's, registered by
    // someone else.
    const bool closed_elsewhere = closed_elsewhere_.load(std::memory_order_acquire);
    if (number_is_ours_ || (!closed_elsewhere && same_file())) {
      rt::poll_close(pd_);
    } else {
      rt::poll_forget(pd_);
    }
  }
  drop_lifetime();
}

void FdWatch::State::finish_for_releaser() noexcept {
  // Hold this State past unregister()'s drop: the releaser, woken next, may drop the
  // last lifetime, and the semaphore must outlive its release().
  lifetimes_.fetch_add(1, std::memory_order_relaxed);
  unregister();
  unregistered_.release();
  drop_lifetime();
}

Result<FdWatch> FdWatch::open(int fd, Trigger trigger) {
  Result<State*> state = register_fd(fd, trigger, false);
  if (!state) return state.error();
  return FdWatch(*state);
}

FdWatch::FdWatch() noexcept = default;
FdWatch::FdWatch(State* state) noexcept : state_(state) {}
FdWatch::FdWatch(FdWatch&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}

FdWatch& FdWatch::operator=(FdWatch&& other) noexcept {
  if (this != &other) {
    FdWatch old(std::move(*this));
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

FdWatch::~FdWatch() {
  if (state_ == nullptr) return;
  state_->release(rt::current_g() != nullptr);
  state_->drop_owner();
}

std::error_code FdWatch::wait(Interest interest, Deadline deadline) {
  if (state_ == nullptr) return kNotOpen;
  if (rt::current_g() == nullptr) return kNotPermitted;
  return state_->wait(interest, net::detail::to_nanotime(deadline), nullptr);
}

std::error_code FdWatch::wait(Interest interest, const Context& ctx) {
  if (state_ == nullptr) return kNotOpen;
  if (rt::current_g() == nullptr) return kNotPermitted;
  return state_->wait(interest, 0, &ctx);
}

int FdWatch::release() noexcept {
  if (state_ == nullptr || state_->released()) return -1;
  const int fd = state_->fd;
  state_->release(rt::current_g() != nullptr);
  return fd;
}

void FdWatch::forget_closed() noexcept {
  if (state_ == nullptr || state_->released()) return;
  state_->mark_closed_elsewhere();
  state_->release(rt::current_g() != nullptr);
}

bool FdWatch::watches(int fd) const noexcept {
  return state_ != nullptr && !state_->released() && state_->fd == fd && state_->same_file();
}

int FdWatch::fd() const noexcept {
  return state_ != nullptr && !state_->released() ? state_->fd : -1;
}

namespace {

std::error_code wait_once(int fd, Interest interest, std::int64_t deadline, const Context* ctx) {
  if (rt::current_g() == nullptr) return kNotPermitted;
  if (ctx != nullptr) {
    if (auto e = ctx->err()) return e;
  }
  if (deadline != 0 && rt::nanotime() >= deadline) return errc::timeout;
  bool closed = false;
  if (ready_now(fd, interest, &closed)) return closed ? kNotOpen : std::error_code();
  // A duplicate is a registration nobody else can hold or close: fd itself may be
  // registered already (a watch, a goro socket) or be closed by its owner meanwhile.
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return net::detail::last_errno();
  // Registering reports readiness that came after the check above, so edge is enough.
  Result<FdWatch::State*> state = register_fd(dup, Trigger::edge, true);
  if (!state) {
    ::close(dup);
    return state.error();
  }
  FdWatch::State* watch = *state;
  const std::error_code ec = watch->wait(interest, deadline, ctx);
  watch->release(true);
  watch->drop_owner();
  ::close(dup);
  return ec;
}

}  // namespace

std::error_code wait_fd(int fd, Interest interest, Deadline deadline) {
  return wait_once(fd, interest, net::detail::to_nanotime(deadline), nullptr);
}

std::error_code wait_fd(int fd, Interest interest, const Context& ctx) {
  return wait_once(fd, interest, 0, &ctx);
}

}  // namespace goro::net
