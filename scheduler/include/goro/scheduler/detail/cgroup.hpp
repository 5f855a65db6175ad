// The CPU limit of the cgroup the process runs in, for the default number of Ps
// (goro::Config::maxprocs). Internal; tests read fake cgroup trees through root.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace goro::detail {

// Where the process's CPU cgroup is: its hierarchy's version, the mount point of that
// hierarchy, and the cgroup's path below the mount point ("" for the mount's root, else
// starting with '/').
struct CpuCgroup {
  bool v2 = false;
  std::string mount_point;
  std::string relative;
};

// Reads /proc/self/cgroup's and /proc/self/mountinfo's text (below); nullopt when
// neither names a CPU cgroup that is mounted.
std::optional<CpuCgroup> find_cpu_cgroup(std::string_view proc_self_cgroup,
                                         std::string_view mountinfo);

// One cgroup's limit in CPUs from the text of its files: cgroup v2's cpu.max ("max
// 100000" or "QUOTA PERIOD"), cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us (a
// quota of -1: none). nullopt for no limit, or text that is not one.
std::optional<double> parse_cpu_max(std::string_view cpu_max);
std::optional<double> parse_cfs_limit(std::string_view quota, std::string_view period);

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
