// Goroutine stacks.
//
// A stack is mmap'd with MAP_NORESERVE and committed lazily by the kernel, so a parked
// goroutine costs the pages it has touched (usually one), not its virtual size.
//
// Overflow detection, and why it has two forms. One mapping plus a guard page per stack
// costs two kernel VMAs, and the default vm.max_map_count (65,530) would then cap the
// runtime near 32k goroutines. So:
//  - guarded stacks: the first max_map_count/8 stacks (about 8k on default settings),
//    and every stack with a non-default size, get their own mapping with a PROT_NONE
//    guard region below (kGuardBytes, so that large frames cannot step over it). An overflow faults
//    on the guard page at once; the SIGSEGV handler (on an alternate signal stack) prints
//    "goroutine N: stack overflow" and aborts.
//  - arena stacks: beyond that budget, stacks of the default size are carved from
//    arenas of 256 slots (one mapping and one guard page per arena). Each slot has a
//    16 KiB red zone below the usable stack that is never written in correct operation,
//    so it stays zero and uncommitted. At every switch away from a goroutine the runtime
//    checks that its stack pointer is inside the stack and records the lowest one seen
//    (the low-water mark). It reads the top of the red zone (the canary), which must
//    still be zero, when the goroutine exits and at every switch once the mark is within
//    8 KiB of the bottom. Either failure aborts with the same message. The canary is not
//    read at every switch of a shallow goroutine because the first read of an untouched
//    page is a page fault, a noticeable share of the cost of parking a fresh goroutine;
//    the exit check pays that fault once per fresh stack (recycled stacks keep the
//    mapping), and catches an overflow that came and went between two switches before
//    the stack is reused. An overflow deeper than the red zone that never switches can
//    reach the slot below; it still faults at the arena's guard page at the latest. A
//    server keeps its hot goroutines on the pooled, guarded stacks: stacks are reused,
//    so the budget is only exceeded by programs with more than ~8k goroutines alive at
//    once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace goro::detail {

struct Stack {
  char* lo = nullptr;        // lowest usable byte
  char* hi = nullptr;        // one past the highest usable byte
  char* map_base = nullptr;  // own mapping (guarded stacks) or nullptr (arena slot)
  std::size_t map_size = 0;
  bool arena = false;
  std::size_t size() const { return static_cast<std::size_t>(hi - lo); }
};

inline constexpr std::size_t kRedZone = 16 * 1024;
// The PROT_NONE region below a guarded stack. One page would do for code that touches
// every page it grows into, but a frame larger than the guard (a local array; GCC and
// Clang probe large frames only with -fstack-clash-protection, which Debian leaves
// off) steps over it into whatever is mapped below, another goroutine's stack. 64 KiB
// catches frames up to that size; it costs address space only.
inline constexpr std::size_t kGuardBytes = 64 * 1024;
inline constexpr std::size_t kCanaryBytes = 64;

// Allocates a stack of `size` usable bytes (rounded up to pages). `default_size` says
// whether it may come from an arena. Aborts with a message if memory is exhausted.
Stack stack_alloc(std::size_t size, bool default_size);
// Releases a stack's memory: a guarded stack is unmapped; an arena slot's pages go
// back to the kernel and the slot to the next stack_alloc (its arena is unmapped only
// by stack_release_all).
void stack_free(const Stack& s);
// Releases every arena (runtime shutdown).
void stack_release_all();

// True if the stack pointer is inside the stack and, for arena stacks where sp is
// near the bottom or `exiting`, the red zone canary is intact.
bool stack_canary_ok(const Stack& s);
// `low_water` is the lowest stack pointer seen at a switch of this goroutine; updated.
inline bool stack_ok(const Stack& s, const void* sp, const char*& low_water, bool exiting) {
  const char* p = static_cast<const char*>(sp);
  if (p < s.lo || p > s.hi) return false;
  if (p < low_water) low_water = p;
  if (!s.arena || (!exiting && low_water - s.lo > 8 * 1024)) return true;
  return stack_canary_ok(s);
}

// Whether addr lies in the guard page or red zone below a stack of this process
// (used by the SIGSEGV handler to tell an overflow from another fault).
bool stack_is_guard_fault(const Stack& s, const void* addr);

std::size_t page_size();

}  // namespace goro::detail
