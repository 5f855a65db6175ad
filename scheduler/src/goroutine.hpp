// The goroutine's life (goroutine.cpp): creation and start are declared in
// detail/runtime.hpp (new_g, start_g); here is what the scheduler needs besides.
#pragma once

#include "sched.hpp"

namespace goro::detail {

// Frees g, whose function returned: caches it (with its stack) on pp for reuse, or
// releases a stack of a non-default size. pp's owner only.
void gfput(P* pp, G* g);

// Shutdown: releases the stack of every G ever created and empties the free lists.
// Returns whether arenas must stay mapped (ASan builds keep abandoned goroutines'
// stacks for LeakSanitizer to scan).
bool release_all_goroutines();

}  // namespace goro::detail
