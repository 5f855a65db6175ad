// goro::local<T>: goroutine-local storage, for state that must follow a goroutine across
// the threads it runs on (a request id for logs, a per-goroutine cache, a library
// handle that must not be shared).
//
//   goro::local<std::string> request_id;
//   request_id.get() = "r-42";          // this goroutine's string, made on first use
//   log(request_id.get());               // still "r-42" after any park or thread change
//
// A `thread_local` is the thread's, and a goroutine may resume on another thread after
// any runtime call (a channel, a lock, a sleep, network I/O); a `local` is the
// goroutine's. Each goroutine's value is made on its first get() (value-initialised, or
// a copy of the initial value given to the constructor) and destroyed when the goroutine
// returns, on the goroutine, in the reverse order of first use. Off a goroutine (a plain
// thread, or between goro::run calls), get() returns the calling thread's value instead,
// destroyed when the thread exits. A goroutine parked when goro::run returns is
// abandoned with its values, as its stack is.
//
// A local must outlive every goroutine that uses it: declare it at namespace scope or
// as a static. get() costs a walk of the goroutine's own short list: a few loads for the
// handful of locals a program has.
#pragma once

#include <cstddef>
#include <new>
#include <optional>
#include <utility>

namespace goro {

namespace detail {
// A key for a new local (never reused).
std::size_t local_new_key() noexcept;
// The calling goroutine's (or, off a goroutine, thread's) value for key; nullptr when
// there is none yet.
void* local_find(std::size_t key) noexcept;
// Records value for key, to be destroyed by destroy(value) when the goroutine (or
// thread) ends.
void local_store(std::size_t key, void* value, void (*destroy)(void*));
}  // namespace detail

template <class T>
class local {
 public:
  local() : key_(detail::local_new_key()) {}
  explicit local(T initial) : key_(detail::local_new_key()), initial_(std::move(initial)) {}
  local(const local&) = delete;
  local& operator=(const local&) = delete;

  // This goroutine's value, made on first use.
  T& get() {
    if (void* p = detail::local_find(key_)) return *static_cast<T*>(p);
    T* value = initial_ ? new T(*initial_) : new T();
    detail::local_store(key_, value, [](void* p) { delete static_cast<T*>(p); });
    return *value;
  }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }

  // Whether this goroutine has made its value.
  bool has_value() const noexcept { return detail::local_find(key_) != nullptr; }

 private:
  std::size_t key_;
  std::optional<T> initial_;
};

}  // namespace goro
