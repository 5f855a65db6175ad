#include "page_pool.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace goro::http::detail {
namespace {

// Pages are carved from slabs mapped kSlabPages at a time and never unmapped; free
// pages are kept in a list outside them, so a released page stays untouched.
constexpr std::size_t kSlabPages = 256;

std::mutex pool_mu;
std::vector<char*> free_pages;  // (pool_mu)
char* slab_next = nullptr;      // (pool_mu)
char* slab_end = nullptr;       // (pool_mu)

}  // namespace

char* page_alloc() {
  std::lock_guard lock(pool_mu);
  if (!free_pages.empty()) {
    char* p = free_pages.back();
    free_pages.pop_back();
    return p;
  }
  if (slab_next == slab_end) {
    void* slab = mmap(nullptr, kSlabPages * kPoolPage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slab == MAP_FAILED) {
      std::fprintf(stderr, "goro/http: cannot map read buffers: %s\n", std::strerror(errno));
      std::abort();
    }
    slab_next = static_cast<char*>(slab);
    slab_end = slab_next + kSlabPages * kPoolPage;
  }
  char* p = slab_next;
  slab_next += kPoolPage;
  return p;
}

void page_free(char* p, bool release) noexcept {
  if (p == nullptr) return;
  if (release) madvise(p, kPoolPage, MADV_DONTNEED);
  std::lock_guard lock(pool_mu);
  free_pages.push_back(p);
}

}  // namespace goro::http::detail
