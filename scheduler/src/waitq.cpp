// Shared pieces of the synchronisation primitives: park commits, fatal errors and the
// hand-off semaphore under Mutex and WaitGroup (see detail/waitq.hpp).

#include <goro/scheduler/detail/waitq.hpp>

#include <goro/scheduler/context.hpp>

#include <cstdio>
#include <cstdlib>

namespace goro::detail {

bool unlock_commit(G*, void* lock) {
  static_cast<Lock*>(lock)->unlock();
  return true;
}

void park_forever(WaitReason reason) {
  // Nothing will ever ready this G; it stays parked until the process ends.
  park([](G*, void*) { return true; }, nullptr, reason);
  sync_fatal("goro: a goroutine parked forever was woken");
}

void sync_fatal(const char* message) noexcept {
  std::fprintf(stderr, "fatal error: %s\n", message);
  std::fflush(stderr);
  std::abort();
}

void Semaphore::acquire(bool lifo, WaitReason reason) {
  RuntimeScope scope;
  lock_.lock();
  if (count_ > 0) {
    --count_;
    lock_.unlock();
    return;
  }
  Waiter w;
  w.g = current_g();
  if (lifo)
    waiters_.push_front(&w);
  else
    waiters_.push_back(&w);
  park(unlock_commit, &lock_, reason);
  // release() handed us its token.
}

namespace {

// A cancellable acquire's state, shared with its cancel hook (both on the G's stack).
struct CancellableAcquire {
  Lock* lock;
  WaitQueue* queue;
  Waiter* waiter = nullptr;  // set once queued (under *lock)
  bool cancelled = false;    // under *lock
};

// Runs under the context's lock: takes the waiter off the queue if it is still there.
void cancel_acquire(CancelHook* hook) {
  auto* a = static_cast<CancellableAcquire*>(hook->arg);
  a->lock->lock();
  a->cancelled = true;
  Waiter* w = a->waiter;
  G* g = nullptr;
  if (w != nullptr && w->queued) {
    a->queue->remove(w);
    g = w->g;
  }
  a->lock->unlock();
  if (g != nullptr) ready(g);
}

}  // namespace

bool Semaphore::acquire(bool lifo, WaitReason reason, const Context& ctx) {
  // Both outlive the watch: the hook may run until the watch's destructor returns.
  Waiter w;
  CancellableAcquire a{&lock_, &waiters_};
  ContextWatch watch(ctx, cancel_acquire, &a);
  if (!watch.ok()) return false;
  RuntimeScope scope;
  lock_.lock();
  if (count_ > 0) {
    --count_;
    lock_.unlock();
    return true;
  }
  if (a.cancelled) {
    lock_.unlock();
    return false;
  }
  w.g = current_g();
  a.waiter = &w;
  if (lifo)
    waiters_.push_front(&w);
  else
    waiters_.push_back(&w);
  park(unlock_commit, &lock_, reason);
  // Woken by release() (success: its token is ours) or by the cancel hook.
  return w.success;
}

void Semaphore::release() {
  RuntimeScope scope;
  lock_.lock();
  if (Waiter* w = waiters_.pop_front()) {
    w->success = true;  // read by a cancellable acquire
    G* g = w->g;
    lock_.unlock();
    ready(g);
    return;
  }
  ++count_;
  lock_.unlock();
}

}  // namespace goro::detail
