// goro::Chan<T>: Go's channels. A typed, FIFO pipe between goroutines, unbuffered
// (every send waits for a receiver: a rendezvous) or buffered (sends wait only while the
// buffer is full). Blocking parks the goroutine, never the OS thread.
//
//   goro::Chan<int> ch;            // unbuffered
//   goro::Chan<std::string> q(64); // buffered, capacity 64
//   goro::go([ch] { ch.send(42); ch.close(); });
//   for (int v : ch) use(v);       // until closed and drained
//
// A Chan is a handle: copies refer to the same channel (shared ownership, like a Go
// channel value), so goroutines capture it by value, and every operation is const on
// the handle (it changes the channel, not the handle): a lambda that captures a Chan by
// value and sends on it needs no `mutable`. Semantics are Go's:
//  - send on a closed channel throws goro::ChanClosed (Go panics); so do closing a
//    closed channel and closing a nil one;
//  - a receive from a closed channel first drains the buffer, then yields "nothing"
//    (std::nullopt from recv(), {T{}, false} from recv2()) at once, forever;
//  - close() wakes every blocked receiver (they get nothing) and every blocked sender
//    (their send throws ChanClosed);
//  - a value sent to a waiting receiver is moved straight into that receiver (no trip
//    through the buffer), and blocked senders and receivers are served in FIFO order;
//  - a nil channel (Chan<T>::nil()) blocks every send and receive forever, and a select
//    case on it is never ready.
// Values move through the channel: T must be nothrow move constructible (copies, which
// may throw, are made before any lock is taken).
// All blocking calls must be made on a goroutine.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <goro/scheduler/detail/runtime.hpp>

namespace goro {

// Thrown by send on a closed channel, by close of a closed or nil channel, and by a
// select whose chosen case is a send on a closed channel (Go's panics for these).
class ChanClosed : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {

struct ChanBase;  // the type-erased channel; scheduler/src/chan_impl.hpp

// How the type-erased channel moves and destroys values of one element type.
struct ElemOps {
  std::size_t size{};
  std::size_t align{};
  void (*move_construct)(void* dst, void* src) noexcept;  // ::new (dst) T(std::move(*src))
  void (*destroy)(void* p) noexcept;
};

template <class T>
inline constexpr ElemOps elem_ops_for{
    sizeof(T), alignof(T),
    [](void* dst, void* src) noexcept { ::new (dst) T(std::move(*static_cast<T*>(src))); },
    [](void* p) noexcept { static_cast<T*>(p)->~T(); }};

// Raw, correctly aligned storage for one T that a channel may construct into.
template <class T>
struct ElemSlot {
  alignas(T) unsigned char bytes[sizeof(T)];
  void* raw() noexcept { return bytes; }
  T* get() noexcept { return std::launder(reinterpret_cast<T*>(bytes)); }
  // Moves the constructed T out and destroys it in place.
  T take() noexcept {
    T v(std::move(*get()));
    get()->~T();
    return v;
  }
};

// Creates a channel of capacity cap for elements described by ops. Throws
// std::length_error if the buffer would not fit in memory, std::bad_alloc.
std::shared_ptr<ChanBase> chan_make(std::size_t cap, const ElemOps* ops);

// Sends the T at elem (moved from only if the send happens). block: wait until it can
// happen. Returns whether it happened. c == nullptr is a nil channel. Throws ChanClosed.
bool chan_send(ChanBase* c, void* elem, bool block);

// Receives into dst, raw storage for a T. block: wait until something arrives.
// Returns whether the receive happened; then *received says whether a T was constructed
// at dst (false: the channel is closed and drained).
bool chan_recv(ChanBase* c, void* dst, bool block, bool* received);

// Closes c. Throws ChanClosed if c is nil or already closed.
void chan_close(ChanBase* c);

std::size_t chan_len(ChanBase* c) noexcept;
std::size_t chan_cap(const ChanBase* c) noexcept;

}  // namespace detail

template <class T>
class Chan {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "goro::Chan<T> needs a nothrow move constructible T");
  static_assert(!std::is_reference_v<T> && !std::is_const_v<T>,
                "goro::Chan<T> needs an unqualified object type");

 public:
  // A new unbuffered channel. Never blocks.
  Chan() : Chan(std::size_t{0}) {}

  // A new channel that buffers up to capacity values (0: unbuffered). Never blocks.
  explicit Chan(std::size_t capacity)
      : impl_(detail::chan_make(capacity, &detail::elem_ops_for<T>)) {}

  // Returns the nil channel (sends and receives on it block forever; a select case on
  // it is never ready). Never blocks.
  static Chan nil() noexcept { return Chan(NilTag{}); }

  // Sends a copy of v; blocks until a receiver takes it or there is room in the buffer.
  // Throws ChanClosed if the channel is (or gets) closed first.
  void send(const T& v) const {
    T copy(v);
    detail::chan_send(impl_.get(), &copy, true);
  }
  // Sends v (moved); blocks like send(const T&).
  void send(T&& v) const { detail::chan_send(impl_.get(), &v, true); }

  // Sends only if that can happen now (a receiver waits or the buffer has room); never
  // blocks. Returns whether it was sent; v is moved from only then. Throws ChanClosed.
  bool try_send(T&& v) const { return detail::chan_send(impl_.get(), &v, false); }
  // Like try_send(T&&) with a copy of v (made whether or not it is sent). Never blocks.
  bool try_send(const T& v) const {
    T copy(v);
    return detail::chan_send(impl_.get(), &copy, false);
  }

  // Receives the next value; blocks until there is one. std::nullopt: the channel is
  // closed and drained.
  std::optional<T> recv() const {
    detail::ElemSlot<T> slot;
    bool received = false;
    detail::chan_recv(impl_.get(), slot.raw(), true, &received);
    if (!received) return std::nullopt;
    return std::optional<T>(slot.take());
  }

  // Go's `v, ok := <-ch`: {value, true}, or {T{}, false} once closed and drained. Blocks.
  std::pair<T, bool> recv2() const requires std::is_default_constructible_v<T> {
    detail::ElemSlot<T> slot;
    bool received = false;
    detail::chan_recv(impl_.get(), slot.raw(), true, &received);
    if (!received) return {T{}, false};
    return {slot.take(), true};
  }

  // Receives only if a value is available now; never blocks. std::nullopt: nothing to
  // take, whether the channel is open and empty or closed and drained (a select with a
  // default case tells these apart).
  std::optional<T> try_recv() const {
    detail::ElemSlot<T> slot;
    bool received = false;
    if (!detail::chan_recv(impl_.get(), slot.raw(), false, &received) || !received)
      return std::nullopt;
    return std::optional<T>(slot.take());
  }

  // Closes the channel: no more sends; receivers drain the buffer, then get nothing.
  // Wakes all blocked receivers and senders. Never blocks. Throws ChanClosed if the
  // channel is already closed or nil.
  void close() const { detail::chan_close(impl_.get()); }

  // Number of values in the buffer now (a snapshot). Never blocks.
  std::size_t len() const noexcept { return detail::chan_len(impl_.get()); }
  // Buffer capacity (0: unbuffered or nil). Never blocks.
  std::size_t cap() const noexcept { return detail::chan_cap(impl_.get()); }

  // Whether both handles refer to the same channel. Never blocks.
  friend bool operator==(const Chan& a, const Chan& b) noexcept { return a.impl_ == b.impl_; }

  // Range iteration: `for (T v : ch)` receives until the channel is closed and drained.
  // begin() and ++ block in recv().
  class iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    T& operator*() noexcept { return *current_; }
    T* operator->() noexcept { return &*current_; }
    iterator& operator++() {
      current_ = chan_->recv();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
      return !it.current_.has_value();
    }

   private:
    friend class Chan;
    explicit iterator(const Chan* chan) : chan_(chan), current_(chan->recv()) {}
    const Chan* chan_ = nullptr;
    std::optional<T> current_;
  };
  // Receives the first value; blocks. end() is the closed-and-drained sentinel.
  iterator begin() const { return iterator(this); }
  std::default_sentinel_t end() const noexcept { return {}; }

  // For goro's own code (select): the type-erased channel, nullptr for nil. Never blocks.
  detail::ChanBase* base() const noexcept { return impl_.get(); }

 private:
  struct NilTag {};
  explicit Chan(NilTag) noexcept {}
  std::shared_ptr<detail::ChanBase> impl_;
};

}  // namespace goro
