// Shared pieces of the synchronisation primitives: park commits, fatal errors and the
// hand-off semaphore under Mutex and WaitGroup (see detail/waitq.hpp).

#include <goro/scheduler/detail/waitq.hpp>

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

void Semaphore::release() {
  RuntimeScope scope;
  lock_.lock();
  if (Waiter* w = waiters_.pop_front()) {
    G* g = w->g;
    lock_.unlock();
    ready(g);
    return;
  }
  ++count_;
  lock_.unlock();
}

}  // namespace goro::detail
