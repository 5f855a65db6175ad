// The _FORTIFY_SOURCE forms of the hooked calls. A program (or library) built with
// _FORTIFY_SOURCE=2 and a buffer of a size the compiler knows calls __read_chk instead
// of read, and glibc's __read_chk calls its internal read, which no hook stands in front
// of. These check the buffer as glibc does, then call the hook.

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>

extern "C" {

// glibc's: reports the overflow and ends the process.
[[noreturn]] void __chk_fail(void);

// Named by linked.cpp, so that a program linking goro::hooks takes this object.
extern const int goro_hooks_object_fortify;
const int goro_hooks_object_fortify = 1;

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buf_len) {
  if (n > buf_len) __chk_fail();
  return ::read(fd, buf, n);
}

ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buf_len, int flags) {
  if (n > buf_len) __chk_fail();
  return ::recv(fd, buf, n, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buf_len, int flags, sockaddr* from,
                       socklen_t* from_len) {
  if (n > buf_len) __chk_fail();
  return ::recvfrom(fd, buf, n, flags, from, from_len);
}

int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fds_len) {
  if (fds_len / sizeof(pollfd) < n) __chk_fail();
  return ::poll(fds, n, timeout);
}

int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* sigmask,
                size_t fds_len) {
  if (fds_len / sizeof(pollfd) < n) __chk_fail();
  return ::ppoll(fds, n, timeout, sigmask);
}

}  // extern "C"
