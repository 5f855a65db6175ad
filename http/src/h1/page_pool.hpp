// Page-sized buffers whose memory an idle connection can give back to the kernel: a
// buffer from new[] that is freed stays in malloc's free lists and in the process's
// RSS; a page from this pool can be released with madvise and comes back zeroed, on
// first touch, when it is used again.
#pragma once

#include <cstddef>
#include <memory>

namespace goro::http::detail {

inline constexpr std::size_t kPoolPage = 4096;

// A page-aligned buffer of kPoolPage bytes, contents unspecified. Thread-safe.
char* page_alloc();
// Returns p to the pool; with release, its memory is given back to the kernel first
// (one madvise call).
void page_free(char* p, bool release) noexcept;

// Owns a buffer from page_alloc() (pooled) or new[] (any other size).
struct BufferDeleter {
  bool pooled = false;
  void operator()(char* p) const noexcept {
    if (pooled) {
      page_free(p, false);
    } else {
      delete[] p;
    }
  }
};
using Buffer = std::unique_ptr<char[], BufferDeleter>;

// A buffer of size bytes: from the pool when size is kPoolPage.
inline Buffer make_buffer(std::size_t size) {
  if (size == kPoolPage) return Buffer(page_alloc(), BufferDeleter{true});
  return Buffer(new char[size], BufferDeleter{false});
}

// Frees b, giving a pooled page's memory back to the kernel.
inline void release_buffer_memory(Buffer& b) noexcept {
  if (b && b.get_deleter().pooled) {
    page_free(b.release(), true);
  } else {
    b.reset();
  }
}

}  // namespace goro::http::detail
