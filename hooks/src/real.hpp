// The libc functions the hooks stand in front of, called "next": the definition the
// dynamic linker would have bound the call to without the hooks.
//
// Each is resolved on its first use with dlsym(RTLD_NEXT, name) and kept in an atomic
// pointer; two threads racing to resolve one store the same value. dlsym may allocate
// (calloc, for dlerror's buffer), which is harmless here: the hooks never stand in front
// of the allocator, so no hook runs inside a resolution.
//
// Under a sanitizer the executable also holds the sanitizer's interceptor of the same
// name, a weak symbol our strong definition overrides. The next function is then the
// interceptor (`__interceptor_<name>`) when there is one, so that ASan still checks the
// buffers and TSan still sees the synchronisation that passes through descriptors.
#pragma once

#include <atomic>

namespace goro::hooks::detail {

// The address of the next definition of name, or of its sanitizer interceptor. Ends
// the process with a message when there is none (a libc without the function).
void* resolve_next(const char* name) noexcept;

template <class Fn>
class Next {
 public:
  explicit constexpr Next(const char* name) noexcept : name_(name) {}
  Next(const Next&) = delete;
  Next& operator=(const Next&) = delete;

  template <class... Args>
  auto operator()(Args... args) const noexcept {
    return get()(args...);
  }

  Fn* get() const noexcept {
    // Acquire pairs with the release below: the function's code is in place already
    // (it was loaded before dlsym found it), so relaxed would do; acquire costs nothing
    // on x86 and states the intent.
    Fn* fn = fn_.load(std::memory_order_acquire);
    if (fn == nullptr) [[unlikely]] {
      fn = reinterpret_cast<Fn*>(resolve_next(name_));
      fn_.store(fn, std::memory_order_release);
    }
    return fn;
  }

 private:
  const char* const name_;
  mutable std::atomic<Fn*> fn_{nullptr};
};

}  // namespace goro::hooks::detail
