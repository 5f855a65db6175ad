// cgroup: the readers of /proc/self/cgroup, /proc/self/mountinfo and a cgroup's CPU limit
// files (scheduler/detail/cgroup.hpp), which set the default number of Ps at start-up.
//
// The input is split on NUL bytes into the text of /proc/self/cgroup, /proc/self/mountinfo,
// a cpu.max, and a cpu.cfs_quota_us and cpu.cfs_period_us pair. Whatever they hold, a
// cgroup found must name a directory below its mount point, and a limit must be a positive,
// finite number of CPUs that gives between 1 and 2^20 Ps.
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <goro/scheduler/detail/cgroup.hpp>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

std::string check_limit(const char* what, std::optional<double> limit) {
  if (!limit) return {};
  if (!std::isfinite(*limit) || *limit <= 0) return std::string(what) + " gave a limit that is not a positive number";
  const int procs = detail::procs_from_cpu_limit(*limit);
  if (procs < 1 || procs > (1 << 20)) return std::string(what) + " gave a limit outside 1..2^20 Ps";
  if (*limit <= (1 << 20) && procs < *limit) return std::string(what) + "'s Ps are fewer than its limit";
  return {};
}

}  // namespace

std::string cgroup(std::string_view input) {
  std::vector<std::string_view> part;
  for (std::size_t at; part.size() < 4 && (at = input.find('\0')) != std::string_view::npos;) {
    part.push_back(input.substr(0, at));
    input.remove_prefix(at + 1);
  }
  part.push_back(input);
  part.resize(5);

  if (std::optional<detail::CpuCgroup> found = detail::find_cpu_cgroup(part[0], part[1])) {
    const std::string& rel = found->relative;
    if (!rel.empty() && (rel.front() != '/' || rel.back() == '/'))
      return "find_cpu_cgroup gave a path that is not below its mount point: " + rel;
  }
  if (std::string why = check_limit("parse_cpu_max", detail::parse_cpu_max(part[2])); !why.empty())
    return why;
  return check_limit("parse_cfs_limit", detail::parse_cfs_limit(part[3], part[4]));
}

}  // namespace goro::fuzz
