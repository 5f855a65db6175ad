// Read-only views of the scheduler for tests and tools: per-P counters that show a
// mechanism happening, and the numbers behind GORO_SCHEDTRACE. Internal; not stable.
// Valid while goro::run is running.
#pragma once

#include <cstdint>
#include <vector>

namespace goro::detail {

struct ProcStats {
  std::uint64_t runnext_runs = 0;     // Gs run from the runnext slot
  std::uint64_t global_fair = 0;      // 1-in-61 checks that took a G from the global queue
  std::uint64_t global_batches = 0;   // batch takes from the global queue (more than one G)
  std::uint64_t global_batch_gs = 0;  // Gs moved by those batches
  std::uint64_t overflows = 0;        // full ring: half of it moved to the global queue
  std::uint64_t steals = 0;           // successful steals by this P
  std::uint64_t stolen_gs = 0;        // Gs taken by those steals
  std::uint64_t runs = 0;             // Gs executed on this P
};

std::vector<ProcStats> proc_stats();  // one per P, by P id
int current_p();                      // the caller's P id, -1 if none
std::uint32_t local_runq_size();      // the caller's P: ring + runnext
int global_runq_size();
int spinning_ms();
int idle_ps();
int thread_count();              // Ms created (sysmon not included)
int idle_threads();              // Ms parked idle
std::uint64_t sysmon_wakeups();  // times sysmon woke up since run() started
std::uint64_t handoffs();        // Ps handed off (syscall retake, preemption, blocking_long)
std::uint64_t preemptions();     // Ps taken from a goroutine by the preemption signal

}  // namespace goro::detail
