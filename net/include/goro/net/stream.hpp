// goro::net::Stream — a byte stream: what Conn (TCP, Unix) and TlsConn have in common,
// and what the HTTP layer is written against. As small as Go's net.Conn: read, write,
// close, deadlines and addresses, plus what a server needs of a connection (half-close,
// "has the peer gone", and the netpoller's wake-ups below).
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>
#include <type_traits>

#include <goro/base/result.hpp>
#include <goro/net/addr.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::net {

// Which side of a stream an operation concerns: read, write or both.
enum class IoMode : std::uint8_t { read, write, both };

// An absolute point in time on the steady clock. A default-constructed Deadline
// (the clock's epoch) means "no deadline"; any other time in the past means "already
// expired": operations fail with errc::timeout at once, until a later deadline is set.
using Deadline = std::chrono::steady_clock::time_point;

inline constexpr Deadline no_deadline{};

// A deadline d from now.
inline Deadline deadline_after(std::chrono::nanoseconds d) {
  return std::chrono::steady_clock::now() + d;
}

// The netpoller's wake-ups (Stream::start_on): what makes it start a goroutine.
enum class Wake : std::uint8_t {
  // A read may not have to wait: bytes, the end of the stream or an error arrived, the
  // read deadline passed, or the stream was closed.
  readable,
  // The peer hung up (closed its side or reset the connection), or the stream was
  // closed.
  hangup,
};

// What a wake-up starts: fn(arg) on a new goroutine with this stack size (0: the
// runtime's default) and name (for dumps; it must outlive the goroutine).
struct WakeCall {
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;
  std::size_t stack_size = 0;
  const char* name = "";
};

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
  // already is cancelled. Deadlines still apply. Only this goroutine's operation is
  // woken; on a stream goro did not make (not a Conn, nor a TlsConn over one) the
  // operation cannot be woken and runs to its end.
  Result<std::size_t> read(void* buf, std::size_t len, const Context& ctx);
  Result<std::size_t> write(const void* buf, std::size_t len, const Context& ctx);

  // For servers, the netpoller's one call up into the layers above (net.md, "Waking a
  // connection"): arranges for call to start on a new goroutine once `what` happens,
  // perhaps before this returns; one start per call. With Wake::readable, no goroutine
  // may read until it has started: a connection waits for its next request holding no
  // goroutine, and so no stack. With Wake::hangup, a server learns of a client leaving
  // while nobody reads (its handler runs). Returns false, arming nothing, when the stream
  // cannot (a TLS stream cannot wait for readable: it may hold decrypted bytes; a stream
  // goro did not make can do neither), or, for readable, when bytes may be waiting
  // already: then the caller reads as usual.
  virtual bool start_on(Wake what, const WakeCall& call) {
    (void)what;
    (void)call;
    return false;
  }
  // Takes back a start_on(what) whose goroutine has not started: true when its call
  // will not run, false when it runs or ran (or nothing was armed). A server takes back
  // its hang-up start before the connection goes; a stream closed with one armed starts
  // it, so that its argument is never lost.
  virtual bool cancel_start(Wake what) {
    (void)what;
    return false;
  }

  // When the netpoller last saw bytes arrive on the stream's socket (every arrival is
  // stamped, whether a goroutine waits for it or not), on the steady clock; the epoch
  // when it has not yet, or on a stream goro did not make. A server reads it as the
  // time a request arrived, to see how long the request waited before it was served.
  virtual std::chrono::steady_clock::time_point readable_at() const { return {}; }
};

// Runs op (a call, or several, on stream s in direction mode) so that ctx's cancellation
// interrupts it: its waits on s return and op's result becomes ctx.err(). Only the calling
// goroutine's waits are interrupted, and only on streams goro made (see Stream::read). The
// building block of Stream::read(ctx) and of callers that have several calls to make
// under one context.
template <class Op>
auto with_context(Stream& s, IoMode mode, const Context& ctx, Op&& op) -> decltype(op());

// Reads exactly len bytes unless the stream ends first. Returns the count read: len,
// or less (possibly 0) when the stream ended. Blocks like Stream::read.
Result<std::size_t> read_full(Stream& s, void* buf, std::size_t len);

namespace detail {
// with_context without the template (net/src/stream.cpp): runs op(arg) with ctx watched.
enum class ContextRun : std::uint8_t { ran, interrupted, not_run };
ContextRun run_with_context(Stream& s, IoMode mode, const Context& ctx, void (*op)(void*),
                            void* arg);
}  // namespace detail

template <class Op>
auto with_context(Stream& s, IoMode mode, const Context& ctx, Op&& op) -> decltype(op()) {
  using R = decltype(op());
  if (auto e = ctx.err()) return e;
  if (!ctx.can_cancel()) return op();
  struct Call {
    Op* op{};
    std::optional<R> result{};
  } call{&op, std::nullopt};
  const detail::ContextRun run = detail::run_with_context(
      s, mode, ctx,
      [](void* p) {
        auto* c = static_cast<Call*>(p);
        c->result.emplace((*c->op)());
      },
      &call);
  if (run == detail::ContextRun::not_run) return ctx.err();
  std::error_code ec;
  if constexpr (std::is_same_v<R, std::error_code>) {
    ec = *call.result;
  } else {
    if (!*call.result) ec = call.result->error();
  }
  // A failure while ctx's cancellation was interrupting the waits is ctx's.
  if (ec && (run == detail::ContextRun::interrupted || ec == make_error_code(errc::interrupted))) {
    if (auto e = ctx.err()) return e;
  }
  return std::move(*call.result);
}

}  // namespace goro::net
