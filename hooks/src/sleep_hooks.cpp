// The sleeps on a goroutine park it on a timer (goro::sleep) and never fail with EINTR
// (a goroutine takes no signals; the thread under it may, and resumes the timer).
// Off a goroutine they are libc's. clock_nanosleep on a goroutine does so for the
// clocks a timer can stand for (realtime, monotonic, boottime); an absolute time is
// turned into a duration on its clock when the call is made, so a later step of the
// realtime clock does not move the wake-up.

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include <goro/scheduler/runtime.hpp>

#include "fd_table.hpp"
#include "libc.hpp"

namespace libc = goro::hooks::detail::libc;
using goro::hooks::detail::on_goroutine;

namespace {

bool valid(const timespec* t) noexcept {
  return t != nullptr && t->tv_sec >= 0 && t->tv_nsec >= 0 && t->tv_nsec < 1'000'000'000;
}

std::chrono::nanoseconds duration_of(const timespec& t) noexcept {
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

}  // namespace

extern "C" {

// Named by linked.cpp, so that a program linking goro::hooks takes this object.
extern const int goro_hooks_object_sleep;
const int goro_hooks_object_sleep = 1;

int nanosleep(const timespec* req, timespec* rem) {
  if (!on_goroutine()) return libc::nanosleep(req, rem);
  if (!valid(req)) {
    errno = EINVAL;
    return -1;
  }
  goro::sleep(duration_of(*req));
  return 0;
}

int clock_nanosleep(clockid_t clock, int flags, const timespec* req, timespec* rem) {
  if (!on_goroutine() ||
      (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC && clock != CLOCK_BOOTTIME))
    return libc::clock_nanosleep(clock, flags, req, rem);
  if (!valid(req)) return EINVAL;
  std::chrono::nanoseconds d = duration_of(*req);
  if ((flags & TIMER_ABSTIME) != 0) {
    timespec now;
    ::clock_gettime(clock, &now);
    d -= duration_of(now);
  }
  if (d.count() > 0) goro::sleep(d);
  return 0;
}

int usleep(useconds_t us) {
  if (!on_goroutine()) return libc::usleep(us);
  goro::sleep(std::chrono::microseconds(us));
  return 0;
}

unsigned sleep(unsigned seconds) {
  if (!on_goroutine()) return libc::sleep(seconds);
  goro::sleep(std::chrono::seconds(seconds));
  return 0;
}

}  // extern "C"
