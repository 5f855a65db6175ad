// Machine context of a goroutine: the assembly switch (switch_<arch>.S), the layout of
// a new goroutine's first frame, and the sanitizer fiber annotations that keep ASan and
// TSan builds usable on goroutine stacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {
void goro_switch(void** save_sp, void* new_sp);
void goro_start();
}

#if defined(GORO_ASAN)
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, std::size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     std::size_t* size_old);
void __asan_unpoison_memory_region(void const volatile* addr, std::size_t size);
}
#endif
#if defined(GORO_TSAN)
extern "C" {
void* __tsan_get_current_fiber();
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_set_fiber_name(void* fiber, const char* name);
}
#endif

namespace goro::detail {

// Builds the first frame of a goroutine below `top` so that the first goro_switch to
// the returned stack pointer enters goro_start, which calls fn(arg).
inline void* make_context(void* top, void (*fn)(void*), void* arg) {
  auto t = reinterpret_cast<std::uintptr_t>(top) & ~std::uintptr_t{15};
#if defined(__x86_64__)
  // Slots popped by goro_switch: control words, r15, r14, r13, r12, rbx, rbp, then the
  // return address. After `ret` the stack pointer is 16-byte aligned, as goro_start
  // needs before its call.
  auto* sp = reinterpret_cast<std::uint64_t*>(t - 16 - 64);
  std::memset(sp, 0, 64);
  std::uint32_t control = 0x1F80;  // MXCSR default
  std::memcpy(sp, &control, 4);
  std::uint16_t x87 = 0x037F;  // x87 control word default
  std::memcpy(reinterpret_cast<char*>(sp) + 4, &x87, 2);
  sp[3] = reinterpret_cast<std::uint64_t>(fn);   // r13
  sp[4] = reinterpret_cast<std::uint64_t>(arg);  // r12
  sp[7] = reinterpret_cast<std::uint64_t>(&goro_start);
  return sp;
#elif defined(__aarch64__)
  auto* sp = reinterpret_cast<std::uint64_t*>(t - 176);
  std::memset(sp, 0, 176);
  sp[0] = reinterpret_cast<std::uint64_t>(arg);           // x19
  sp[1] = reinterpret_cast<std::uint64_t>(fn);            // x20
  sp[11] = reinterpret_cast<std::uint64_t>(&goro_start);  // x30
  return sp;
#else
#error "goro: unsupported architecture"
#endif
}

}  // namespace goro::detail
