// Giving memory that idle connections let go back to the kernel (internal; see
// detail/runtime.hpp).
#pragma once

namespace goro::detail {

// Asks for memory the process holds unused to go back to the kernel about a second
// from now, on a goroutine (at most one waits at a time): for a caller that has just
// let much of it go (connections going idle, freeing their buffers and goroutines).
// Then the stacks of dead goroutines past 64 are released, and malloc_trim returns
// malloc's free memory: glibc gives back free memory from the middle of its heaps only
// when asked, and the call walks every heap under its lock (milliseconds for tens of
// megabytes), so it is made at most once a second, inside goro::blocking. Outside a
// run nothing happens; without glibc only the stacks are released.
void return_freed_memory_soon();

}  // namespace goro::detail
