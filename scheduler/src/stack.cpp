#include "stack.hpp"

#include <goro/scheduler/detail/runtime.hpp>

#include "sched.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(GORO_ASAN)
extern "C" void __asan_unpoison_memory_region(void const volatile* addr, std::size_t size);
#endif

namespace goro::detail {
namespace {

constexpr std::size_t kArenaSlots = 256;

struct Arena {
  char* base;
  std::size_t size;
};

// Guards the arena list and the free-slot cursor. Only taken when a brand new stack is
// needed (the G free lists serve the common case), so a std::mutex is fine here.
std::mutex arena_mu;
std::vector<Arena> arenas;
char* arena_next = nullptr;  // next unused slot in the newest arena
char* arena_end = nullptr;
std::size_t arena_slot_size = 0;
// Slots given back by stack_free (their pages released), by their lowest byte.
std::vector<char*> free_slots;

std::atomic<long> guarded_count{0};

long guard_budget() {
  static const long budget = [] {
    long max_maps = 65530;
    if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
      if (std::fscanf(f, "%ld", &max_maps) != 1) max_maps = 65530;
      std::fclose(f);
    }
    if (const char* e = std::getenv("GORO_STACK_GUARDS")) return std::atol(e);
    return max_maps / 8;
  }();
  return budget;
}

[[noreturn]] void out_of_memory(std::size_t size) {
  std::fprintf(stderr, "goro: cannot map a goroutine stack of %zu bytes: %s\n", size,
               std::strerror(errno));
  std::abort();
}

char* map_region(std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) out_of_memory(size);
  return static_cast<char*>(p);
}

// ASan keeps the shadow of memory that is unmapped: frames that a goroutine left
// poisoned (one that never returned, like a runtime's main goroutine, which exits from
// inside its own frame) would poison whatever is mapped at that address next, such as
// a stack of the next goro::run in the same process. Clear it before unmapping.
void forget_poison([[maybe_unused]] void* base, [[maybe_unused]] std::size_t size) {
#if defined(GORO_ASAN)
  __asan_unpoison_memory_region(base, size);
#endif
}

}  // namespace

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

Stack stack_alloc(std::size_t size, bool default_size) {
  const std::size_t page = page_size();
  size = (size + page - 1) & ~(page - 1);
  Stack s;
  if (!default_size || guarded_count.load(std::memory_order_relaxed) < guard_budget()) {
    guarded_count.fetch_add(1, std::memory_order_relaxed);
    const std::size_t guard = std::max(kGuardBytes, page);
    s.map_size = size + guard;
    s.map_base = map_region(s.map_size);
    if (mprotect(s.map_base, guard, PROT_NONE) != 0) out_of_memory(size);
    s.lo = s.map_base + guard;
    s.hi = s.lo + size;
    return s;
  }
  std::lock_guard<std::mutex> guard(arena_mu);
  const std::size_t slot = kRedZone + size;
  if (!free_slots.empty() && slot == arena_slot_size) {
    char* base = free_slots.back();
    free_slots.pop_back();
    s.arena = true;
    s.lo = base + kRedZone;
    s.hi = base + slot;
    return s;
  }
  if (arena_next == nullptr || arena_next + slot > arena_end || slot != arena_slot_size) {
    std::size_t bytes = page + slot * kArenaSlots;
    char* base = map_region(bytes);
    if (mprotect(base, page, PROT_NONE) != 0) out_of_memory(bytes);
    arenas.push_back({base, bytes});
    arena_next = base + page;
    arena_end = base + bytes;
    if (slot != arena_slot_size) free_slots.clear();  // of another size, never reused
    arena_slot_size = slot;
  }
  s.arena = true;
  s.lo = arena_next + kRedZone;
  s.hi = arena_next + slot;
  arena_next += slot;
  return s;
}

void stack_free(const Stack& s) {
  if (s.map_base == nullptr) {
    // An arena slot: its pages go back to the kernel (they read as zeros again, as the
    // red zone's canary must) and the slot to the next stack_alloc.
    char* base = s.lo - kRedZone;
    const auto bytes = static_cast<std::size_t>(s.hi - base);
    forget_poison(base, bytes);
    madvise(base, bytes, MADV_DONTNEED);
    std::lock_guard<std::mutex> guard(arena_mu);
    if (bytes == arena_slot_size) free_slots.push_back(base);
    return;
  }
  forget_poison(s.map_base, s.map_size);
  munmap(s.map_base, s.map_size);
  guarded_count.fetch_sub(1, std::memory_order_relaxed);
}

std::size_t release_unused_stack() noexcept {
  G* g = current_g();
  if (g == nullptr) return 0;
  const std::size_t page = page_size();
  // Below this frame, with room for madvise's own frames and a signal's below that:
  // they run on this stack while it is released.
  char here;
  const auto top = reinterpret_cast<std::uintptr_t>(&here) - 8 * 1024;
  const auto lo = reinterpret_cast<std::uintptr_t>(g->stack.lo);
  const std::uintptr_t end = top & ~(page - 1);
  if (end <= lo) return 0;
  if (madvise(g->stack.lo, end - lo, MADV_DONTNEED) != 0) return 0;
  return end - lo;
}

void stack_release_all() {
  std::lock_guard<std::mutex> guard(arena_mu);
  for (const Arena& a : arenas) {
    forget_poison(a.base, a.size);
    munmap(a.base, a.size);
  }
  arenas.clear();
  free_slots.clear();
  arena_next = arena_end = nullptr;
}

bool stack_canary_ok(const Stack& s) {
  // The canary is the top of the red zone: all zero unless something wrote below lo.
  const auto* words = reinterpret_cast<const std::uint64_t*>(s.lo - kCanaryBytes);
  std::uint64_t any = 0;
  for (std::size_t i = 0; i < kCanaryBytes / 8; ++i) any |= words[i];
  return any == 0;
}

bool stack_is_guard_fault(const Stack& s, const void* addr) {
  const char* a = static_cast<const char*>(addr);
  const std::size_t below = s.arena ? kRedZone : std::max(kGuardBytes, page_size());
  return a < s.lo && a >= s.lo - below - page_size();
}

}  // namespace goro::detail
