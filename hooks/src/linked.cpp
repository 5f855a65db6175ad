// goro_hooks_linked: the one symbol a program linking goro::hooks is made to need
// (hooks/CMakeLists.txt passes --undefined=goro_hooks_linked to the linker). It names
// an anchor in every object of the static library, so the linker takes them all, and
// with them every hook, though the program calls none of them by name. Naming the hooks
// themselves (read, poll) would not do: a sanitizer's runtime defines those already
// (weakly), and a linker does not take an archive's object for a symbol it has.

#include <goro/hooks/hooks.hpp>

extern "C" {
extern const int goro_hooks_object_io;       // io_hooks.cpp
extern const int goro_hooks_object_fd;       // fd_hooks.cpp
extern const int goro_hooks_object_poll;     // poll_hooks.cpp
extern const int goro_hooks_object_sleep;    // sleep_hooks.cpp
extern const int goro_hooks_object_resolve;  // resolve_hooks.cpp
extern const int goro_hooks_object_fortify;  // fortify_hooks.cpp

extern const int* const goro_hooks_linked[];
const int* const goro_hooks_linked[] = {
    &goro_hooks_object_io,    &goro_hooks_object_fd,      &goro_hooks_object_poll,
    &goro_hooks_object_sleep, &goro_hooks_object_resolve, &goro_hooks_object_fortify,
};
}

namespace goro::hooks {

bool linked() noexcept { return *goro_hooks_linked[0] == 1; }

}  // namespace goro::hooks
