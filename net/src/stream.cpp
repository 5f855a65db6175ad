// Stream's context-aware calls: with_context watches the context, and its cancellation
// interrupts the calling goroutine's waits on the descriptor under the stream (a Conn's,
// or the one under a TlsConn). The interruption goes through the netpoller's
// poll_interrupt, which names the goroutine, so that the stream's other users (a writer
// beside a cancelled read) go on.
#include <goro/net/stream.hpp>

#include <goro/net/conn.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/detail/runtime.hpp>

#include <atomic>

#include "internal.hpp"
#include "net_fd.hpp"

namespace goro::net {

Result<std::size_t> read_full(Stream& s, void* buf, std::size_t len) {
  char* p = static_cast<char*>(buf);
  std::size_t done = 0;
  while (done < len) {
    auto n = s.read(p + done, len - done);
    if (!n) return n.error();
    if (*n == 0) break;
    done += *n;
  }
  return done;
}

Result<std::size_t> Stream::read(void* buf, std::size_t len, const Context& ctx) {
  return with_context(*this, IoMode::read, ctx, [&] { return read(buf, len); });
}

Result<std::size_t> Stream::write(const void* buf, std::size_t len, const Context& ctx) {
  return with_context(*this, IoMode::write, ctx, [&] { return write(buf, len); });
}

namespace detail {

struct StreamAccess {
  static NetFd* fd(Conn& c) noexcept { return c.fd_.get(); }
};

namespace {

// The descriptor whose waits stand for s's: a Conn's, a TlsConn's inner Conn's; nullptr
// for a stream goro did not make.
NetFd* descriptor_of(Stream& s) noexcept {
  for (Stream* at = &s;;) {
    if (auto* c = dynamic_cast<Conn*>(at)) return StreamAccess::fd(*c);
    auto* t = dynamic_cast<TlsConn*>(at);
    if (t == nullptr) return nullptr;
    at = &t->inner();
  }
}

struct Interrupt {
  NetFd* fd;
  goro::detail::IoMode mode;
  goro::detail::G* waiter;
  std::atomic<bool> fired{false};
};

}  // namespace

ContextRun run_with_context(Stream& s, net::IoMode mode, const Context& ctx, void (*op)(void*),
                            void* arg) {
  Interrupt target{descriptor_of(s), to_poll(mode), goro::detail::current_g()};
  auto fire = [](goro::detail::CancelHook* h) {
    auto* t = static_cast<Interrupt*>(h->arg);
    t->fired.store(true, std::memory_order_release);
    if (t->fd != nullptr) t->fd->interrupt(t->mode, t->waiter);
  };
  {
    goro::detail::ContextWatch watch(ctx, fire, &target);
    if (!watch.ok()) return ContextRun::not_run;
    op(arg);
  }
  // The hook is gone: clear what it may have set after op returned.
  if (target.fd != nullptr) target.fd->clear_interrupt(target.mode, target.waiter);
  return target.fired.load(std::memory_order_acquire) ? ContextRun::interrupted : ContextRun::ran;
}

std::int64_t to_nanotime(Deadline d) noexcept {
  if (d == Deadline{}) return 0;
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d.time_since_epoch()).count();
  return ns > 0 ? static_cast<std::int64_t>(ns) : 1;
}

}  // namespace detail
}  // namespace goro::net
