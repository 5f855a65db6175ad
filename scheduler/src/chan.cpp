// Channels: the type-erased core of goro::Chan<T> (Go's runtime/chan.go).
//
// Every operation runs inside a RuntimeScope with the channel's lock held. A G that
// has to wait links a Waiter into recvq or sendq and parks with unlock_commit, so a
// waker (which takes the same lock) can only find it once it is off its stack. The
// waker completes the whole operation for the sleeper (moves the value, sets
// Waiter::success), unlocks, and readies it.

#include "chan_impl.hpp"

#include <limits>
#include <new>
#include <stdexcept>

namespace goro::detail {

ChanBase::ChanBase(std::size_t capacity, const ElemOps* elem_ops)
    : ops(elem_ops),
      cap(capacity),
      buf(capacity == 0 ? nullptr
                        : static_cast<unsigned char*>(::operator new(
                              capacity * elem_ops->size, std::align_val_t(elem_ops->align)))) {}

ChanBase::~ChanBase() {
  for (std::size_t i = 0, at = recv_index; i < count; ++i) {
    ops->destroy(slot(at));
    if (++at == cap) at = 0;
  }
  if (buf != nullptr) ::operator delete(buf, std::align_val_t(ops->align));
}

std::shared_ptr<ChanBase> chan_make(std::size_t cap, const ElemOps* ops) {
  if (cap > std::numeric_limits<std::ptrdiff_t>::max() / ops->size)
    throw std::length_error("goro::Chan: capacity too large");
  return std::make_shared<ChanBase>(cap, ops);
}

Waiter* dequeue(WaitQueue& q) noexcept {
  while (Waiter* w = q.pop_front()) {
    if (w->select == nullptr) return w;
    // Only the winner of `done` may complete a select. acq_rel: relaxed would do for
    // the choice itself (the RMW order picks one winner, and ready() publishes what the
    // winner writes next); acq_rel keeps the reasoning local at no cost on x86/ARMv8.1.
    std::uint32_t expected = 0;
    if (w->select->done.compare_exchange_strong(expected, 1, std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
      w->select->fired = w;
      return w;
    }
    // Stale: its select already fired elsewhere and will find it unlinked.
  }
  return nullptr;
}

void send_direct(ChanBase* c, Waiter* r, void* elem) noexcept {
  c->ops->move_construct(r->elem, elem);
  r->success = true;
}

void recv_direct(ChanBase* c, Waiter* s, void* dst) noexcept {
  if (c->cap == 0) {
    c->ops->move_construct(dst, s->elem);
  } else {
    // The buffer is full (s waited): take its head, and s's value becomes the tail,
    // which is the same slot. FIFO order is kept.
    void* head = c->slot(c->recv_index);
    c->ops->move_construct(dst, head);
    c->ops->destroy(head);
    c->ops->move_construct(head, s->elem);
    if (++c->recv_index == c->cap) c->recv_index = 0;
    c->send_index = c->recv_index;
  }
  s->success = true;
}

void buffer_put(ChanBase* c, void* elem) noexcept {
  c->ops->move_construct(c->slot(c->send_index), elem);
  if (++c->send_index == c->cap) c->send_index = 0;
  ++c->count;
}

void buffer_take(ChanBase* c, void* dst) noexcept {
  void* head = c->slot(c->recv_index);
  c->ops->move_construct(dst, head);
  c->ops->destroy(head);
  if (++c->recv_index == c->cap) c->recv_index = 0;
  --c->count;
}

void throw_send_on_closed() { throw ChanClosed("send on closed channel"); }

bool chan_send(ChanBase* c, void* elem, bool block) {
  if (c == nullptr) {
    if (!block) return false;
    park_forever(WaitReason::chan_send);
  }
  RuntimeScope scope;
  c->lock.lock();
  if (c->closed) {
    c->lock.unlock();
    throw_send_on_closed();
  }
  if (Waiter* r = dequeue(c->recvq)) {
    send_direct(c, r, elem);
    G* g = r->g;
    c->lock.unlock();
    ready(g);
    return true;
  }
  if (c->count < c->cap) {
    buffer_put(c, elem);
    c->lock.unlock();
    return true;
  }
  if (!block) {
    c->lock.unlock();
    return false;
  }
  Waiter w;
  w.g = current_g();
  w.elem = elem;
  c->sendq.push_back(&w);
  park(unlock_commit, &c->lock, WaitReason::chan_send);
  // Woken by a receiver (it took the value) or by close() (it did not).
  if (!w.success) throw_send_on_closed();
  return true;
}

bool chan_recv(ChanBase* c, void* dst, bool block, bool* received) {
  *received = false;
  if (c == nullptr) {
    if (!block) return false;
    park_forever(WaitReason::chan_recv);
  }
  RuntimeScope scope;
  c->lock.lock();
  if (Waiter* s = dequeue(c->sendq)) {
    recv_direct(c, s, dst);
    G* g = s->g;
    c->lock.unlock();
    ready(g);
    *received = true;
    return true;
  }
  if (c->count > 0) {
    buffer_take(c, dst);
    c->lock.unlock();
    *received = true;
    return true;
  }
  if (c->closed) {
    c->lock.unlock();
    return true;
  }
  if (!block) {
    c->lock.unlock();
    return false;
  }
  Waiter w;
  w.g = current_g();
  w.elem = dst;
  c->recvq.push_back(&w);
  park(unlock_commit, &c->lock, WaitReason::chan_recv);
  // Woken by a sender (it constructed the value at dst) or by close() (it did not).
  *received = w.success;
  return true;
}

void chan_close(ChanBase* c) {
  if (c == nullptr) throw ChanClosed("close of nil channel");
  RuntimeScope scope;
  c->lock.lock();
  if (c->closed) {
    c->lock.unlock();
    throw ChanClosed("close of closed channel");
  }
  c->closed = true;
  // Every receiver gets nothing and every sender fails (success stays false). They are
  // readied, oldest first, only after unlocking, so none wakes to spin on our lock.
  Waiter* first = nullptr;
  Waiter** last_next = &first;
  for (WaitQueue* q : {&c->recvq, &c->sendq}) {
    while (Waiter* w = dequeue(*q)) {
      w->success = false;
      w->wake_next = nullptr;
      *last_next = w;
      last_next = &w->wake_next;
    }
  }
  c->lock.unlock();
  for (Waiter* w = first; w != nullptr;) {
    Waiter* next = w->wake_next;  // read before ready(): after it the Waiter may vanish
    ready(w->g);
    w = next;
  }
}

std::size_t chan_len(ChanBase* c) noexcept {
  if (c == nullptr) return 0;
  RuntimeScope scope;
  c->lock.lock();
  std::size_t n = c->count;
  c->lock.unlock();
  return n;
}

std::size_t chan_cap(const ChanBase* c) noexcept { return c == nullptr ? 0 : c->cap; }

}  // namespace goro::detail
