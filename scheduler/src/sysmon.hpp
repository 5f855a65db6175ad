// sysmon, the monitor thread (sysmon.cpp has what it does and why).
#pragma once

#include <cstdint>
#include <string>

namespace goro::detail {

// The GORO_SCHEDTRACE line for time now (nanotime), without its newline: "SCHED 12ms:
// gomaxprocs=4 idleprocs=3 threads=6 ... runqueue=0 [0 0 0 0]".
std::string schedtrace_line(std::int64_t now);

// The monitor thread's body (run_main starts it; it returns when the runtime exits).
void sysmon_main();

// Wakes sysmon from its sleep while everything is idle. Caller holds sched.lock.
void sysmon_wake();

}  // namespace goro::detail
