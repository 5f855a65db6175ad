// AArch64 smoke test: the port-specific parts of goro, run for real.
//
// The AArch64 context switch (scheduler/src/switch_aarch64.S), the first frame of a
// goroutine (scheduler/src/machine_context.hpp) and the raw recvfrom/sendto system calls
// (net/src/sys.hpp) are only exercised by running goroutines on an AArch64 machine.
// scripts/check-aarch64.sh cross-compiles this file and runs it under qemu-aarch64
// with GORO_MAXPROCS=1, 2 and 4. It needs no GoogleTest and no OpenSSL (neither is
// available for arm64 on the x86-64 build machines), so it is a plain program: every
// check prints one "PASS <name>" or "FAIL <name>: <why>" line, and the program exits
// with status 1 if any check failed. Run with the argument "stack-overflow" it instead
// overflows a goroutine stack and must abort with the runtime's report (the script
// checks that).
//
// It is not part of CI. Everything here also builds and runs on x86-64, except the
// register check, which is AArch64 only and reports SKIP elsewhere.
#include <execinfo.h>
#include <fenv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <goro/net/dial.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/detail/introspect.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int failures = 0;

// Prints the outcome of one check. `why` is printed only on failure.
void report(const char* name, bool ok, const std::string& why = {}) {
  if (ok) {
    std::printf("PASS %s\n", name);
  } else {
    std::printf("FAIL %s: %s\n", name, why.c_str());
    ++failures;
  }
  std::fflush(stdout);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

long thread_id() { return syscall(SYS_gettid); }

// glibc declares errno's accessor const, so inside one function the compiler may reuse
// errno's address from before a switch (see <goro/scheduler/runtime.hpp>). These opaque
// accessors read and write the errno of the thread the goroutine is on right now.
__attribute__((noinline)) int read_errno() {
  asm volatile("" ::: "memory");
  return errno;
}
__attribute__((noinline)) void write_errno(int v) {
  asm volatile("" ::: "memory");
  errno = v;
}

// ---------------------------------------------------------------------------------
// Scheduling basics.

// 10,000 goroutines, half of which yield once, joined with a WaitGroup: every G's
// first frame (make_context + goro_start) runs and every G exits cleanly.
void check_spawn_and_join() {
  constexpr int kGoroutines = 10'000;
  std::atomic<int> ran{0};
  goro::WaitGroup wg;
  wg.add(kGoroutines);
  for (int i = 0; i < kGoroutines; ++i)
    goro::go([&, i] {
      if (i % 2 == 0) goro::yield();
      ran.fetch_add(1, std::memory_order_relaxed);
      wg.done();
    });
  wg.wait();
  report("spawn_join_10k", ran.load() == kGoroutines,
         "ran " + std::to_string(ran.load()) + " of " + std::to_string(kGoroutines));
}

// Two goroutines pass a counter back and forth over unbuffered channels: each round
// trip is two parks and two switches.
void check_ping_pong() {
  constexpr int kRoundTrips = 100'000;
  goro::Chan<int> ping, pong;
  goro::WaitGroup wg;
  wg.add(1);
  bool order_ok = true;
  goro::go([&] {
    for (int i = 0; i < kRoundTrips; ++i) {
      std::optional<int> v = ping.recv();
      if (!v || *v != i) order_ok = false;
      pong.send(v.value_or(-1) + 1);
    }
    wg.done();
  });
  int last = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i) {
    ping.send(i);
    last = pong.recv().value_or(-1);
    if (last != i + 1) order_ok = false;
  }
  wg.wait();
  std::printf("  ping-pong: %d round trips in %.0f ms\n", kRoundTrips, ms_since(t0));
  report("chan_ping_pong_100k", order_ok && last == kRoundTrips,
         "last value " + std::to_string(last) + ", order ok " + std::to_string(order_ok));
}

// Two goroutines take strict turns, each yielding until the shared counter says it is
// its turn: with one P this finishes only if every yield really lets the other run.
void check_yield() {
  constexpr int kTurns = 1'000;
  std::atomic<int> turn{0}, yields{0};
  goro::WaitGroup wg;
  wg.add(2);
  for (int me = 0; me < 2; ++me)
    goro::go([&, me] {
      for (int i = 0; i < kTurns; ++i) {
        while (turn.load(std::memory_order_acquire) % 2 != me) {
          yields.fetch_add(1, std::memory_order_relaxed);
          goro::yield();
        }
        turn.fetch_add(1, std::memory_order_release);
      }
      wg.done();
    });
  wg.wait();
  report("yield", turn.load() == 2 * kTurns && yields.load() > 0,
         std::to_string(turn.load()) + " turns, " + std::to_string(yields.load()) + " yields");
}

// Sleeps last at least as long as asked, and timers fire in deadline order.
void check_sleep_and_timers() {
  const auto t0 = Clock::now();
  goro::sleep(20ms);
  const double slept = ms_since(t0);

  constexpr int kTimers = 5;
  goro::Chan<int> fired(kTimers);
  goro::WaitGroup wg;
  wg.add(kTimers);
  for (int i = 0; i < kTimers; ++i)
    goro::go([&, i] {
      goro::sleep(std::chrono::milliseconds(15 * (kTimers - i)));  // i = 4 fires first
      fired.send(i);
      wg.done();
    });
  wg.wait();
  std::string order;
  for (int i = 0; i < kTimers; ++i) order += std::to_string(fired.recv().value_or(-1));
  // The upper bound only catches a timer that never fires on time at all: qemu on a
  // shared machine is slow.
  report("sleep_and_timers", slept >= 20.0 && slept < 2000.0 && order == "43210",
         "slept " + std::to_string(slept) + " ms for 20 ms, fire order " + order);
}

// A plain int guarded by goro::Mutex, incremented by 64 goroutines that also yield
// while holding it, so that the others park on the mutex.
void check_mutex_counter() {
  constexpr int kGoroutines = 64, kIncrements = 2'000;
  goro::Mutex mu;
  long counter = 0;
  goro::WaitGroup wg;
  wg.add(kGoroutines);
  for (int g = 0; g < kGoroutines; ++g)
    goro::go([&] {
      for (int i = 0; i < kIncrements; ++i) {
        mu.lock();
        const long seen = counter;
        if (i % 100 == 0) goro::yield();
        counter = seen + 1;
        mu.unlock();
      }
      wg.done();
    });
  wg.wait();
  report("mutex_counter", counter == long{kGoroutines} * kIncrements,
         "counter " + std::to_string(counter));
}

// select: a timeout on a channel that never becomes ready, a channel that becomes ready
// before a long timeout, and a default case.
void check_select() {
  goro::Chan<int> never;
  const auto t0 = Clock::now();
  const int timed_out = goro::select(goro::recv_case(never), goro::timeout_case(30ms));
  const double waited = ms_since(t0);

  goro::Chan<int> later;
  goro::go([&] {
    goro::sleep(10ms);
    later.send(7);
  });
  std::optional<int> got;
  const auto t1 = Clock::now();
  const int ready = goro::select(goro::recv_case(later, got), goro::timeout_case(10s));
  const double ready_after = ms_since(t1);

  const int dflt = goro::select(goro::recv_case(never), goro::default_case);
  report("select_timeout",
         timed_out == goro::select_timeout && waited >= 30.0 && ready == 0 && got == 7 &&
             ready_after < 5000.0 && dflt == goro::select_default,
         "timeout case " + std::to_string(timed_out) + " after " + std::to_string(waited) +
             " ms; ready case " + std::to_string(ready) + " after " + std::to_string(ready_after) +
             " ms; default case " + std::to_string(dflt));
}

// ---------------------------------------------------------------------------------
// Stacks and per-goroutine machine state.

// Each frame holds 512 bytes; 700 levels use ~400 KiB of a 1 MiB goroutine stack. The
// goroutine yields every 50 levels, so it is switched out (and may move to another
// thread) with a deep stack.
__attribute__((noinline)) long recurse(int depth, int seed) {
  volatile char frame[512];
  for (std::size_t i = 0; i < sizeof frame; i += 64) frame[i] = static_cast<char>(depth + seed);
  if (depth % 50 == 0) goro::yield();
  long below = depth == 0 ? 0 : recurse(depth - 1, seed);
  long here = 0;
  for (std::size_t i = 0; i < sizeof frame; i += 64) here += frame[i];
  return below + here;
}

void check_deep_recursion() {
  constexpr int kGoroutines = 4, kDepth = 700;
  std::atomic<int> wrong{0};
  goro::WaitGroup wg;
  wg.add(kGoroutines);
  for (int g = 0; g < kGoroutines; ++g)
    goro::go(goro::GoOptions{.stack_size = 1 << 20, .name = "deep"}, [&, g] {
      long expected = 0;
      for (int d = 0; d <= kDepth; ++d)
        expected += 8L * static_cast<char>(d + g);  // char is unsigned on AArch64
      if (recurse(kDepth, g) != expected) wrong.fetch_add(1);
      wg.done();
    });
  wg.wait();
  report("deep_recursion_400k", wrong.load() == 0,
         std::to_string(wrong.load()) + " goroutines computed a wrong sum");
}

// A backtrace taken on a goroutine stack (glibc's backtrace() walks the unwind tables)
// must end cleanly at goro_start, the outermost frame, rather than run off the top of
// the stack.
void check_backtrace() {
  int frames = 0;
  goro::WaitGroup wg;
  wg.add(1);
  goro::go([&] {
    goro::yield();
    void* pcs[256];
    frames = backtrace(pcs, 256);
    wg.done();
  });
  wg.wait();
  std::printf("  backtrace: %d frames from a goroutine\n", frames);
  report("backtrace_on_goroutine", frames >= 2 && frames < 32, std::to_string(frames) + " frames");
}

// With the argument "stack-overflow" the program overflows a goroutine's guarded stack
// instead of running the checks; scripts/check-aarch64.sh expects it to abort with
// "goroutine N: stack overflow" (reported by the SIGSEGV handler on the alternate
// signal stack, which reads the faulting sp from the AArch64 signal frame).
__attribute__((noinline)) int overflow(int n, int limit) {
  volatile char pad[512];
  pad[0] = static_cast<char>(n);
  if (n == limit) return 0;  // never: the caller passes -1
  return overflow(n + 1, limit) + pad[0];
}

void run_stack_overflow() {
  goro::run([] {
    goro::WaitGroup wg;
    wg.add(1);
    goro::go(goro::GoOptions{.stack_size = 64 * 1024}, [&] {
      overflow(0, -1);
      wg.done();
    });
    wg.wait();
  });
}

// Parks inside a destructor that runs during unwinding: std::uncaught_exceptions()
// must still be 1 afterwards, and errno must be this goroutine's.
struct ParkDuringUnwind {
  int errno_value;
  std::atomic<int>* wrong;
  ~ParkDuringUnwind() {
    write_errno(errno_value);
    const int before = std::uncaught_exceptions();
    goro::yield();
    if (before != 1 || std::uncaught_exceptions() != 1 || read_errno() != errno_value)
      wrong->fetch_add(1);
  }
};

// 64 goroutines throw, park while unwinding, catch, park inside the handler, rethrow
// with `throw;` and catch again. Each uses its own message and errno value, so state
// leaking between goroutines (or staying behind on a thread) is caught.
void check_exceptions_across_parks() {
  constexpr int kGoroutines = 64, kRounds = 20;
  std::atomic<int> wrong{0}, migrated{0}, parks{0};
  goro::WaitGroup wg;
  wg.add(kGoroutines);
  for (int g = 0; g < kGoroutines; ++g)
    goro::go([&, g] {
      const std::string message = "goroutine exception " + std::to_string(g);
      for (int round = 0; round < kRounds; ++round) {
        try {
          try {
            ParkDuringUnwind guard{2000 + g, &wrong};
            throw std::runtime_error(message);
          } catch (const std::runtime_error& e) {
            write_errno(1000 + g);
            const long before = thread_id();
            goro::sleep(std::chrono::microseconds(50 * (g % 7)));
            parks.fetch_add(1, std::memory_order_relaxed);
            if (thread_id() != before) migrated.fetch_add(1, std::memory_order_relaxed);
            if (read_errno() != 1000 + g || std::current_exception() == nullptr ||
                std::uncaught_exceptions() != 0 || message != e.what())
              wrong.fetch_add(1);
            throw;
          }
        } catch (const std::runtime_error& e) {
          if (message != e.what()) wrong.fetch_add(1);
        }
        if (std::current_exception() != nullptr) wrong.fetch_add(1);
      }
      wg.done();
    });
  wg.wait();
  std::printf("  exceptions: %d of %d parks in a catch handler resumed on another thread\n",
              migrated.load(), parks.load());
  report("exceptions_errno_across_parks", wrong.load() == 0,
         std::to_string(wrong.load()) + " wrong observations");
}

#if defined(__aarch64__)

// The AAPCS64 callee-saved registers, as loaded and read back by
// goro_smoke_callee_saved_roundtrip.
struct CalleeSaved {
  std::uint64_t x[10];  // x19-x28
  double d[8];          // d8-d15
};

extern "C" void goro_smoke_callee_saved_roundtrip(const CalleeSaved* in, CalleeSaved* out,
                                                  void (*fn)());

// goro_smoke_callee_saved_roundtrip(in, out, fn): loads x19-x28 and d8-d15 from *in,
// calls fn(), stores those registers to *out, and returns with the caller's values
// restored. A compiler is free to keep a value anywhere across a call, so only
// assembly can pin values to the registers the switch must preserve.
asm(R"(
        .pushsection .text
        .globl  goro_smoke_callee_saved_roundtrip
        .type   goro_smoke_callee_saved_roundtrip, %function
        .p2align 2
goro_smoke_callee_saved_roundtrip:
        stp     x29, x30, [sp, #-176]!
        mov     x29, sp
        stp     x19, x20, [sp, #16]
        stp     x21, x22, [sp, #32]
        stp     x23, x24, [sp, #48]
        stp     x25, x26, [sp, #64]
        stp     x27, x28, [sp, #80]
        stp     d8,  d9,  [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        str     x1, [sp, #160]
        ldp     x19, x20, [x0, #0]
        ldp     x21, x22, [x0, #16]
        ldp     x23, x24, [x0, #32]
        ldp     x25, x26, [x0, #48]
        ldp     x27, x28, [x0, #64]
        ldp     d8,  d9,  [x0, #80]
        ldp     d10, d11, [x0, #96]
        ldp     d12, d13, [x0, #112]
        ldp     d14, d15, [x0, #128]
        blr     x2
        ldr     x9, [sp, #160]
        stp     x19, x20, [x9, #0]
        stp     x21, x22, [x9, #16]
        stp     x23, x24, [x9, #32]
        stp     x25, x26, [x9, #48]
        stp     x27, x28, [x9, #64]
        stp     d8,  d9,  [x9, #80]
        stp     d10, d11, [x9, #96]
        stp     d12, d13, [x9, #112]
        stp     d14, d15, [x9, #128]
        ldp     x19, x20, [sp, #16]
        ldp     x21, x22, [sp, #32]
        ldp     x23, x24, [sp, #48]
        ldp     x25, x26, [sp, #64]
        ldp     x27, x28, [sp, #80]
        ldp     d8,  d9,  [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        ldp     x29, x30, [sp], #176
        ret
        .size   goro_smoke_callee_saved_roundtrip, .-goro_smoke_callee_saved_roundtrip
        .popsection
)");

static_assert(offsetof(CalleeSaved, d) == 80 && sizeof(CalleeSaved) == 144,
              "the assembly above hard-codes this layout");

// What runs between loading and reading back the registers: parks twice, once on a
// timer, so the goroutine is resumed by another switch and possibly another thread.
void park_twice() {
  goro::yield();
  goro::sleep(100us);
}

// 32 goroutines each pin their own values in x19-x28 and d8-d15 and park; every value
// must come back. Each also runs with its own FP rounding mode (FPCR), which the switch
// saves per goroutine: it must be unchanged after the parks.
void check_callee_saved_registers() {
  constexpr int kGoroutines = 32, kRounds = 50;
  constexpr int kModes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  std::atomic<int> wrong_regs{0}, wrong_mode{0};
  goro::WaitGroup wg;
  wg.add(kGoroutines);
  for (int g = 0; g < kGoroutines; ++g)
    goro::go([&, g] {
      const int mode = kModes[g % 4];
      fesetround(mode);
      for (int round = 0; round < kRounds; ++round) {
        CalleeSaved in{}, out{};
        for (int r = 0; r < 10; ++r)
          in.x[r] =
              0x1900'0000'0000'0000ULL + (std::uint64_t(g) << 32) + std::uint64_t(round) * 16 + r;
        for (int r = 0; r < 8; ++r) in.d[r] = g * 1000.0 + round + r / 8.0 + 0.0625;
        goro_smoke_callee_saved_roundtrip(&in, &out, &park_twice);
        if (std::memcmp(&in, &out, sizeof in) != 0) wrong_regs.fetch_add(1);
        if (fegetround() != mode) wrong_mode.fetch_add(1);
      }
      fesetround(FE_TONEAREST);
      wg.done();
    });
  wg.wait();
  report("callee_saved_x19_x28_d8_d15_fpcr", wrong_regs.load() == 0 && wrong_mode.load() == 0,
         std::to_string(wrong_regs.load()) + " register mismatches, " +
             std::to_string(wrong_mode.load()) + " rounding-mode mismatches");
}

#else

void check_callee_saved_registers() {
  std::printf("SKIP callee_saved_x19_x28_d8_d15_fpcr: AArch64 only\n");
}

#endif

// ---------------------------------------------------------------------------------
// Network: a TCP echo over 127.0.0.1 between goroutines. On AArch64 every read and
// write goes through sys.hpp's svc-based recvfrom/sendto.

void check_tcp_echo() {
  auto listener = goro::net::listen("tcp", "127.0.0.1:0");
  if (!listener) {
    report("tcp_echo", false, "listen: " + listener.error().message());
    return;
  }
  const std::string address = listener->addr().to_string();
  goro::net::Listener ln = std::move(*listener);
  goro::WaitGroup server_done;
  server_done.add(1);
  goro::go([&] {
    // One echo goroutine per connection, until the listener is closed.
    for (;;) {
      auto conn = ln.accept();
      if (!conn) break;
      goro::go([c = std::move(*conn)]() mutable {
        std::vector<char> buf(16 * 1024);
        for (;;) {
          auto n = c.read(buf.data(), buf.size());
          if (!n || *n == 0) break;
          if (!c.write(buf.data(), *n)) break;
        }
        (void)c.close();
      });
    }
    server_done.done();
  });

  // Four clients, each sending messages of 1 byte to 200 KB (large ones do not fit in
  // the socket buffers, so reads and writes hit EAGAIN and park) with a pattern of its
  // own, and checking that every byte comes back.
  constexpr int kClients = 4, kMessages = 40;
  std::atomic<int> bad{0};
  std::atomic<long> bytes{0};
  std::string first_error;
  goro::Mutex error_mu;
  goro::WaitGroup clients;
  clients.add(kClients);
  for (int cl = 0; cl < kClients; ++cl)
    goro::go([&, cl] {
      auto fail = [&](const std::string& why) {
        bad.fetch_add(1);
        error_mu.lock();
        if (first_error.empty()) first_error = why;
        error_mu.unlock();
      };
      auto conn = goro::net::dial("tcp", address);
      if (!conn) {
        fail("dial: " + conn.error().message());
      } else {
        std::vector<char> out, in;
        for (int m = 0; m < kMessages; ++m) {
          const std::size_t size = m == 0 ? 1 : std::size_t(m) * 5'000;
          out.resize(size);
          in.assign(size, 0);
          for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>(i * 31 + m * 7 + cl);
          // Write from a helper goroutine so a message larger than the socket buffers
          // cannot deadlock against our own unread echo.
          goro::WaitGroup wrote;
          wrote.add(1);
          bool write_ok = true;
          goro::go([&] {
            write_ok = static_cast<bool>(conn->write(out.data(), out.size()));
            wrote.done();
          });
          auto r = conn->read_full(in.data(), in.size());
          wrote.wait();
          if (!write_ok || !r || *r != size || in != out) {
            fail("message " + std::to_string(m) + " of " + std::to_string(size) + " bytes" +
                 (r ? " came back different" : ": " + r.error().message()));
            break;
          }
          bytes.fetch_add(static_cast<long>(size));
        }
        (void)conn->close();
      }
      clients.done();
    });
  clients.wait();
  (void)ln.close();
  server_done.wait();
  report("tcp_echo", bad.load() == 0 && bytes.load() > 0,
         std::to_string(bad.load()) + " clients failed; first error: " + first_error);
}

// ---------------------------------------------------------------------------------
// Preemption: a goroutine in a loop that never enters the runtime must not starve the
// others. With one hog per P, a ticker goroutine sleeping 1 ms at a time keeps
// ticking only if sysmon's SIGURG preemption takes the hogs' Ps away; and the main
// goroutine, itself asleep on a timer, only wakes up to stop the hogs for the same
// reason. A watchdog thread stops them after 20 s so that a failure is reported rather
// than hanging.
void check_preemption() {
  const int hogs = goro::maxprocs();
  std::atomic<bool> stop{false}, ticker_stop{false}, watchdog_fired{false}, main_woke{false};
  std::atomic<int> ticks{0};
  std::atomic<long> max_gap_us{0};  // longest time between two ticks while the hogs run

  goro::WaitGroup done;
  done.add(1 + hogs);
  goro::go([&] {
    auto last = Clock::now();
    while (!ticker_stop.load(std::memory_order_relaxed)) {
      goro::sleep(1ms);
      const auto now = Clock::now();
      const long gap_us = std::chrono::duration_cast<std::chrono::microseconds>(now - last).count();
      if (!stop.load(std::memory_order_relaxed) &&
          gap_us > max_gap_us.load(std::memory_order_relaxed))
        max_gap_us.store(gap_us, std::memory_order_relaxed);
      last = now;
      ticks.fetch_add(1, std::memory_order_relaxed);
    }
    done.done();
  });
  goro::sleep(20ms);
  max_gap_us.store(0);
  ticks.store(0);

  std::thread watchdog([&] {
    for (int i = 0; i < 2000 && !main_woke.load(); ++i) std::this_thread::sleep_for(10ms);
    if (!main_woke.load()) {
      watchdog_fired.store(true);
      stop.store(true);
    }
  });

  const std::uint64_t preemptions_before = goro::detail::preemptions();
  for (int i = 0; i < hogs; ++i)
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        // No runtime call, ever: only preemption can take this P away.
      }
      done.done();
    });
  const auto t0 = Clock::now();
  goro::sleep(500ms);
  const double window_ms = ms_since(t0);
  main_woke.store(true);
  const int ticks_during = ticks.load();
  const double gap = static_cast<double>(max_gap_us.load()) / 1000.0;
  stop.store(true);
  ticker_stop.store(true);
  done.wait();
  watchdog.join();
  const std::uint64_t preemptions = goro::detail::preemptions() - preemptions_before;

  std::printf(
      "  preemption: %d hog(s), %d ticks in %.0f ms, longest tick gap %.1f ms, "
      "%llu preemptions\n",
      hogs, ticks_during, window_ms, gap, static_cast<unsigned long long>(preemptions));
  // Without preemption nothing but the hogs runs: no ticks, and main never wakes. The
  // thresholds leave room for qemu's slowness; a starved ticker gets none at all.
  report("preemption_ticker_beside_hogs",
         !watchdog_fired.load() && ticks_during >= 50 && preemptions > 0 && gap < 250.0,
         watchdog_fired.load()
             ? std::string("main goroutine starved: the watchdog stopped the hogs")
             : std::to_string(ticks_during) + " ticks, longest gap " + std::to_string(gap) +
                   " ms, " + std::to_string(preemptions) + " preemptions");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "stack-overflow") == 0) {
    run_stack_overflow();
    std::printf("FAIL stack_overflow: the overflowing goroutine returned\n");
    return 1;
  }
  const int result = goro::run([] {
    std::printf("goro AArch64 smoke test: GOMAXPROCS=%d\n", goro::maxprocs());
    check_spawn_and_join();
    check_ping_pong();
    check_yield();
    check_sleep_and_timers();
    check_mutex_counter();
    check_select();
    check_deep_recursion();
    check_backtrace();
    check_exceptions_across_parks();
    check_callee_saved_registers();
    check_tcp_echo();
    check_preemption();
    std::printf("%s: %d check(s) failed with GOMAXPROCS=%d\n", failures ? "FAILED" : "OK", failures,
                goro::maxprocs());
    return failures;
  });
  return result == 0 ? 0 : 1;
}
