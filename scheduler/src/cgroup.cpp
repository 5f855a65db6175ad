// The CPU limit of the process's cgroup (detail/cgroup.hpp).
//
// /proc/self/cgroup has a line per hierarchy, "ID:controllers:path": a v1 hierarchy
// with "cpu" among its controllers takes precedence over the v2 one ("0::path"), as in
// Go. /proc/self/mountinfo says where that hierarchy is mounted (cgroup2, or cgroup
// with "cpu" in its super options) and which of its cgroups is the mount's root: a
// container without a cgroup namespace on v1 sees its own cgroup's directory mounted at
// /sys/fs/cgroup/cpu, while /proc/self/cgroup still gives the host's path
// (/libpod_parent/libpod-...), so the path is taken relative to the mount's root.
// From the process's directory up to the mount point, each level's limit is read and
// the smallest kept: a limit set on a parent (a Kubernetes pod, a systemd slice) binds
// the processes below it too. Go 1.25 reads the process's own cgroup only.
#include <goro/scheduler/detail/cgroup.hpp>

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace goro::detail {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

bool has_item(std::string_view list, std::string_view item) {
  for (std::string_view i : split(list, ',')) {
    if (i == item) return true;
  }
  return false;
}

// The kernel writes a space, tab, newline or backslash in a mountinfo path as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::string_view oct = s.substr(i + 1, 3);
    if (s[i] == '\\' && oct.size() == 3 &&
        oct.find_first_not_of("01234567") == std::string_view::npos) {
      out.push_back(static_cast<char>((oct[0] - '0') * 64 + (oct[1] - '0') * 8 + (oct[2] - '0')));
      i += 3;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

// A decimal integer, as the kernel writes one (a trailing newline allowed); nullopt for
// anything else, a number too large for long long included.
std::optional<long long> parse_integer(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  long long n = 0;
  const char* end = s.data() + s.size();
  const auto [at, ec] = std::from_chars(s.data(), end, n);
  if (s.empty() || ec != std::errc() || at != end) return std::nullopt;
  return n;
}

std::optional<double> ratio(std::optional<long long> quota, std::optional<long long> period) {
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

// The limit set in one cgroup's directory, if any.
std::optional<double> limit_in(const std::string& dir, bool v2) {
  if (v2) {
    std::optional<std::string> max = read_file(dir + "/cpu.max");
    return max ? parse_cpu_max(*max) : std::nullopt;
  }
  std::optional<std::string> q = read_file(dir + "/cpu.cfs_quota_us");
  std::optional<std::string> p = read_file(dir + "/cpu.cfs_period_us");
  return q && p ? parse_cfs_limit(*q, *p) : std::nullopt;
}

}  // namespace

std::optional<double> parse_cpu_max(std::string_view cpu_max) {
  std::vector<std::string_view> f = split(cpu_max, ' ');
  if (f.size() != 2 || f[0] == "max") return std::nullopt;
  return ratio(parse_integer(f[0]), parse_integer(f[1]));
}

std::optional<double> parse_cfs_limit(std::string_view quota, std::string_view period) {
  return ratio(parse_integer(quota), parse_integer(period));
}

std::optional<CpuCgroup> find_cpu_cgroup(std::string_view proc_self_cgroup,
                                         std::string_view mountinfo) {
  std::optional<bool> v2;
  std::string path;
  for (std::string_view line : split(proc_self_cgroup, '\n')) {
    std::vector<std::string_view> f = split(line, ':');
    if (f.size() < 3) continue;
    // The path may itself hold colons: it is everything after the second one.
    const std::string_view p = line.substr(f[0].size() + f[1].size() + 2);
    if (f[0] == "0" && f[1].empty()) {
      if (!v2) {
        v2 = true;
        path = p;
      }
    } else if (has_item(f[1], "cpu")) {
      v2 = false;
      path = p;
      break;
    }
  }
  if (!v2) return std::nullopt;
  std::string mount_root;
  CpuCgroup found{.v2 = *v2};
  bool mounted = false;
  for (std::string_view line : split(mountinfo, '\n')) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    std::vector<std::string_view> before = split(line.substr(0, dash), ' ');
    std::vector<std::string_view> after = split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    const bool match = *v2 ? after[0] == "cgroup2"
                           : after[0] == "cgroup" && has_item(after[2], "cpu");
    if (!match) continue;
    mount_root = unescape(before[3]);
    found.mount_point = unescape(before[4]);
    mounted = true;
    break;
  }
  if (!mounted) return std::nullopt;
  // The process's cgroup relative to the mount's root; outside it (it should not be),
  // the mount's own root stands for it.
  if (mount_root == "/") {
    found.relative = path == "/" ? "" : path;
  } else if (path.starts_with(mount_root) &&
             (path.size() == mount_root.size() || path[mount_root.size()] == '/')) {
    found.relative = path.substr(mount_root.size());
  }
  // A path the kernel would not write (relative, or with a trailing '/') stands for the
  // mount's root too: every level walked below must be a directory under the mount.
  if (!found.relative.empty() && (found.relative.front() != '/' || found.relative.back() == '/'))
    found.relative.clear();
  return found;
}

std::optional<double> cgroup_cpu_limit(const std::string& root) {
  std::optional<std::string> cgroups = read_file(root + "/proc/self/cgroup");
  std::optional<std::string> mounts = read_file(root + "/proc/self/mountinfo");
  if (!cgroups || !mounts) return std::nullopt;
  std::optional<CpuCgroup> cgroup = find_cpu_cgroup(*cgroups, *mounts);
  if (!cgroup) return std::nullopt;
  std::optional<double> tightest;
  for (std::string dir = cgroup->relative;;) {
    if (std::optional<double> l = limit_in(root + cgroup->mount_point + dir, cgroup->v2)) {
      if (!tightest || *l < *tightest) tightest = l;
    }
    if (dir.empty()) break;
    dir.resize(dir.rfind('/'));
  }
  return tightest;
}

int procs_from_cpu_limit(double limit) {
  const double up = std::ceil(limit);
  return up < 1 ? 1 : up > 1 << 20 ? 1 << 20 : static_cast<int>(up);
}

}  // namespace goro::detail
