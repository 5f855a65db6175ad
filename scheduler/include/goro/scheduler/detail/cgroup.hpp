// The CPU limit of the cgroup the process runs in, for the default number of Ps
// (goro::Config::maxprocs). Internal; tests read fake cgroup trees through root.
#pragma once

#include <optional>
#include <string>

namespace goro::detail {

// The tightest CPU bandwidth limit (quota / period, in CPUs) of the process's CPU cgroup
// and of its ancestors visible in the cgroup mount: cgroup v1's cpu.cfs_quota_us and
// cpu.cfs_period_us where a v1 hierarchy has the cpu controller, else cgroup v2's
// cpu.max. The cgroup is found as Go 1.25 finds it: its path in /proc/self/cgroup, the
// mount of its hierarchy in /proc/self/mountinfo (a container's mount shows its own
// cgroup at the mount's root). nullopt when there is no limit, or nothing to read.
// root is put in front of every path read ("" for the real system). Blocks on file
// reads.
std::optional<double> cgroup_cpu_limit(const std::string& root = "");

// Ps for a CPU limit: rounded up, at least 1.
int procs_from_cpu_limit(double limit);

}  // namespace goro::detail
