// Memory for small objects that live as long as a connection: its poll descriptor, its
// socket, a server's state for it (internal; see detail/runtime.hpp).
//
// Kept apart from malloc's heap on purpose. A connection's short-lived allocations (a
// request's parser and buffers, a handler's strings) come and go between these
// long-lived ones; were both in one heap, each page would keep a live object or two
// among freed chunks, and the memory an idle connection gave back would stay in the
// process (10,000 idle connections held 1.3 KiB of freed heap each). Here objects of
// one size class sit packed in their own pages, and malloc's heap, with nothing
// long-lived left in it, can return what an idle connection freed.
//
// Size classes of 16 bytes up to kMaxPooled; freed objects are reused by the next of
// their class and the pages are never unmapped (peak use stays mapped). Thread-safe.
// Builds with AddressSanitizer use operator new instead, so that it sees every object.
#pragma once

#include <cstddef>

namespace goro::detail {

inline constexpr std::size_t kMaxPooled = 512;

// size <= kMaxPooled; aligned to 16.
void* pool_alloc(std::size_t size);
// p from pool_alloc(size), same size.
void pool_free(void* p, std::size_t size) noexcept;

// Asks for memory the process holds unused to go back to the kernel about a second
// from now, on a goroutine (at most one waits at a time): for a caller that has just
// let much of it go (connections going idle, freeing their buffers and goroutines).
// Then the stacks of dead goroutines past 64 are released, and malloc_trim returns
// malloc's free memory: glibc gives back free memory from the middle of its heaps only
// when asked, and the call walks every heap under its lock (milliseconds for tens of
// megabytes), so it is made at most once a second, inside goro::blocking. Outside a
// run nothing happens; without glibc only the stacks are released.
void return_freed_memory_soon();

// A base that gives a class pooled operator new and delete.
struct Pooled {
  static void* operator new(std::size_t size) { return pool_alloc(size); }
  static void operator delete(void* p, std::size_t size) noexcept { pool_free(p, size); }
};

}  // namespace goro::detail
