// Name lookups on a goroutine run inside goro::blocking: glibc's resolver blocks its
// thread (its own sockets and polls are libc-internal calls the hooks do not see), and
// the P goes to another thread if the lookup lasts a tick. Off a goroutine: libc's.
// gethostbyname and gethostbyname2 return libc's static buffer as before; the caller
// reads it on the thread it resumes on, which is the same process-wide buffer.

#include <netdb.h>

#include <goro/scheduler/runtime.hpp>

#include "fd_table.hpp"
#include "libc.hpp"

namespace libc = goro::hooks::detail::libc;
using goro::hooks::detail::on_goroutine;

extern "C" {

// Named by linked.cpp, so that a program linking goro::hooks takes this object.
extern const int goro_hooks_object_resolve;
const int goro_hooks_object_resolve = 1;

int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) {
  if (!on_goroutine()) return libc::getaddrinfo(node, service, hints, res);
  return goro::blocking([&] { return libc::getaddrinfo(node, service, hints, res); });
}

int getnameinfo(const sockaddr* addr, socklen_t addr_len, char* host, socklen_t host_len,
                char* serv, socklen_t serv_len, int flags) {
  if (!on_goroutine())
    return libc::getnameinfo(addr, addr_len, host, host_len, serv, serv_len, flags);
  return goro::blocking(
      [&] { return libc::getnameinfo(addr, addr_len, host, host_len, serv, serv_len, flags); });
}

hostent* gethostbyname(const char* name) {
  if (!on_goroutine()) return libc::gethostbyname(name);
  return goro::blocking([&] { return libc::gethostbyname(name); });
}

hostent* gethostbyname2(const char* name, int family) {
  if (!on_goroutine()) return libc::gethostbyname2(name, family);
  return goro::blocking([&] { return libc::gethostbyname2(name, family); });
}

int gethostbyname_r(const char* name, hostent* ret, char* buf, size_t len, hostent** result,
                    int* h_errnop) {
  if (!on_goroutine()) return libc::gethostbyname_r(name, ret, buf, len, result, h_errnop);
  return goro::blocking(
      [&] { return libc::gethostbyname_r(name, ret, buf, len, result, h_errnop); });
}

int gethostbyname2_r(const char* name, int family, hostent* ret, char* buf, size_t len,
                     hostent** result, int* h_errnop) {
  if (!on_goroutine()) return libc::gethostbyname2_r(name, family, ret, buf, len, result, h_errnop);
  return goro::blocking(
      [&] { return libc::gethostbyname2_r(name, family, ret, buf, len, result, h_errnop); });
}

}  // extern "C"
