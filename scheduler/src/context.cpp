// goro::Context: the tree of contexts and how cancellation travels through it.
//
// A Context holds a ContextNode. Value nodes only carry a key and a value; a CancelNode
// is a context that can be cancelled (with_cancel, with_deadline). Every node points at
// its nearest CancelNode (its own, or an ancestor's), so err() is one atomic load and
// value nodes cost no lock.
//
// Each CancelNode has a runtime Lock guarding its children, its watchers (CancelHooks)
// and its done channel. cancel() runs under that lock: it publishes the error, closes the
// done channel, runs every hook, and cancels the children (taking each child's lock in
// turn: locks are only ever taken parent before child). A hook therefore never runs after
// context_unwatch has taken the lock, which is what lets an operation keep its hook on
// its own stack.
//
// A child is linked into its parent's list while both live; the child unlinks itself
// when cancelled on its own, or when its last handle goes (its destructor), so a cancel
// function nobody calls leaks nothing. A deadline is a Timer owned by the node; the
// destructor stops it, waiting for a fire in progress.

#include <goro/scheduler/context.hpp>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include <algorithm>
#include <atomic>

#include <cstdio>
#include <cstdlib>

#include "sched.hpp"
#include "timer.hpp"

namespace goro {

namespace {

class ContextCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.context"; }
  std::string message(int ev) const override {
    switch (static_cast<context_errc>(ev)) {
      case context_errc::canceled:
        return "context canceled";
      case context_errc::deadline_exceeded:
        return "context deadline exceeded";
    }
    return "unknown context error";
  }
};

}  // namespace

const std::error_category& context_category() noexcept {
  static const ContextCategory category;
  return category;
}

std::error_code make_error_code(context_errc e) noexcept {
  return {static_cast<int>(e), context_category()};
}

namespace detail {

struct ContextNode {
  virtual ~ContextNode() = default;

  std::shared_ptr<ContextNode> parent;
  CancelNode* cancel = nullptr;  // the nearest cancellable context: this one or an ancestor
  std::int64_t deadline = 0;     // the nearest deadline (nanotime), 0: none
  const void* key = nullptr;     // value nodes
  std::shared_ptr<const void> value;
};

class CancelNode final : public ContextNode {
 public:
  ~CancelNode() override;

  Lock lock;
  std::atomic<int> err{0};  // a context_errc once cancelled; written under lock
  // Guarded by lock:
  std::optional<Chan<std::monostate>> done;
  CancelHook* hooks = nullptr;
  CancelNode* children = nullptr;
  CancelNode* sibling_prev = nullptr;
  CancelNode* sibling_next = nullptr;
  bool linked = false;  // in the parent's children (guarded by the parent's lock)
  // The deadline timer, armed at most once (timer_armed is set under lock).
  Timer timer;
  bool timer_armed = false;
};

namespace {

// The CancelNode this one links into: the parent's nearest cancellable context.
CancelNode* parent_cancel(const CancelNode* n) noexcept {
  return n->parent ? n->parent->cancel : nullptr;
}

void unlink_child(CancelNode* parent, CancelNode* child) noexcept {
  if (!child->linked) return;
  if (child->sibling_prev != nullptr)
    child->sibling_prev->sibling_next = child->sibling_next;
  else
    parent->children = child->sibling_next;
  if (child->sibling_next != nullptr) child->sibling_next->sibling_prev = child->sibling_prev;
  child->sibling_prev = child->sibling_next = nullptr;
  child->linked = false;
}

// Cancels n and its subtree with err. from_parent: called by the parent's cancel, which
// holds the parent's lock and unlinks n itself.
void cancel_node(CancelNode* n, context_errc err, bool from_parent) noexcept {
  RuntimeScope scope;
  n->lock.lock();
  if (n->err.load(std::memory_order_relaxed) != 0) {
    n->lock.unlock();
    return;
  }
  n->err.store(static_cast<int>(err), std::memory_order_release);
  if (n->done) {
    try {
      n->done->close();
    } catch (const ChanClosed&) {
      // Only cancel closes it, once.
    }
  }
  while (CancelHook* h = n->hooks) {
    n->hooks = h->next;
    if (n->hooks != nullptr) n->hooks->prev = nullptr;
    h->prev = h->next = nullptr;
    h->owner = nullptr;  // unwatch has nothing left to do
    h->fn(h);
  }
  while (CancelNode* child = n->children) {
    unlink_child(n, child);
    cancel_node(child, err, true);
  }
  const bool stop_timer = n->timer_armed;
  n->lock.unlock();
  if (!from_parent) {
    if (CancelNode* p = parent_cancel(n)) {
      p->lock.lock();
      unlink_child(p, n);
      p->lock.unlock();
    }
  }
  if (stop_timer) timer_stop_nowait(&n->timer);
}

void deadline_fire(Timer* t) {
  cancel_node(static_cast<CancelNode*>(t->arg), context_errc::deadline_exceeded, false);
}

// A new CancelNode under parent, linked to the parent's cancellation (cancelled at once
// if the parent already is).
std::shared_ptr<CancelNode> new_cancel_node(const Context& parent) {
  auto n = std::make_shared<CancelNode>();
  n->parent = ContextAccess::node(parent);
  n->cancel = n.get();
  if (n->parent) n->deadline = n->parent->deadline;
  CancelNode* p = parent_cancel(n.get());
  if (p == nullptr) return n;
  RuntimeScope scope;
  p->lock.lock();
  const int parent_err = p->err.load(std::memory_order_relaxed);
  if (parent_err == 0) {
    n->sibling_next = p->children;
    if (p->children != nullptr) p->children->sibling_prev = n.get();
    p->children = n.get();
    n->linked = true;
  }
  p->lock.unlock();
  if (parent_err != 0) cancel_node(n.get(), static_cast<context_errc>(parent_err), true);
  return n;
}

}  // namespace

CancelNode::~CancelNode() {
  if (timer_armed) timer_stop(&timer);
  if (CancelNode* p = parent_cancel(this)) {
    RuntimeScope scope;
    p->lock.lock();
    unlink_child(p, this);
    p->lock.unlock();
  }
}

namespace {

// Puts hook among c's watchers. c's lock is held and c is not cancelled.
void link_hook(CancelNode* c, CancelHook* hook) noexcept {
  hook->owner = hook->watched = c;
  hook->prev = nullptr;
  hook->next = c->hooks;
  if (c->hooks != nullptr) c->hooks->prev = hook;
  c->hooks = hook;
}

}  // namespace

bool context_watch(const Context& ctx, CancelHook* hook) noexcept {
  hook->owner = hook->watched = nullptr;
  const auto& node = ContextAccess::node(ctx);
  CancelNode* c = node ? node->cancel : nullptr;
  if (c == nullptr) return true;
  RuntimeScope scope;
  c->lock.lock();
  if (c->err.load(std::memory_order_relaxed) != 0) {
    c->lock.unlock();
    return false;
  }
  link_hook(c, hook);
  c->lock.unlock();
  return true;
}

void context_unwatch(CancelHook* hook) noexcept {
  // cancel_node clears owner and runs fn under the lock: once we hold it, fn is done.
  CancelNode* c = hook->watched;
  if (c == nullptr) return;
  RuntimeScope scope;
  c->lock.lock();
  if (hook->owner == c) {
    if (hook->prev != nullptr)
      hook->prev->next = hook->next;
    else
      c->hooks = hook->next;
    if (hook->next != nullptr) hook->next->prev = hook->prev;
    hook->prev = hook->next = nullptr;
    hook->owner = nullptr;
  }
  c->lock.unlock();
}

std::shared_ptr<ContextNode> value_node(const Context& parent, const void* key,
                                        std::shared_ptr<const void> value) {
  auto n = std::make_shared<ContextNode>();
  n->parent = ContextAccess::node(parent);
  if (n->parent) {
    n->cancel = n->parent->cancel;
    n->deadline = n->parent->deadline;
  }
  n->key = key;
  n->value = std::move(value);
  return n;
}

}  // namespace detail

using detail::CancelNode;
using detail::ContextAccess;

Chan<std::monostate> Context::done() const {
  CancelNode* c = node_ ? node_->cancel : nullptr;
  if (c == nullptr) return Chan<std::monostate>::nil();
  detail::RuntimeScope scope;
  c->lock.lock();
  if (!c->done) {
    try {
      c->done.emplace();
    } catch (...) {
      c->lock.unlock();
      throw;
    }
    if (c->err.load(std::memory_order_relaxed) != 0) c->done->close();
  }
  Chan<std::monostate> ch = *c->done;
  c->lock.unlock();
  return ch;
}

std::error_code Context::err() const noexcept {
  CancelNode* c = node_ ? node_->cancel : nullptr;
  if (c == nullptr) return {};
  const int e = c->err.load(std::memory_order_acquire);
  if (e == 0) return {};
  return make_error_code(static_cast<context_errc>(e));
}

std::optional<std::chrono::steady_clock::time_point> Context::deadline() const noexcept {
  if (!node_ || node_->deadline == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(node_->deadline));
}

bool Context::can_cancel() const noexcept { return node_ && node_->cancel != nullptr; }

const void* Context::find_value(const void* key) const noexcept {
  for (const detail::ContextNode* n = node_.get(); n != nullptr; n = n->parent.get())
    if (n->key == key) return n->value.get();
  return nullptr;
}

void CancelFunc::operator()() const noexcept {
  if (node_)
    detail::cancel_node(static_cast<CancelNode*>(node_.get()), context_errc::canceled, false);
}

std::pair<Context, CancelFunc> with_cancel(const Context& parent) {
  auto n = detail::new_cancel_node(parent);
  return {ContextAccess::make(n), ContextAccess::cancel_func(n)};
}

std::pair<Context, CancelFunc> with_deadline(const Context& parent,
                                             std::chrono::steady_clock::time_point deadline) {
  const std::int64_t when = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
  const auto& p = ContextAccess::node(parent);
  // A parent that ends sooner decides: this is then a plain cancellable child.
  if (p && p->deadline != 0 && p->deadline <= when) return with_cancel(parent);
  auto n = detail::new_cancel_node(parent);
  n->deadline = when;
  if (n->err.load(std::memory_order_acquire) == 0) {
    if (when <= detail::nanotime()) {
      detail::cancel_node(n.get(), context_errc::deadline_exceeded, false);
    } else {
      if (!detail::sched.running.load(std::memory_order_acquire)) {
        std::fprintf(stderr, "goro: fatal error: a context deadline needs goro::run running\n");
        std::abort();
      }
      // Under the lock: a parent's cancel may reach this node from now on.
      detail::RuntimeScope scope;
      n->lock.lock();
      std::int64_t wake = 0;
      if (n->err.load(std::memory_order_relaxed) == 0) {
        n->timer.when = when;
        n->timer.fire = detail::deadline_fire;
        n->timer.arg = n.get();
        n->timer_armed = true;
        wake = detail::timer_add(&n->timer);
      }
      n->lock.unlock();
      detail::timer_wake(wake);
    }
  }
  return {ContextAccess::make(n), ContextAccess::cancel_func(n)};
}

std::pair<Context, CancelFunc> with_timeout(const Context& parent,
                                            std::chrono::nanoseconds timeout) {
  return with_deadline(parent, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(
                                   detail::nanotime_after(std::max<std::int64_t>(0, timeout.count())))));
}

namespace {

// A sleep that the context's cancellation can cut short: one timer and one CancelHook on
// the sleeper's stack, no done channel. Whichever fires first readies the sleeper; the
// other finds `woken` taken and does nothing.
struct ContextSleep {
  detail::Timer timer;
  detail::CancelHook hook;
  CancelNode* node = nullptr;
  detail::G* g = nullptr;
  std::atomic<bool> woken{false};
  std::atomic<bool> by_timer{false};
};

void context_sleep_fire(detail::Timer* t) {
  auto* s = static_cast<ContextSleep*>(t->arg);
  if (s->woken.exchange(true, std::memory_order_acq_rel)) return;
  s->by_timer.store(true, std::memory_order_release);
  detail::ready(s->g);
}

void context_sleep_cancelled(detail::CancelHook* h) {
  auto* s = static_cast<ContextSleep*>(h->arg);
  if (!s->woken.exchange(true, std::memory_order_acq_rel)) detail::ready(s->g);
}

// On the scheduler stack, the sleeper already marked waiting. The hook is linked and
// the timer armed under the node's lock: a cancel cannot run the hook before both are
// in place, and a timer that fires at once readies a sleeper whose unwatch then waits
// for this lock, so nothing here touches the sleeper's stack after the unlock.
bool context_sleep_commit(detail::G*, void* arg) {
  auto* s = static_cast<ContextSleep*>(arg);
  CancelNode* c = s->node;
  c->lock.lock();
  if (c->err.load(std::memory_order_relaxed) != 0) {
    c->lock.unlock();
    return false;  // cancelled meanwhile: the sleeper resumes at once
  }
  detail::link_hook(c, &s->hook);
  const std::int64_t wake = detail::timer_add(&s->timer);
  c->lock.unlock();
  detail::timer_wake(wake);  // after the unlock: waking may start a thread
  return true;
}

}  // namespace

std::error_code sleep(std::chrono::nanoseconds d, const Context& ctx) {
  if (auto e = ctx.err()) return e;
  if (!ctx.can_cancel()) {
    goro::sleep(d);
    return {};
  }
  detail::G* g = detail::current_g();
  if (g == nullptr || d.count() <= 0) {
    if (select(recv_case(ctx.done()), timeout_case(d)) == select_timeout) return {};
    return ctx.err();
  }
  ContextSleep s;
  s.node = ContextAccess::node(ctx)->cancel;
  s.g = g;
  s.timer.when = detail::nanotime_after(d.count());
  s.timer.fire = context_sleep_fire;
  s.timer.arg = &s;
  s.hook.fn = context_sleep_cancelled;
  s.hook.arg = &s;
  {
    detail::RuntimeScope scope;
    detail::park(context_sleep_commit, &s, detail::WaitReason::sleep);
  }
  // Neither may run once these return: the hook is unlinked under the node's lock (or
  // was never linked), and timer_stop waits for a fire in progress.
  detail::context_unwatch(&s.hook);
  detail::timer_stop(&s.timer);
  if (s.by_timer.load(std::memory_order_acquire)) return {};
  return ctx.err();  // woken by the cancel, or cancelled before the commit
}

}  // namespace goro
