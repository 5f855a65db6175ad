// goro::ThreadLocal: per-thread state that code running on goroutines can use safely —
// a cache, a buffer ring, a random generator: things any thread may keep its own copy
// of, which a goroutine borrows for a few instructions.
//
//   goro::ThreadLocal date_cache = [] { return DateCache{}; };
//
//   {
//     auto cache = date_cache.use();   // this thread's DateCache
//     if (cache->second != now) cache->refresh(now);
//     out.append(cache->line);
//   }                                  // the scope ends before anything can park
//
// Why not a plain `thread_local`: a goroutine that parks (a channel, a lock, a sleep,
// network I/O, a Context ending, even the safe point of a runtime call) may resume on
// another thread. Compilers treat the thread pointer as constant within a function, so
// the address of a `thread_local` read before such a call may be reused after it, and
// the goroutine would then edit another thread's copy while that thread edits it too.
// use() computes the address in a function the compiler cannot inline or treat as
// pure, every time.
//
// The rule: a Scope is a window in which the goroutine must not call the runtime —
// nothing that may park or yield (channels, Mutex, sleep, I/O, goro::blocking) and
// nothing that ends a Context or readies a goroutine. The runtime checks it: such a call
// inside an open Scope ends the process with "goro: fatal error: ... inside a
// goro::ThreadLocal scope" and a stack that names the call. Take what you need out of
// the state, close the scope, then do the rest (free an evicted object, say, after the
// scope: its destructor may call the runtime).
//
// A Scope lives to the end of the full expression that made it: `send(*counter.use())`
// holds it through send, which parks. Copy the value out first.
//
// Off a goroutine (a plain thread, the scheduler's own stacks) use() is that thread's
// value and nothing is checked. The value is made by the factory on a thread's first
// use() and destroyed when the thread exits. The factory must be a lambda that captures
// nothing; each lambda expression is its own storage.
#pragma once

#include <type_traits>

namespace goro {

namespace detail {
struct G;
// Opens a ThreadLocal scope on the calling goroutine (nullptr off a goroutine); the
// runtime refuses to park or switch it until the matching close.
G* thread_local_scope_open() noexcept;
void thread_local_scope_close(G* g) noexcept;
}  // namespace detail

template <class Factory>
class ThreadLocal {
  static_assert(std::is_empty_v<Factory> && std::is_default_constructible_v<Factory>,
                "goro::ThreadLocal takes a lambda that captures nothing");

 public:
  using value_type = std::invoke_result_t<Factory>;

  constexpr ThreadLocal(Factory) noexcept {}
  ThreadLocal(const ThreadLocal&) = delete;
  ThreadLocal& operator=(const ThreadLocal&) = delete;

  // The calling thread's value, for as long as the Scope lives (see the rule above).
  class Scope {
   public:
    ~Scope() { detail::thread_local_scope_close(g_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    value_type& operator*() const noexcept { return *value_; }
    value_type* operator->() const noexcept { return value_; }

   private:
    friend class ThreadLocal;
    Scope() noexcept : g_(detail::thread_local_scope_open()), value_(address()) {}
    detail::G* g_;
    value_type* value_;
  };

  [[nodiscard]] Scope use() const noexcept { return Scope(); }

 private:
  // Not inlined, and not pure (the asm): every call computes the address anew, on the
  // thread that makes it.
  [[gnu::noinline]] static value_type* address() noexcept {
    thread_local value_type value = Factory{}();
    value_type* p = &value;
    asm volatile("" : "+r"(p) : : "memory");
    return p;
  }
};

}  // namespace goro
