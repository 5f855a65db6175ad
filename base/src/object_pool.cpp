#include <goro/base/object_pool.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

namespace goro {
namespace {

#if !defined(GORO_ASAN)
constexpr std::size_t kGranule = 16;
constexpr std::size_t kClasses = kMaxPooled / kGranule;
constexpr std::size_t kChunkBytes = 64 * 1024;

struct FreeObject {
  FreeObject* next;
};

// A std::mutex, not the runtime's Lock: like malloc, the pool is called from anywhere,
// under other locks too (poll_open holds its cache's mutex), so it must never enter the
// runtime, where a goroutine whose P was taken may park until one is free.
struct SizeClass {
  std::mutex lock;
  FreeObject* free = nullptr;  // (lock)
  char* next = nullptr;        // unused space in the newest chunk (lock)
  char* end = nullptr;
};

SizeClass classes[kClasses];

std::size_t class_of(std::size_t size) { return (size + kGranule - 1) / kGranule - 1; }

[[noreturn]] void out_of_memory() {
  std::fprintf(stderr, "goro: cannot map memory for connection objects: %s\n",
               std::strerror(errno));
  std::abort();
}
#endif

}  // namespace

#if defined(GORO_ASAN)

void* pool_alloc(std::size_t size) { return ::operator new(size); }
void pool_free(void* p, std::size_t size) noexcept {
  (void)size;
  ::operator delete(p);
}

#else

void* pool_alloc(std::size_t size) {
  if (size == 0 || size > kMaxPooled) std::abort();
  SizeClass& c = classes[class_of(size)];
  const std::size_t bytes = (class_of(size) + 1) * kGranule;
  c.lock.lock();
  if (FreeObject* f = c.free) {
    c.free = f->next;
    c.lock.unlock();
    return f;
  }
  if (c.next == nullptr || c.next + bytes > c.end) {
    void* chunk = mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (chunk == MAP_FAILED) {
      c.lock.unlock();
      out_of_memory();
    }
    c.next = static_cast<char*>(chunk);
    c.end = c.next + kChunkBytes;
  }
  void* p = c.next;
  c.next += bytes;
  c.lock.unlock();
  return p;
}

void pool_free(void* p, std::size_t size) noexcept {
  if (p == nullptr) return;
  SizeClass& c = classes[class_of(size)];
  auto* f = static_cast<FreeObject*>(p);
  c.lock.lock();
  f->next = c.free;
  c.free = f;
  c.lock.unlock();
}

#endif

}  // namespace goro
