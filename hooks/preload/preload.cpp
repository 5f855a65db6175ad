// libgoro_hooks.so only: whether the program it was preloaded into has goro's runtime.
//
// The preloaded library holds the hooks and none of goro: its calls into the runtime
// (goro::detail::current_g, net::FdWatch, goro::sleep, ...) are undefined symbols, bound
// lazily, on first call, to the program's own definitions, so there is one runtime, the
// program's. A program exports them when it was linked with -rdynamic and contains
// them (the target goro::hooks_preloadable does both). Binding one that is missing would
// end the process at the first call, so when the library is loaded it looks up every
// goro symbol it needs (its own undefined dynamic symbols) in the program; if one is
// missing, the hooks stay off (every call is libc's) and a line on stderr names it.
// Any process (a shell, a server the tests start) may load the library, so without
// goro it stays quiet and off.

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace goro::hooks::detail {

namespace {

std::atomic<bool> runtime_found{false};

void say(const char* s) noexcept {
  [[maybe_unused]] long r = ::syscall(SYS_write, 2, s, std::strlen(s));
}

bool is_goro_symbol(const char* name) noexcept {
  return std::strncmp(name, "_ZN4goro", 8) == 0 || std::strncmp(name, "_ZNK4goro", 9) == 0;
}

bool is_hooks_symbol(const char* name) noexcept {
  return std::strncmp(name, "_ZN4goro5hooks", 14) == 0 ||
         std::strncmp(name, "_ZNK4goro5hooks", 15) == 0;
}

template <class T>
const T* dynamic_address(const link_map* map, ElfW(Addr) value) noexcept {
  // glibc relocates these entries of a library's dynamic section in place where the
  // section is writable (x86-64, AArch64); add the load address if it has not.
  return reinterpret_cast<const T*>(value < map->l_addr ? value + map->l_addr : value);
}

// Looks up every undefined goro symbol of this library in the process. Counts the
// symbols through DT_HASH (hooks/CMakeLists.txt links with --hash-style=both).
void find_runtime() noexcept {
  Dl_info info;
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&find_runtime), &info, reinterpret_cast<void**>(&map),
                RTLD_DL_LINKMAP) == 0 ||
      map == nullptr)
    return;
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Word)* hash = nullptr;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symbols = dynamic_address<ElfW(Sym)>(map, d->d_un.d_ptr);
    if (d->d_tag == DT_STRTAB) names = dynamic_address<char>(map, d->d_un.d_ptr);
    if (d->d_tag == DT_HASH) hash = dynamic_address<ElfW(Word)>(map, d->d_un.d_ptr);
  }
  if (symbols == nullptr || names == nullptr || hash == nullptr) {
    say("goro hooks: libgoro_hooks.so has no DT_HASH; hooks off\n");
    return;
  }
  if (::dlsym(RTLD_DEFAULT, "_ZN4goro6detail9current_gEv") == nullptr) return;  // no goro
  const ElfW(Word) count = hash[1];  // nchain: the number of symbols
  for (ElfW(Word) i = 1; i < count; ++i) {
    const char* name = names + symbols[i].st_name;
    if (symbols[i].st_shndx != SHN_UNDEF || !is_goro_symbol(name) || is_hooks_symbol(name))
      continue;
    if (::dlsym(RTLD_DEFAULT, name) == nullptr) {
      say("goro hooks: the program does not export ");
      say(name);
      say(" (link it with goro::hooks_preloadable); hooks off\n");
      return;
    }
  }
  runtime_found.store(true, std::memory_order_release);
}

[[gnu::constructor]] void check_program() { find_runtime(); }

}  // namespace

bool preload_runtime_found() noexcept { return runtime_found.load(std::memory_order_acquire); }

}  // namespace goro::hooks::detail
