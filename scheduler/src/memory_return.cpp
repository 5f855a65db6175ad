#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>

#include "goroutine.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <atomic>
#include <chrono>
#include <cstddef>

namespace goro {
namespace {

std::atomic<bool> trim_pending{false};
// Dead goroutines whose stacks return_freed_memory_soon leaves cached.
constexpr std::size_t kKeptFreeGs = 64;

}  // namespace

void return_freed_memory_soon() {
  if (detail::current_g() == nullptr || trim_pending.load(std::memory_order_relaxed)) return;
  if (trim_pending.exchange(true, std::memory_order_acq_rel)) return;
  goro::go(goro::GoOptions{.name = "memory return"}, [] {
    goro::sleep(std::chrono::milliseconds(50));
    // Cleared first: memory freed meanwhile asks for the next round.
    trim_pending.store(false, std::memory_order_release);
    while (detail::release_free_gs(kKeptFreeGs, 64) == 64) goro::yield();
#if defined(__GLIBC__)
    goro::blocking([] { return malloc_trim(0); });
#endif
  });
}

std::size_t release_unused_stack() noexcept { return detail::release_unused_stack(); }

}  // namespace goro
