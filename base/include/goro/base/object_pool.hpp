// goro::Pooled: memory for small objects that live as long as a connection: its poll
// descriptor, its socket, a server's state for it.
//
//   class Session : public goro::Pooled { ... };   // new/delete go through the pool
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

namespace goro {

inline constexpr std::size_t kMaxPooled = 512;

// size <= kMaxPooled; aligned to 16.
void* pool_alloc(std::size_t size);
// p from pool_alloc(size), same size.
void pool_free(void* p, std::size_t size) noexcept;

// A base that gives a class pooled operator new and delete.
struct Pooled {
  static void* operator new(std::size_t size) { return pool_alloc(size); }
  static void operator delete(void* p, std::size_t size) noexcept { pool_free(p, size); }
};

}  // namespace goro
