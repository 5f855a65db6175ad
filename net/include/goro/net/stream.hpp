// goro::net::Stream — a byte stream: what Conn (TCP, Unix) and TlsConn have in common,
// and what the HTTP layer is written against.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <system_error>
#include <type_traits>

#include <goro/net/addr.hpp>
#include <goro/net/errors.hpp>
#include <goro/net/result.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/detail/netpoll.hpp>

namespace goro::net {

// Which side of a stream an operation concerns: read, write or both.
using IoMode = goro::detail::IoMode;

// An absolute point in time on the steady clock. A default-constructed Deadline
// (the clock's epoch) means "no deadline"; any other time in the past means "already
// expired": operations fail with errc::timeout at once, until a later deadline is set.
using Deadline = std::chrono::steady_clock::time_point;

inline constexpr Deadline no_deadline{};

// A deadline d from now.
inline Deadline deadline_after(std::chrono::nanoseconds d) {
  return std::chrono::steady_clock::now() + d;
}

// Concurrency (as Go's net.Conn): one goroutine may read while another writes and a
// third calls close() or sets deadlines. Two concurrent readers (or writers) are
// serialised, not interleaved. Every operation parks the calling goroutine, never
// the thread.
class Stream {
 public:
  virtual ~Stream() = default;

  // Reads up to len bytes into buf. Returns the count (> 0), or 0 at end of stream
  // (and for len == 0). Blocks until some data, end of stream, the read deadline or close().
  virtual Result<std::size_t> read(void* buf, std::size_t len) = 0;

  // Writes all len bytes, or fails (then an unknown prefix may have been sent).
  // Blocks until all is handed to the kernel, the write deadline or close().
  virtual Result<std::size_t> write(const void* buf, std::size_t len) = 0;

  // Writes all count buffers in order, as one write where possible; all or fail.
  virtual Result<std::size_t> writev(const struct iovec* iov, int count) = 0;

  // Closes the stream; waiting reads and writes return errc::closed. A second close()
  // returns errc::closed. Whether it waits for them to return is the stream's to say
  // (Conn waits, TlsConn does not).
  virtual std::error_code close() = 0;

  // Half-close: the peer reads what was written, then end of stream; this end can
  // still read. Later writes fail (std::errc::broken_pipe). Blocks at most as a write
  // does (a TLS stream sends its close_notify first).
  virtual std::error_code shutdown_write() = 0;

  // Whether the peer has ended its side of the stream or the connection broke (for a
  // socket: the kernel has seen its FIN or a reset). Data it sent before stays readable.
  // Never blocks and reads nothing; false when it cannot tell (after close()).
  virtual bool peer_closed() const = 0;

  // Deadlines for future and already waiting reads / writes / both (see Deadline).
  virtual std::error_code set_read_deadline(Deadline d) = 0;
  virtual std::error_code set_write_deadline(Deadline d) = 0;
  virtual std::error_code set_deadline(Deadline d) = 0;

  // The peer's address and this end's address.
  virtual Addr remote_addr() const = 0;
  virtual Addr local_addr() const = 0;

  // read() and write() that give up when ctx is cancelled first: the parked operation
  // is woken and returns ctx.err() (context_errc::canceled or deadline_exceeded); what
  // a TLS stream had already decrypted stays buffered for the next read. At once if ctx
  // already is cancelled. Deadlines still apply.
  Result<std::size_t> read(void* buf, std::size_t len, const Context& ctx);
  Result<std::size_t> write(const void* buf, std::size_t len, const Context& ctx);

  // Makes the read (mode read), the write (write) or both of goroutine `waiter`
  // (goro::detail::current_g() in it) that wait in this stream, now or later, return
  // errc::interrupted, until clear_interrupt(mode, waiter); other goroutines' operations
  // go on. What the context calls above are built on; a stream that never waits does
  // nothing. Callable from any thread.
  virtual void interrupt(IoMode mode, goro::detail::G* waiter) {
    (void)mode;
    (void)waiter;
  }
  virtual void clear_interrupt(IoMode mode, goro::detail::G* waiter) {
    (void)mode;
    (void)waiter;
  }

  // Asks for fn(arg) to be called, on any thread and without blocking, when the peer
  // hangs up (the netpoller sees the connection closed or reset), including while
  // nobody reads; fn == nullptr stops that and returns once no call is in progress.
  // Returns false when this stream cannot tell (then fn is never called).
  virtual bool on_hangup(void (*fn)(void*), void* arg) {
    (void)fn;
    (void)arg;
    return false;
  }

  // Waits for the next read without a goroutine: returns true when fn(arg) will start
  // on a new goroutine (stack_size and name as GoOptions's; name must outlive the call)
  // once a read may not have to wait (bytes, end of stream or an error arrived, the
  // read deadline passed, or the stream was closed), perhaps before this returns. Until
  // then no goroutine may read. Returns false, arming nothing, when the stream cannot
  // wait that way or bytes may be waiting already: then the caller reads as usual. For
  // servers whose idle connections should cost no stack.
  virtual bool start_on_readable(void (*fn)(void*), void* arg, std::size_t stack_size,
                                 const char* name) {
    (void)fn;
    (void)arg;
    (void)stack_size;
    (void)name;
    return false;
  }
};

// Runs op (a call on stream s in direction mode) so that ctx's cancellation interrupts
// it; returns ctx.err() when it did. The building block of Stream::read(ctx) and of
// callers that have several calls to make under one context.
template <class Op>
auto with_context(Stream& s, IoMode mode, const Context& ctx, Op&& op) -> decltype(op()) {
  if (auto e = ctx.err()) return e;
  if (!ctx.can_cancel()) return op();
  struct Target {
    Stream* stream;
    IoMode mode;
    goro::detail::G* waiter;
  } target{&s, mode, goro::detail::current_g()};
  auto fire = [](goro::detail::CancelHook* h) {
    auto* t = static_cast<Target*>(h->arg);
    t->stream->interrupt(t->mode, t->waiter);
  };
  decltype(op()) result = [&]() -> decltype(op()) {
    goro::detail::ContextWatch watch(ctx, fire, &target);
    if (!watch.ok()) return ctx.err();
    return op();
  }();
  // The hook is gone: clear what it may have set after op returned.
  s.clear_interrupt(mode, target.waiter);
  std::error_code ec;
  if constexpr (std::is_same_v<decltype(op()), std::error_code>) {
    ec = result;
  } else {
    if (!result) ec = result.error();
  }
  if (ec == make_error_code(errc::interrupted)) {
    if (auto e = ctx.err()) return e;
  }
  return result;
}

// Reads exactly len bytes unless the stream ends first. Returns the count read: len,
// or less (possibly 0) when the stream ended. Blocks like Stream::read.
Result<std::size_t> read_full(Stream& s, void* buf, std::size_t len);

}  // namespace goro::net
