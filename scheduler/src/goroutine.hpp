// The goroutine's life (goroutine.cpp): creation and start are declared in
// detail/runtime.hpp (new_g, start_g); here is what the scheduler needs besides.
#pragma once

#include <cstddef>
#include <string_view>

#include "sched.hpp"

namespace goro::detail {

// Frees g, whose function returned: caches it (with its stack) on pp or the global
// list for reuse, or releases a stack of a non-default size. pp's owner only.
void gfput(P* pp, G* g);

// Releases the stacks of up to `most` (at most 64) dead Gs of the global free list,
// the longest unused first, leaving `keep` there; returns how many. The free lists keep
// a dead G's stack, with every page its goroutine touched, for reuse, which a burst of
// spawns wants (skynet's million goroutines run 4x slower without it) and a burst of
// exits that no spawns follow does not (10,000 keep-alive connections going idle would
// leave 10,000 touched stacks cached). See goro::return_freed_memory_soon (memory_return.cpp).
std::size_t release_free_gs(std::size_t keep, std::size_t most);

// A new goroutine that is to run fn(arg), made as goro::go makes one (stack_size and
// name as in GoOptions) but left waiting instead of queued: its waker readies it. For
// the netpoller, which starts a goroutine when a descriptor armed with
// poll_start_on_read becomes readable.
G* new_waiting_g(void (*fn)(void*), void* arg, std::size_t stack_size, std::string_view name);

// Calls fn(g, arg) for every G ever created (dead ones included) under the lock of
// that list: new stacks wait meanwhile. For goroutine dumps.
void for_each_g(void (*fn)(G* g, void* arg), void* arg);

// Makes SIGQUIT print a goroutine dump and exit (dump.cpp), unless the program handles
// or ignores SIGQUIT already; uninstall at the end of the run puts the default back.
void install_sigquit_dump();
void uninstall_sigquit_dump();

// Shutdown: releases the stack of every G ever created, except those still in use by
// threads run_main abandoned, and empties the free lists. Returns whether arenas must
// stay mapped (for those stacks; ASan builds also keep parked goroutines' stacks for
// LeakSanitizer to scan).
bool release_all_goroutines();

}  // namespace goro::detail
