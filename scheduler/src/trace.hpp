// The event tracer (GORO_TRACE=<file>): G/M/P transitions recorded in per-M ring
// buffers and written at exit as Chrome trace-event JSON, which Perfetto opens.
// When tracing is off, trace_event costs one relaxed load and a branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace goro::detail {

struct M;
struct G;
enum class SwitchReason : std::uint8_t;

enum class TraceKind : std::uint8_t {
  g_create,       // arg: -
  g_start,        // a G starts running on this M / P (begins a slice)
  g_stop,         // it stopped (ends the slice); arg: SwitchReason, wait reason in arg2
  g_ready,        // made runnable
  steal,          // arg: victim P
  syscall_enter,  // arg: P left in syscall state
  syscall_exit,   // arg: 0 kept its P, 1 took an idle P, 2 no P (queued globally)
  handoff,        // arg: P handed off
  preempt,        // arg: P whose G was asked to yield
  netpoll,        // arg: how many Gs the poll made runnable
  m_park,         // an M went idle
};

extern std::atomic<bool> trace_enabled;

void trace_record(TraceKind kind, std::uint64_t gid, std::uint64_t arg, const char* name);

inline void trace_event(TraceKind kind, std::uint64_t gid, std::uint64_t arg,
                        const char* name = nullptr) {
  if (trace_enabled.load(std::memory_order_relaxed)) trace_record(kind, gid, arg, name);
}

void trace_init();         // reads GORO_TRACE
void trace_flush_m(M* m);  // an M leaves: keep its buffer for the final write
void trace_shutdown();     // writes the file, frees the buffers

// A window of tracing while the program runs (goro::debug::trace_json): begin turns
// tracing on (if GORO_TRACE has not); end turns it off again when no other window is
// open, and returns the events recorded since `from` (nanotime) as the JSON the file
// would hold.
void trace_window_begin();
std::string trace_window_end(std::int64_t from);

}  // namespace goro::detail
