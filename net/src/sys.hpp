// Socket calls of the read and write hot paths, made straight to the kernel. Internal.
//
// glibc's recv, send and sendmsg are pthread cancellation points: around every system
// call they switch the thread's cancellation type with two atomic read-modify-writes
// (about 1% of a core at 100,000 responses a second). goro never cancels a thread (an
// M runs many goroutines; cancelling it would strand all of them), so on x86-64 and
// AArch64 these functions make the system call themselves. Everywhere else, and in
// sanitizer builds, they call libc: ASan checks the buffer in its recv/send interceptors
// and TSan learns a socket's happens-before edges from them.
//
// Each returns what the system call returns, or -errno on failure. Callers read the
// error from the result, never from errno (which only the libc fallback sets).
// recv and send take the socket path (recvfrom and sendto with no address), which is
// lighter in the kernel than read and write through the file layer.
#pragma once

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define GORO_NET_LIBC_SOCKET_CALLS 1
#endif
#endif
#if defined(GORO_ASAN) || defined(GORO_TSAN) || defined(__SANITIZE_ADDRESS__) || \
    defined(__SANITIZE_THREAD__)
#define GORO_NET_LIBC_SOCKET_CALLS 1
#endif

namespace goro::net::detail::sys {

#if !defined(GORO_NET_LIBC_SOCKET_CALLS) && defined(__x86_64__)

inline long syscall6(long nr, long a, long b, long c, long d, long e, long f) noexcept {
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

#elif !defined(GORO_NET_LIBC_SOCKET_CALLS) && defined(__aarch64__)

inline long syscall6(long nr, long a, long b, long c, long d, long e, long f) noexcept {
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory", "cc");
  return x0;
}

#else
#define GORO_NET_LIBC_SOCKET_CALLS_FALLBACK 1
#endif

#if !defined(GORO_NET_LIBC_SOCKET_CALLS) && !defined(GORO_NET_LIBC_SOCKET_CALLS_FALLBACK)

inline ssize_t recv(int fd, void* buf, std::size_t len, int flags) noexcept {
  return syscall6(SYS_recvfrom, fd, reinterpret_cast<long>(buf), static_cast<long>(len), flags, 0,
                  0);
}

inline ssize_t send(int fd, const void* buf, std::size_t len, int flags) noexcept {
  return syscall6(SYS_sendto, fd, reinterpret_cast<long>(buf), static_cast<long>(len), flags, 0, 0);
}

inline ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) noexcept {
  return syscall6(SYS_sendmsg, fd, reinterpret_cast<long>(msg), flags, 0, 0, 0);
}

#else

inline ssize_t recv(int fd, void* buf, std::size_t len, int flags) noexcept {
  ssize_t n = ::recv(fd, buf, len, flags);
  return n >= 0 ? n : -errno;
}

inline ssize_t send(int fd, const void* buf, std::size_t len, int flags) noexcept {
  ssize_t n = ::send(fd, buf, len, flags);
  return n >= 0 ? n : -errno;
}

inline ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) noexcept {
  ssize_t n = ::sendmsg(fd, msg, flags);
  return n >= 0 ? n : -errno;
}

#endif

}  // namespace goro::net::detail::sys
