// sysmon, the monitor thread (sysmon.cpp has what it does and why).
#pragma once

namespace goro::detail {

// The monitor thread's body (run_main starts it; it returns when the runtime exits).
void sysmon_main();

// Wakes sysmon from its sleep while everything is idle. Caller holds sched.lock.
void sysmon_wake();

}  // namespace goro::detail
