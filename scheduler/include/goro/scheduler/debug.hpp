// goro::debug: what every goroutine is doing, as Go's goroutine dump shows it.
//
//   goroutine 42 [IO wait read fd 7, 3 minutes]:
//   goro::detail::park(...)+0x5c
//   goro::net::detail::NetFd::read(void*, unsigned long)+0x1a2
//   ...
//   created by goro::http::(anonymous namespace)::start_conn(...) in goroutine 5
//
// A parked goroutine's stack is read from the context it saved when it parked, with
// libunwind (through the binary's own symbol table: no debug information or exported
// symbols needed), while a scan mark keeps it from being resumed during the read: a
// waker that comes then waits those microseconds. A goroutine that is running, in a
// blocking call, or queued to run is shown with its state and without a stack, since its
// stack cannot be read without stopping it (the dump says so). Nothing here costs
// anything while no dump is taken, beyond a coarse clock read when a goroutine parks.
//
// SIGQUIT prints the full dump to stderr and ends the process with exit code 2, as Go
// does, unless the program asked for SIGQUIT with signal_notify.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace goro::debug {

struct Goroutine {
  std::uint64_t id = 0;
  std::string name;           // GoOptions::name ("http conn"), or empty
  std::string state{};        // "chan receive", "IO wait read fd 7", "running", ...
  std::int64_t waiting_ns = -1;  // how long it has been parked; -1 when not parked
  std::uint64_t parent_id = 0;   // the goroutine that started it (0: none)
  std::string created_by{};      // the function that called goro::go
  // Frames from the innermost, "function+0xoffset" (or the address); empty when the
  // stack was not read, and then stack_note says why.
  std::vector<std::string> frames{};
  std::vector<std::uintptr_t> pcs{};
  std::string stack_note{};
};

// Every live goroutine, by id. Callable from any thread while goro::run runs.
std::vector<Goroutine> goroutines();

// The dump as text. debug 2: every goroutine, one block each (Go's debug=2, what
// SIGQUIT prints); debug 1: goroutines with identical state and stack grouped, largest
// group first, each with its count (Go's debug=1), so 10,000 connection goroutines are
// one entry and a leak stands out.
std::string goroutine_dump(int debug = 2);
// The same as JSON: {"goroutines":[{"id":..,"name":..,"state":..,"waiting_seconds":..,
// "parent":..,"created_by":..,"frames":[..],"stack_note":..}, ...]}.
std::string goroutine_dump_json();

// Writes goroutine_dump(2) to out.
void dump(std::FILE* out);

// Records what the scheduler does for `window` (goroutines starting and stopping on
// each M and P, with why they stopped, readies, steals, blocking calls, hand-offs,
// preemptions, netpoll batches) and returns it as Chrome trace-event JSON, which
// ui.perfetto.dev opens: GORO_TRACE for a window, without a restart. Parks the calling
// goroutine for the window. Tracing costs each switch a few events while it is on;
// each thread that recorded keeps its 4 MiB buffer until goro::run returns.
std::string trace_json(std::chrono::nanoseconds window);

// The scheduler now: the GORO_SCHEDTRACE line ("SCHED 1234ms: gomaxprocs=4 idleprocs=3
// threads=6 spinningthreads=0 idlethreads=3 runqueue=0 [0 0 0 0]"), then one line per P
// with its counters (runs, steals, ...), and the process-wide ones.
std::string sched_text();
// The same as JSON.
std::string sched_json();

}  // namespace goro::debug
