// goro::hooks_preloadable: makes a program able to take libgoro_hooks.so with
// LD_PRELOAD. The program is linked with -rdynamic (its goro symbols go into its dynamic
// symbol table, where the preloaded library binds to them) and with
// --undefined=goro_hooks_runtime_exports, this function, which is never called: it names
// every part of goro the hooks call, so the linker takes them into the program even if
// the program itself does not use them (net::FdWatch, contexts, WaitGroup).

#include <chrono>

#include <goro/net/wait_fd.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

extern "C" [[gnu::used, gnu::noinline]] void goro_hooks_runtime_exports(int fd) {
  auto watch = goro::net::FdWatch::open(fd, goro::net::Trigger::edge);
  if (watch) {
    goro::net::FdWatch moved(std::move(*watch));
    (void)moved.wait(goro::net::Interest::read, goro::net::no_deadline);
    moved.release();
  }
  const auto cancellable = goro::with_cancel(goro::background());
  (void)goro::net::wait_fd(fd, goro::net::Interest::read, cancellable.first);
  (void)goro::net::wait_fd(fd, goro::net::Interest::read, goro::net::no_deadline);
  cancellable.second();
  (void)cancellable.first.err();
  goro::WaitGroup wg;
  wg.add(1);
  goro::go([&wg] { wg.done(); });
  wg.wait();
  goro::sleep(std::chrono::nanoseconds(0));
  (void)goro::sleep(std::chrono::nanoseconds(0), cancellable.first);
  goro::yield();
  goro::blocking([] { return 0; });
  (void)goro::detail::poll_generation();
  (void)goro::detail::nanotime();
  (void)goro::detail::current_g();
  (void)make_error_code(goro::net::errc::timeout);
}
