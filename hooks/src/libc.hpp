// The next definitions (libc's, or a sanitizer's interceptor) of every function the
// hooks define: the hooks call through these, never through the name, which would be
// the hook itself.
#pragma once

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "real.hpp"

namespace goro::hooks::detail::libc {

// Sockets and descriptors.
inline constinit Next<int(int, int, int)> socket{"socket"};
inline constinit Next<int(int, int, int, int*)> socketpair{"socketpair"};
inline constinit Next<int(int, sockaddr*, socklen_t*)> accept{"accept"};
inline constinit Next<int(int, sockaddr*, socklen_t*, int)> accept4{"accept4"};
inline constinit Next<int(int, const sockaddr*, socklen_t)> connect{"connect"};
inline constinit Next<int(int)> close{"close"};
inline constinit Next<int(int)> dup{"dup"};
inline constinit Next<int(int, int)> dup2{"dup2"};
inline constinit Next<int(int, int, int)> dup3{"dup3"};
inline constinit Next<int(int, int, ...)> fcntl{"fcntl"};
inline constinit Next<int(int, unsigned long, ...)> ioctl{"ioctl"};
inline constinit Next<int(int, int, int, const void*, socklen_t)> setsockopt{"setsockopt"};

// Data.
inline constinit Next<ssize_t(int, void*, size_t)> read{"read"};
inline constinit Next<ssize_t(int, const void*, size_t)> write{"write"};
inline constinit Next<ssize_t(int, const iovec*, int)> readv{"readv"};
inline constinit Next<ssize_t(int, const iovec*, int)> writev{"writev"};
inline constinit Next<ssize_t(int, void*, size_t, int)> recv{"recv"};
inline constinit Next<ssize_t(int, void*, size_t, int, sockaddr*, socklen_t*)> recvfrom{"recvfrom"};
inline constinit Next<ssize_t(int, msghdr*, int)> recvmsg{"recvmsg"};
inline constinit Next<ssize_t(int, const void*, size_t, int)> send{"send"};
inline constinit Next<ssize_t(int, const void*, size_t, int, const sockaddr*, socklen_t)> sendto{
    "sendto"};
inline constinit Next<ssize_t(int, const msghdr*, int)> sendmsg{"sendmsg"};

// Readiness.
inline constinit Next<int(pollfd*, nfds_t, int)> poll{"poll"};
inline constinit Next<int(pollfd*, nfds_t, const timespec*, const sigset_t*)> ppoll{"ppoll"};
inline constinit Next<int(int, fd_set*, fd_set*, fd_set*, timeval*)> select{"select"};

// Sleeps.
inline constinit Next<int(const timespec*, timespec*)> nanosleep{"nanosleep"};
inline constinit Next<int(clockid_t, int, const timespec*, timespec*)> clock_nanosleep{
    "clock_nanosleep"};
inline constinit Next<int(useconds_t)> usleep{"usleep"};
inline constinit Next<unsigned(unsigned)> sleep{"sleep"};

// Names.
inline constinit Next<int(const char*, const char*, const addrinfo*, addrinfo**)> getaddrinfo{
    "getaddrinfo"};
inline constinit Next<int(const sockaddr*, socklen_t, char*, socklen_t, char*, socklen_t, int)>
    getnameinfo{"getnameinfo"};
inline constinit Next<hostent*(const char*)> gethostbyname{"gethostbyname"};
inline constinit Next<hostent*(const char*, int)> gethostbyname2{"gethostbyname2"};
inline constinit Next<int(const char*, hostent*, char*, size_t, hostent**, int*)> gethostbyname_r{
    "gethostbyname_r"};
inline constinit Next<int(const char*, int, hostent*, char*, size_t, hostent**, int*)>
    gethostbyname2_r{"gethostbyname2_r"};

}  // namespace goro::hooks::detail::libc
