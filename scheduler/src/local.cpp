// goro::local: each goroutine's values in a short list hung off its G (G::locals), or,
// off a goroutine, the thread's own list.

#include <goro/scheduler/local.hpp>

#include <goro/scheduler/detail/runtime.hpp>

#include <atomic>
#include <vector>

#include "sched.hpp"

namespace goro::detail {

struct LocalSlot {
  std::size_t key;
  void* value;
  void (*destroy)(void*);
};

struct LocalSlots {
  std::vector<LocalSlot> slots;
  ~LocalSlots() {
    // Last made, first destroyed; a destructor may itself use a local (made anew).
    while (!slots.empty()) {
      LocalSlot s = slots.back();
      slots.pop_back();
      s.destroy(s.value);
    }
  }
};

namespace {

std::atomic<std::size_t> next_key{1};

LocalSlots*& slots_of_this() {
  G* g = current_g();
  if (g != nullptr) return g->locals;
  thread_local LocalSlots* thread_slots = nullptr;
  thread_local struct Reaper {
    ~Reaper() {
      delete thread_slots;
      thread_slots = nullptr;
    }
  } reaper;
  (void)reaper;
  return thread_slots;
}

}  // namespace

std::size_t local_new_key() noexcept { return next_key.fetch_add(1, std::memory_order_relaxed); }

void* local_find(std::size_t key) noexcept {
  LocalSlots* s = slots_of_this();
  if (s == nullptr) return nullptr;
  for (const LocalSlot& slot : s->slots)
    if (slot.key == key) return slot.value;
  return nullptr;
}

void local_store(std::size_t key, void* value, void (*destroy)(void*)) {
  LocalSlots*& s = slots_of_this();
  if (s == nullptr) s = new LocalSlots;
  s->slots.push_back({key, value, destroy});
}

void local_release(G* g) {
  LocalSlots* s = g->locals;
  if (s == nullptr) return;
  delete s;  // empties the list, values that the destructors make included
  g->locals = nullptr;
}

}  // namespace goro::detail
