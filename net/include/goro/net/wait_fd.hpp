// goro::net::FdWatch and wait_fd — parking a goroutine until a descriptor goro did not
// open is readable or writable.
//
// C libraries with an asynchronous API (libpq, hiredis' async context, libcurl's multi
// interface, c-ares) hand out a non-blocking descriptor and leave the waiting to the
// caller. FdWatch registers such a descriptor with goro's netpoller once, and its wait()
// parks the goroutine, never the thread, until the descriptor is ready:
//
//   auto watch = goro::net::FdWatch::open(PQsocket(conn));
//   if (!watch) return watch.error();
//   while (PQisBusy(conn)) {
//     if (auto ec = watch->wait(goro::net::Interest::read, ctx)) return ec;
//     if (!PQconsumeInput(conn)) return fail(PQerrorMessage(conn));
//   }
//
// The rules (docs/hooks.md has them with the libpq, hiredis and libcurl patterns):
//
// Readiness. wait() returns at once when the descriptor is ready now, else parks until
// it may be: level-triggered, as poll(2) is, because that is what these libraries were
// written for (libpq and hiredis read once per readiness, not until EAGAIN). A wake-up
// may be spurious: retry the operation, and wait again when it would block. The
// netpoller underneath is edge-triggered (an edge that came before the wait is kept,
// not lost), so the level check costs one poll(2) call per wait; Trigger::edge skips it
// for a caller that always retries its operation until EAGAIN before waiting, and
// would otherwise wait for an edge that already came and went.
//
// Ownership. The descriptor stays the library's: FdWatch never reads, writes, closes or
// changes its flags. It should be non-blocking (a read after a spurious wake-up on a
// blocking one blocks the thread). Release the watch (destroy it, or release()) before
// the library closes the descriptor: hiredis' cleanup hook and libcurl's CURL_POLL_REMOVE
// come just before the close for that. A descriptor closed while registered is handled
// thus: epoll drops a registration when the file's last descriptor is closed, so a
// goroutine parked on it is not woken (release() wakes it); release() sees that the
// number no longer names the file it registered (fstat: device and inode) and does not
// unregister it by number, which may now be someone else's. While a duplicate of the
// file lives (dup, fork), the registration lives too and the watch keeps reporting the
// file's readiness. A library may also replace its descriptor by another with the same
// number (libpq does while it tries the server's addresses): watches(fd) says whether
// the watch still is on the file fd names.
//
// One watch per descriptor. open() fails with std::errc::file_exists for a descriptor
// already registered with the netpoller: by another FdWatch, or a socket goro owns
// (Conn::fd()). wait_fd() works for those: it registers a duplicate.
//
// Concurrency. One goroutine may wait for read while another waits for write; two
// waiters of one direction wait one after the other (the second one's deadline and
// context count from when its turn comes). release() may be called from any
// goroutine while others wait: they return errc::closed at once, and release() returns
// once none of them is inside the watch any more. Called from a thread outside the
// runtime it cannot wait; the last waiter out finishes the release.
#pragma once

#include <cstdint>
#include <memory>
#include <system_error>

#include <goro/base/result.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::net {

// What a wait is for: the descriptor readable (data, end of stream, an error or a
// hang-up), or writable (room to write, a connect finished, an error).
enum class Interest : std::uint8_t { read, write };

// How wait() treats readiness that came before it (see the top of this file).
enum class Trigger : std::uint8_t {
  level,  // ready now: return at once (one poll(2) call per wait)
  edge,   // only an edge since the last wait counts: retry until EAGAIN before waiting
};

class FdWatch {
 public:
  // Registers fd (not taken over: see above) with the runtime's netpoller. Fails with
  // std::errc::file_exists when fd is registered already,
  // std::errc::operation_not_permitted outside goro::run or for a descriptor epoll
  // cannot watch (a regular file), or another error of fstat(2) or epoll_ctl(2).
  // Never blocks.
  static Result<FdWatch> open(int fd, Trigger trigger = Trigger::level);

  // Watches nothing: wait() fails with std::errc::bad_file_descriptor.
  FdWatch() noexcept;
  FdWatch(FdWatch&&) noexcept;
  // Releases the watch this one had first.
  FdWatch& operator=(FdWatch&&) noexcept;
  // release().
  ~FdWatch();

  // Parks the calling goroutine until fd is ready for interest (at once if it is now;
  // see Trigger), or the deadline passes. Returns {} when it may be ready (retry the
  // operation), errc::timeout once the deadline has passed (at once for one in the
  // past), errc::closed once release() was called (or, with Trigger::level, when the
  // number is no longer open). Call on a goroutine (else
  // std::errc::operation_not_permitted).
  std::error_code wait(Interest interest, Deadline deadline = no_deadline);

  // Like wait(interest), but gives up when ctx is cancelled first, returning ctx.err()
  // (context_errc::canceled or deadline_exceeded); at once if it already is.
  std::error_code wait(Interest interest, const Context& ctx);

  // Forgets the descriptor: wakes the goroutines waiting with errc::closed, unregisters
  // it once they are out, and returns its number (-1 if this watch watched nothing),
  // which the caller may close next. Never closes it. Blocks only while waiters leave.
  int release() noexcept;

  // release() for a descriptor its library has closed already (libpq drops its socket
  // when the server goes): the number is not looked at again (not even by fstat), since
  // another thread may have been given it for a file of its own; epoll dropped the
  // registration with the file. Blocks only while waiters leave.
  void forget_closed() noexcept;

  // Whether this watch is on fd: the same number, still naming the file open() was
  // given (one fstat(2) call). False once that file was closed, even if the number now
  // names another; then open a new watch for it.
  bool watches(int fd) const noexcept;

  // The descriptor watched, -1 for none.
  int fd() const noexcept;
  bool is_open() const noexcept { return state_ != nullptr; }

  class State;  // net/src/wait_fd.cpp

 private:
  explicit FdWatch(State* state) noexcept;
  State* state_ = nullptr;
};

// Waits once for fd to be ready for interest, without an FdWatch: returns at once when
// it is ready now (one poll(2) call); otherwise registers a duplicate of fd with the
// netpoller for the wait (four more system calls: dup, two epoll_ctl, close), so it
// works whoever else watches fd. A close of fd during the wait does not end it (the
// duplicate keeps the file open until then). Returns as FdWatch::wait does; for a
// descriptor waited on again and again, an FdWatch costs less.
std::error_code wait_fd(int fd, Interest interest, Deadline deadline = no_deadline);
std::error_code wait_fd(int fd, Interest interest, const Context& ctx);

}  // namespace goro::net
