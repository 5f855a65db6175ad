// resolve_next: see real.hpp.

#include "real.hpp"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace goro::hooks::detail {

namespace {

// A message on stderr without stdio (which may be what is being resolved).
void say(const char* s) noexcept {
  [[maybe_unused]] long r = ::syscall(SYS_write, 2, s, std::strlen(s));
}

}  // namespace

void* resolve_next(const char* name) noexcept {
#if defined(GORO_ASAN) || defined(GORO_TSAN)
  char interceptor[64] = "__interceptor_";
  if (std::strlen(name) < sizeof interceptor - std::strlen(interceptor)) {
    std::strcat(interceptor, name);
    if (void* fn = ::dlsym(RTLD_DEFAULT, interceptor)) return fn;
  }
#endif
  if (void* fn = ::dlsym(RTLD_NEXT, name)) return fn;
  say("goro hooks: no libc function ");
  say(name);
  say(" to call\n");
  std::abort();
}

}  // namespace goro::hooks::detail
