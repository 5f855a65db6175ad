// The default number of Ps from the cgroup's CPU limit (detail/cgroup.hpp), over fake
// cgroup trees laid out the way the kernel and the container engines lay them out: cgroup
// v2 with and without a namespace, v1 as podman and Docker mount it without one, nested
// limits, hybrid hosts, escaped mount points, and files that are absent or garbage. The
// real container case (podman run --cpus) is tests/deploy/kube_test.sh.
#include <goro/scheduler/detail/cgroup.hpp>
#include <goro/scheduler/runtime.hpp>

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using goro::detail::cgroup_cpu_limit;
using goro::detail::procs_from_cpu_limit;

namespace {

// A temporary root with /proc/self/{cgroup,mountinfo} and cgroup files under it.
class FakeRoot {
 public:
  FakeRoot() {
    char tmpl[] = "/tmp/goro-cgroup-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  ~FakeRoot() { fs::remove_all(root_); }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  void write(const std::string& path, const std::string& contents) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << contents;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

constexpr const char* kV2Mount =
    "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

}  // namespace

TEST(CgroupLimit, RoundsUpAtLeastOne) {
  EXPECT_EQ(procs_from_cpu_limit(0.1), 1);
  EXPECT_EQ(procs_from_cpu_limit(0.5), 1);
  EXPECT_EQ(procs_from_cpu_limit(1.0), 1);
  EXPECT_EQ(procs_from_cpu_limit(1.01), 2);
  EXPECT_EQ(procs_from_cpu_limit(2.5), 3);
  EXPECT_EQ(procs_from_cpu_limit(16.0), 16);
}

// A container with its own cgroup namespace (podman and Docker on cgroup v2): the
// process is at the root of the mount, and the limit is the root's cpu.max.
TEST(CgroupLimit, V2InANamespace) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/\n");
  r.write("/proc/self/mountinfo",
          std::string("22 1 0:20 / / rw - overlay overlay rw\n") + kV2Mount);
  r.write("/sys/fs/cgroup/cpu.max", "150000 100000\n");
  std::optional<double> limit = cgroup_cpu_limit(r.root());
  ASSERT_TRUE(limit.has_value());
  EXPECT_DOUBLE_EQ(*limit, 1.5);
  EXPECT_EQ(procs_from_cpu_limit(*limit), 2);
}

TEST(CgroupLimit, V2Unlimited) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/\n");
  r.write("/proc/self/mountinfo", kV2Mount);
  r.write("/sys/fs/cgroup/cpu.max", "max 100000\n");
  EXPECT_FALSE(cgroup_cpu_limit(r.root()).has_value());
}

// Nested: Kubernetes' pod cgroup above the container's, a systemd slice above a service.
// The tightest level binds, wherever it is; levels without a file or a limit are skipped.
TEST(CgroupLimit, V2NestedTakesTheTightest) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/kubepods.slice/pod1/ctr\n");
  r.write("/proc/self/mountinfo", kV2Mount);
  r.write("/sys/fs/cgroup/kubepods.slice/pod1/ctr/cpu.max", "max 100000\n");
  r.write("/sys/fs/cgroup/kubepods.slice/pod1/cpu.max", "50000 100000\n");
  r.write("/sys/fs/cgroup/kubepods.slice/cpu.max", "400000 100000\n");
  std::optional<double> limit = cgroup_cpu_limit(r.root());
  ASSERT_TRUE(limit.has_value());
  EXPECT_DOUBLE_EQ(*limit, 0.5);
  EXPECT_EQ(procs_from_cpu_limit(*limit), 1);

  // A tighter limit on the container itself wins over its parents'.
  r.write("/sys/fs/cgroup/kubepods.slice/pod1/ctr/cpu.max", "25000 100000\n");
  EXPECT_DOUBLE_EQ(*cgroup_cpu_limit(r.root()), 0.25);
}

// cgroup v1 without a namespace, as podman and Docker run a container on a v1 host: the
// mount's root is the container's own cgroup, while /proc/self/cgroup gives its path on
// the host. The limit is read at the mount point, not at mount point + host path.
TEST(CgroupLimit, V1ContainerMountRootIsItsCgroup) {
  FakeRoot r;
  r.write("/proc/self/cgroup",
          "12:pids:/libpod_parent/libpod-4f2e\n"
          "4:cpu,cpuacct:/libpod_parent/libpod-4f2e\n"
          "1:name=systemd:/libpod_parent/libpod-4f2e\n"
          "0::/libpod_parent/libpod-4f2e\n");
  r.write("/proc/self/mountinfo",
          "22 1 0:20 / / rw - overlay overlay rw\n"
          "40 39 0:34 /libpod_parent/libpod-4f2e /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup "
          "cgroup rw,cpu,cpuacct\n"
          "41 39 0:35 /libpod_parent/libpod-4f2e /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n");
  r.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
  r.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  std::optional<double> limit = cgroup_cpu_limit(r.root());
  ASSERT_TRUE(limit.has_value());
  EXPECT_DOUBLE_EQ(*limit, 2.5);
  EXPECT_EQ(procs_from_cpu_limit(*limit), 3);
}

// cgroup v1 on a host (hybrid: a v2 mount as well, which v1's cpu controller overrides),
// nested, with -1 (no quota) at the process's own level.
TEST(CgroupLimit, V1HybridNested) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "3:cpu:/app/worker\n0::/app/worker\n");
  r.write("/proc/self/mountinfo",
          "31 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
          "32 25 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
  r.write("/sys/fs/cgroup/unified/app/worker/cpu.max", "10000 100000\n");  // not v1's
  r.write("/sys/fs/cgroup/cpu/app/worker/cpu.cfs_quota_us", "-1\n");
  r.write("/sys/fs/cgroup/cpu/app/worker/cpu.cfs_period_us", "100000\n");
  r.write("/sys/fs/cgroup/cpu/app/cpu.cfs_quota_us", "100000\n");
  r.write("/sys/fs/cgroup/cpu/app/cpu.cfs_period_us", "100000\n");
  r.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  r.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  std::optional<double> limit = cgroup_cpu_limit(r.root());
  ASSERT_TRUE(limit.has_value());
  EXPECT_DOUBLE_EQ(*limit, 1.0);
}

// A mount point with a space, written by the kernel as \040.
TEST(CgroupLimit, EscapedMountPoint) {
  FakeRoot r;
  r.write("/proc/self/cgroup", "0::/svc\n");
  r.write("/proc/self/mountinfo", "30 25 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n");
  r.write("/cg root/svc/cpu.max", "300000 100000\n");
  std::optional<double> limit = cgroup_cpu_limit(r.root());
  ASSERT_TRUE(limit.has_value());
  EXPECT_DOUBLE_EQ(*limit, 3.0);
}

// No cgroup files, no matching mount, garbage in the limit files: no limit.
TEST(CgroupLimit, NothingToReadIsNoLimit) {
  {
    FakeRoot r;
    EXPECT_FALSE(cgroup_cpu_limit(r.root()).has_value());
  }
  {
    FakeRoot r;
    r.write("/proc/self/cgroup", "0::/\n");
    r.write("/proc/self/mountinfo", "22 1 0:20 / / rw - overlay overlay rw\n");
    EXPECT_FALSE(cgroup_cpu_limit(r.root()).has_value());
  }
  {
    FakeRoot r;
    r.write("/proc/self/cgroup", "0::/\n");
    r.write("/proc/self/mountinfo", kV2Mount);
    r.write("/sys/fs/cgroup/cpu.max", "lots 100000\n");
    EXPECT_FALSE(cgroup_cpu_limit(r.root()).has_value());
    r.write("/sys/fs/cgroup/cpu.max", "100000\n");
    EXPECT_FALSE(cgroup_cpu_limit(r.root()).has_value());
  }
  {
    FakeRoot r;
    r.write("/proc/self/cgroup", "4:cpu,cpuacct:/\n");
    r.write("/proc/self/mountinfo", "32 25 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
    r.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    r.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    EXPECT_FALSE(cgroup_cpu_limit(r.root()).has_value());
  }
}

// The runtime starts from the CPUs it may run on (the affinity mask, as Go), not the
// cores online: pinned to one CPU, it makes one P.
TEST(CgroupLimit, RuntimeFollowsTheAffinityMask) {
  unsetenv("GORO_MAXPROCS");
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const int pinned = goro::run([] { return goro::maxprocs(); });
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(pinned, 1);
}
