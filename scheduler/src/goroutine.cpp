// The goroutine's life: created (new_g, start_g), run from g_main, and, once its
// function returns, freed to a per-P cache or a global free list with its stack, for
// the next new_g to take. Every G ever created is also in one list (allgs), so that
// shutdown can release every stack.

#include "goroutine.hpp"

#include <goro/scheduler/detail/runtime.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

#include "machine_context.hpp"
#include "queues.hpp"
#include "switch.hpp"
#include "thread.hpp"
#include "trace.hpp"

#if defined(GORO_ASAN)
#include <sanitizer/lsan_interface.h>
#endif

namespace goro::detail {
namespace {

// Every G ever created, so that shutdown can release their stacks (allg_lock).
Lock allg_lock;
std::vector<G*> allgs;

// Every goroutine starts here, on its own stack.
void g_main(void* arg) {
  G* g = static_cast<G*>(arg);
#if defined(GORO_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  after_resume(g->m);
  *g->m->errno_slot = 0;
  g->in_runtime = 0;
  try {
    g->entry(g->closure);
    local_release(g);  // its goro::local values, on the goroutine, as it returns
  } catch (const std::exception& e) {
    std::fprintf(stderr, "goroutine %llu: uncaught exception: %s\n",
                 static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "goroutine %llu: uncaught exception: (not a std::exception)\n",
                 static_cast<unsigned long long>(g->id.load(std::memory_order_relaxed)));
    std::abort();
  }
  {
    // A safe point before exiting: if the preemption signal detached our P while the
    // body ran, get a P back first, so the M never leaves a G with stale syscall state.
    RuntimeScope scope;
    g->in_runtime++;
  }
  switch_to_g0(g, SwitchReason::exit);
  fatal("a dead goroutine was resumed");
}

}  // namespace

namespace {

// Forgets g and gives its stack back (unmapped, or its arena slot's pages released).
// g is dead and no M's curg; a thread that read it as curg before may still use it, so
// the stack goes back only once no such reader is left (the G lives on it: sysmon read
// a released G's in_runtime and faulted, under ASan in the load smoke's idle-ws).
void release_g(G* g) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  while (sched.curg_readers.load(std::memory_order_seq_cst) != 0) sched_yield();
  allg_lock.lock();
  allgs[g->allg_index] = allgs.back();
  allgs[g->allg_index]->allg_index = g->allg_index;
  allgs.pop_back();
  allg_lock.unlock();
#if defined(GORO_TSAN)
  __tsan_destroy_fiber(g->tsan_fiber);
#endif
  Stack s = g->stack;
  stack_free(s);
}

}  // namespace

void gfput(P* pp, G* g) {
  g->status.store(GStatus::dead, std::memory_order_relaxed);
  if (g->stack.size() != sched.default_stack) {
    release_g(g);
    return;
  }
  pp->gfree[pp->gfree_count++] = g;
  if (pp->gfree_count == 64) {
    sched.gfree_lock.lock();
    while (pp->gfree_count > 32) sched.gfree.push(pp->gfree[--pp->gfree_count]);
    sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
    sched.gfree_lock.unlock();
  }
}

std::size_t release_free_gs(std::size_t keep, std::size_t most) {
  RuntimeScope scope;
  G* batch[64];
  std::size_t n = 0;
  most = std::min(most, std::size(batch));
  sched.gfree_lock.lock();
  // The longest unused first: the head of the list.
  while (n < most && sched.gfree.size() > keep) batch[n++] = sched.gfree.pop();
  sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
  sched.gfree_lock.unlock();
  for (std::size_t i = 0; i < n; ++i) release_g(batch[i]);
  return n;
}

namespace {

// A free G with a default-size stack, from pp's cache (refilled from the global list),
// or from the global list when pp is null; nullptr when there is none.
G* gfget(P* pp) {
  if (pp == nullptr) {
    sched.gfree_lock.lock();
    G* g = sched.gfree.empty() ? nullptr : sched.gfree.pop_back();
    sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
    sched.gfree_lock.unlock();
    return g;
  }
  if (pp->gfree_count == 0 && sched.gfree_count.load(std::memory_order_relaxed) > 0) {
    sched.gfree_lock.lock();
    while (pp->gfree_count < 32 && !sched.gfree.empty())
      pp->gfree[pp->gfree_count++] = sched.gfree.pop_back();
    sched.gfree_count.store(static_cast<int>(sched.gfree.size()), std::memory_order_relaxed);
    sched.gfree_lock.unlock();
  }
  return pp->gfree_count > 0 ? pp->gfree[--pp->gfree_count] : nullptr;
}

std::uint64_t next_goid(P* pp) {
  if (pp == nullptr) return sched.goid_gen.fetch_add(1, std::memory_order_relaxed) + 1;
  if (pp->goid_next == pp->goid_end) {
    constexpr std::uint64_t batch = 16;
    pp->goid_next = sched.goid_gen.fetch_add(batch, std::memory_order_relaxed) + 1;
    pp->goid_end = pp->goid_next + batch;
  }
  return pp->goid_next++;
}

}  // namespace

G* new_g(std::size_t stack_size, std::string_view name, std::size_t closure_size,
         std::size_t closure_align, void** closure_slot) {
  // A goroutine belongs to a running runtime: before goro::run, or after it returned,
  // it would be dropped or handed a stack already unmapped.
  if (!sched.running.load(std::memory_order_acquire))
    fatal("goro::go called while no goro::run is running");
  RuntimeScope scope;
  M* m = this_m();
  P* pp = m ? m->p : nullptr;
  const std::size_t page = page_size();
  std::size_t want =
      stack_size == 0 ? sched.default_stack : ((stack_size + page - 1) & ~(page - 1));
  if (want < 16 * 1024) want = 16 * 1024;
  G* g = nullptr;
  if (want == sched.default_stack) g = gfget(pp);
#if defined(GORO_ASAN)
  // The previous goroutine on this stack may have left poisoned shadow behind.
  if (g)
    __asan_unpoison_memory_region(
        g->stack.lo, static_cast<std::size_t>(reinterpret_cast<char*>(g) - g->stack.lo));
#endif
  if (g == nullptr) {
    Stack s = stack_alloc(want, want == sched.default_stack);
    void* top = s.hi - sizeof(G);
    top = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(top) & ~std::uintptr_t{63});
    g = ::new (top) G();
    g->stack = s;
#if defined(GORO_TSAN)
    g->tsan_fiber = __tsan_create_fiber(0);
#endif
    allg_lock.lock();
    g->allg_index = allgs.size();
    allgs.push_back(g);
    allg_lock.unlock();
  }
  g->id.store(next_goid(pp), std::memory_order_relaxed);
  g->link = nullptr;
  g->m = nullptr;
  g->low_water = g->stack.hi;
  g->eh = EhState{};
  g->in_runtime = 1;  // not preemptible until g_main has finished switching in
  g->preempt.store(false, std::memory_order_relaxed);
  g->wait_reason = WaitReason::none;
  g->saved_errno = 0;
  g->parent_id = g_id(m ? m->curg.load(std::memory_order_relaxed) : nullptr);
  // new_g is called from goro::go, which is always inlined: this is the function that
  // called go().
  g->creator_pc = __builtin_return_address(0);
  g->wait_fd = -1;
  g->locals = nullptr;
  std::size_t len = std::min(name.size(), sizeof g->name - 1);
  // Never cut a UTF-8 character in two (the tracer writes names into JSON).
  while (len < name.size() && len > 0 && (static_cast<unsigned char>(name[len]) & 0xC0) == 0x80)
    len--;
  if (len != 0) std::memcpy(g->name, name.data(), len);  // data() may be null
  g->name[len] = '\0';
  // The closure goes right below the G, the first frame right below the closure.
  auto top = reinterpret_cast<std::uintptr_t>(g);
  auto slot = (top - closure_size) & ~(static_cast<std::uintptr_t>(closure_align) - 1);
  if (slot - 1024 < reinterpret_cast<std::uintptr_t>(g->stack.lo))
    fatal("go: closure too large for the stack");
  g->closure = reinterpret_cast<void*>(slot);
  *closure_slot = g->closure;
  return g;
}

namespace {

struct StartClosure {
  void (*fn)(void*);
  void* arg;
};

// The part of starting g that start_g and new_waiting_g share: its first frame, and
// its count as a live goroutine, in status (runnable or waiting).
void make_startable(G* g, void (*entry)(void*), GStatus status) {
  g->entry = entry;
  g->sp = make_context(g->closure, &g_main, g);
  // release: a goroutine dump that sees it sees the fields new_g wrote.
  g->status.store(status, std::memory_order_release);
  sched.live_gs.fetch_add(1, std::memory_order_relaxed);
  trace_event(TraceKind::g_create, g->id.load(std::memory_order_relaxed), 0, g->name);
}

}  // namespace

G* new_waiting_g(void (*fn)(void*), void* arg, std::size_t stack_size, std::string_view name) {
  void* slot = nullptr;
  G* g = new_g(stack_size, name, sizeof(StartClosure), alignof(StartClosure), &slot);
  ::new (slot) StartClosure{fn, arg};
  g->creator_pc = reinterpret_cast<void*>(fn);
  g->wait_reason = WaitReason::io_read;
  make_startable(
      g,
      [](void* p) {
        auto* c = static_cast<StartClosure*>(p);
        c->fn(c->arg);
      },
      GStatus::waiting);
  return g;
}

void start_g(G* g, void (*entry)(void*)) {
  RuntimeScope scope;
  make_startable(g, entry, GStatus::runnable);
  put_runnable_and_wake(g);
}

void for_each_g(void (*fn)(G* g, void* arg), void* arg) {
  allg_lock.lock();
  for (G* g : allgs) fn(g, arg);
  allg_lock.unlock();
}

bool release_all_goroutines() {
  allg_lock.lock();
  bool keep_arenas = false;
  for (G* g : allgs) {
    // Running or in a blocking call now: on a thread run_main abandoned, which may go on
    // using this stack until the process ends. Kept, with its arena.
    if (GStatus st = g->status.load(); st == GStatus::running || st == GStatus::syscall) {
      keep_arenas |= g->stack.arena;
      continue;
    }
#if defined(GORO_ASAN)
    // An abandoned goroutine (parked when main returned) still references what it
    // allocated. Go's exit leaks it all; so do we in ASan builds, keeping the stack
    // mapped and telling LeakSanitizer to scan it, so only real leaks are reported.
    if (GStatus st = g->status.load(); st == GStatus::waiting || st == GStatus::runnable) {
      auto* sp = static_cast<char*>(g->sp);
      __lsan_register_root_region(sp, static_cast<std::size_t>(g->stack.hi - sp));
      keep_arenas |= g->stack.arena;
      continue;
    }
#endif
#if defined(GORO_TSAN)
    __tsan_destroy_fiber(g->tsan_fiber);
#endif
    // Arena slots go with their arenas (stack_release_all).
    if (!g->stack.arena) stack_free(g->stack);
  }
  allgs.clear();
  allg_lock.unlock();
  // The free lists point into the stacks just unmapped: empty them now, not at the next
  // run(), so nothing can take a G from them in between.
  sched.gfree_lock.lock();
  sched.gfree.clear();
  sched.gfree_count.store(0);
  sched.gfree_lock.unlock();
  return keep_arenas;
}

}  // namespace goro::detail
