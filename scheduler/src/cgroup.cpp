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

std::optional<long long> parse_integer(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  std::size_t i = s.front() == '-' ? 1 : 0;
  if (i == s.size() || s.find_first_not_of("0123456789", i) != std::string_view::npos) return std::nullopt;
  return std::stoll(std::string(s));
}

enum class Version { v1, v2 };

// The limit set in one cgroup's directory, if any.
std::optional<double> limit_in(const std::string& dir, Version v) {
  if (v == Version::v2) {
    std::optional<std::string> max = read_file(dir + "/cpu.max");
    if (!max) return std::nullopt;
    std::vector<std::string_view> f = split(*max, ' ');
    if (f.size() != 2 || f[0] == "max") return std::nullopt;
    std::optional<long long> quota = parse_integer(f[0]);
    std::optional<long long> period = parse_integer(f[1]);
    if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
    return static_cast<double>(*quota) / static_cast<double>(*period);
  }
  std::optional<std::string> q = read_file(dir + "/cpu.cfs_quota_us");
  std::optional<std::string> p = read_file(dir + "/cpu.cfs_period_us");
  if (!q || !p) return std::nullopt;
  std::optional<long long> quota = parse_integer(*q);  // -1: no limit
  std::optional<long long> period = parse_integer(*p);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return static_cast<double>(*quota) / static_cast<double>(*period);
}

}  // namespace

std::optional<double> cgroup_cpu_limit(const std::string& root) {
  std::optional<std::string> cgroups = read_file(root + "/proc/self/cgroup");
  if (!cgroups) return std::nullopt;
  std::optional<Version> version;
  std::string path;
  for (std::string_view line : split(*cgroups, '\n')) {
    std::vector<std::string_view> f = split(line, ':');
    if (f.size() < 3) continue;
    // The path may itself hold colons: it is everything after the second one.
    const std::string_view p = line.substr(f[0].size() + f[1].size() + 2);
    if (f[0] == "0" && f[1].empty()) {
      if (!version) {
        version = Version::v2;
        path = p;
      }
    } else if (has_item(f[1], "cpu")) {
      version = Version::v1;
      path = p;
      break;
    }
  }
  if (!version) return std::nullopt;
  std::optional<std::string> mounts = read_file(root + "/proc/self/mountinfo");
  if (!mounts) return std::nullopt;
  std::string mount_root, mount_point;
  bool found = false;
  for (std::string_view line : split(*mounts, '\n')) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    std::vector<std::string_view> before = split(line.substr(0, dash), ' ');
    std::vector<std::string_view> after = split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    const bool match = *version == Version::v2
                           ? after[0] == "cgroup2"
                           : after[0] == "cgroup" && has_item(after[2], "cpu");
    if (!match) continue;
    mount_root = unescape(before[3]);
    mount_point = unescape(before[4]);
    found = true;
    break;
  }
  if (!found) return std::nullopt;
  // The process's cgroup relative to the mount's root; outside it (it should not be),
  // the mount's own root stands for it.
  std::string relative;
  if (mount_root == "/") {
    relative = path == "/" ? "" : path;
  } else if (path.starts_with(mount_root) &&
             (path.size() == mount_root.size() || path[mount_root.size()] == '/')) {
    relative = path.substr(mount_root.size());
  }
  std::optional<double> tightest;
  for (std::string dir = relative;;) {
    if (std::optional<double> l = limit_in(root + mount_point + dir, *version)) {
      if (!tightest || *l < *tightest) tightest = l;
    }
    if (dir.empty()) break;
    const std::size_t slash = dir.rfind('/');
    dir = dir.substr(0, slash == std::string::npos ? 0 : slash);
  }
  return tightest;
}

int procs_from_cpu_limit(double limit) {
  const double up = std::ceil(limit);
  return up < 1 ? 1 : up > 1 << 20 ? 1 << 20 : static_cast<int>(up);
}

}  // namespace goro::detail
