// The _FORTIFY_SOURCE forms: this file is compiled fortified (where optimising, which
// fortification needs), so its read and recv of a length the compiler cannot see become
// __read_chk and __recv_chk, which must reach the hooks too.
#if defined(__OPTIMIZE__) && !defined(_FORTIFY_SOURCE)
#define _FORTIFY_SOURCE 2
#endif

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <goro/scheduler/runtime.hpp>

namespace {

// The file's flags as the kernel has them, past the hooks' fcntl.
int kernel_flags(int fd) { return static_cast<int>(::syscall(SYS_fcntl, fd, F_GETFL)); }

TEST(HooksFortify, CheckedReadsGoThroughTheHooks) {
  goro::Config config;
  config.maxprocs = 1;
  goro::run(
      [] {
        for (const bool use_recv : {false, true}) {
          int fds[2];
          ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
          char buf[16];
          volatile std::size_t n = 1;  // unknown to the compiler: the checked form
          ASSERT_EQ(::write(fds[1], "x", 1), 1);
          const ssize_t got = use_recv ? ::recv(fds[0], buf, n, 0) : ::read(fds[0], buf, n);
          EXPECT_EQ(got, 1);
          // Only the hooks make a socket non-blocking underneath: the call went through
          // them.
          EXPECT_NE(kernel_flags(fds[0]) & O_NONBLOCK, 0) << (use_recv ? "recv" : "read");
          EXPECT_EQ(::fcntl(fds[0], F_GETFL) & O_NONBLOCK, 0);
          ::close(fds[0]);
          ::close(fds[1]);
        }
      },
      config);
}

}  // namespace
