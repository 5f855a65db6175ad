// goro::Context: cancellation, deadlines and request-scoped values that flow through
// blocking calls, like Go's context package.
//
//   auto [ctx, cancel] = goro::with_timeout(req.context(), std::chrono::seconds(1));
//   auto reply = client.get(url, ctx);   // returns context_errc::deadline_exceeded
//                                        // at 1 s, abandoning the backend call
//   switch (goro::select(goro::recv_case(ctx.done()), goro::recv_case(results))) { ... }
//
// A Context is a cheap, immutable handle (one shared pointer); copies refer to the same
// context. Derived contexts form a tree: cancelling one cancels every context derived
// from it, never its parent. A context is cancelled once, by the first of: its cancel
// function, its deadline, its parent's cancellation. No goroutine or thread exists per
// context: a deadline is a runtime timer, and cancellation wakes the parked operations
// that watch the context directly (the parked goroutine is readied; nothing polls).
//
// Blocking calls that take a Context return promptly with ctx.err() when it is
// cancelled: goro::sleep, Mutex::lock, WaitGroup::wait, select (through a
// recv_case(ctx.done())), net::dial, Listener::accept, Stream::read and write (TCP,
// Unix and TLS), and the HTTP client. The operation is abandoned as a whole: a read
// that returns the context's error has read nothing.
//
// Unlike Go, forgetting to call a cancel function leaks nothing: a derived context
// unlinks itself from its parent when its last handle goes. Calling it still matters
// to stop work early and to release a deadline's timer at once.
//
// A context with a deadline arms a runtime timer: create it while goro::run runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include <goro/scheduler/chan.hpp>

namespace goro {

// Why a context was cancelled (Go's context.Canceled and DeadlineExceeded).
enum class context_errc {
  canceled = 1,           // "context canceled": its cancel function, or a parent's
  deadline_exceeded = 2,  // "context deadline exceeded"
};
const std::error_category& context_category() noexcept;
std::error_code make_error_code(context_errc e) noexcept;

}  // namespace goro

template <>
struct std::is_error_code_enum<goro::context_errc> : std::true_type {};

namespace goro {

// A key for a context value of type T. Keys compare by identity (their address), so two
// libraries cannot collide: declare one `inline const` (or static) per value kind.
//   inline const goro::ContextKey<std::string> request_id{"request-id"};
template <class T>
class ContextKey {
 public:
  explicit constexpr ContextKey(std::string_view name) noexcept : name_(name) {}
  ContextKey(const ContextKey&) = delete;
  ContextKey& operator=(const ContextKey&) = delete;
  // For debugging output.
  std::string_view name() const noexcept { return name_; }

 private:
  std::string_view name_;
};

namespace detail {

struct ContextNode;  // scheduler/src/context.cpp
class CancelNode;

// A watcher of a context's cancellation, for goro's own blocking operations: fn runs
// once, on the cancelling thread (a goroutine, a scheduler thread for a deadline, or
// a foreign thread), while the context's lock is held. It must not block and must not
// call back into the context; typically it wakes a parked operation.
struct CancelHook {
  void (*fn)(CancelHook* self) = nullptr;
  void* arg = nullptr;
  // The context watched (set by context_watch); while linked, the list links and owner
  // (== watched) are guarded by its lock, and cancellation clears owner.
  CancelNode* watched = nullptr;
  CancelNode* owner = nullptr;
  CancelHook* prev = nullptr;
  CancelHook* next = nullptr;
};

struct ContextAccess;

}  // namespace detail

class Context {
 public:
  // The background context: never cancelled, no deadline, no values (Go's
  // context.Background()). Never blocks, allocates nothing.
  Context() noexcept = default;

  // A channel closed when the context is cancelled: use it in select. For a context that
  // can never be cancelled it is the nil channel (never ready).
  Chan<std::monostate> done() const;

  // {} while not cancelled; afterwards context_errc::canceled or deadline_exceeded.
  std::error_code err() const noexcept;
  bool cancelled() const noexcept { return static_cast<bool>(err()); }

  // When the context will be cancelled by a deadline (its own or an ancestor's).
  std::optional<std::chrono::steady_clock::time_point> deadline() const noexcept;

  // The value stored under key by with_value in this context or an ancestor (the
  // nearest wins); nullptr when none. Valid while any copy of this context lives.
  template <class T>
  const T* value(const ContextKey<T>& key) const noexcept {
    return static_cast<const T*>(find_value(&key));
  }

  // Whether this context can ever be cancelled (has a cancel function or a deadline
  // among its ancestors). Operations skip watching contexts that cannot.
  bool can_cancel() const noexcept;

 private:
  friend struct detail::ContextAccess;
  explicit Context(std::shared_ptr<detail::ContextNode> node) noexcept : node_(std::move(node)) {}
  const void* find_value(const void* key) const noexcept;

  std::shared_ptr<detail::ContextNode> node_;
};

// Cancels the context it came with (and everything derived from it), with
// context_errc::canceled; later calls do nothing. Copyable; callable from any thread
// and any goroutine. Never blocks.
class CancelFunc {
 public:
  CancelFunc() noexcept = default;
  void operator()() const noexcept;

 private:
  friend struct detail::ContextAccess;
  explicit CancelFunc(std::shared_ptr<detail::ContextNode> node) noexcept
      : node_(std::move(node)) {}
  std::shared_ptr<detail::ContextNode> node_;
};

// The background context (Go's context.Background()).
inline Context background() noexcept { return Context(); }

// A child of parent that the returned function cancels. Already cancelled if the
// parent is.
std::pair<Context, CancelFunc> with_cancel(const Context& parent);

// A child of parent cancelled with deadline_exceeded at `deadline` (or at the
// parent's deadline if that is earlier), or by the returned function.
std::pair<Context, CancelFunc> with_deadline(const Context& parent,
                                             std::chrono::steady_clock::time_point deadline);
std::pair<Context, CancelFunc> with_timeout(const Context& parent,
                                            std::chrono::nanoseconds timeout);

// Parks the calling goroutine for d or until ctx is cancelled, whichever is first.
// Returns {} after the full d, ctx.err() when cancelled (at once if it already is).
std::error_code sleep(std::chrono::nanoseconds d, const Context& ctx);

namespace detail {

struct ContextAccess {
  static Context make(std::shared_ptr<ContextNode> node) noexcept { return Context(std::move(node)); }
  static CancelFunc cancel_func(std::shared_ptr<ContextNode> node) noexcept {
    return CancelFunc(std::move(node));
  }
  static const std::shared_ptr<ContextNode>& node(const Context& ctx) noexcept {
    return ctx.node_;
  }
};

// Starts watching ctx with hook (fn and arg set by the caller). Returns false, watching
// nothing, when ctx is already cancelled, and true (without watching) when ctx can never
// be cancelled. A hook that was added must be removed with context_unwatch.
bool context_watch(const Context& ctx, CancelHook* hook) noexcept;
// Stops watching. When it returns, hook->fn is not running and will not run.
void context_unwatch(CancelHook* hook) noexcept;

// RAII over context_watch / context_unwatch.
class ContextWatch {
 public:
  // Watches ctx with fn(arg). ok() is false when ctx is already cancelled.
  ContextWatch(const Context& ctx, void (*fn)(CancelHook*), void* arg) noexcept : ctx_(ctx) {
    hook_.fn = fn;
    hook_.arg = arg;
    ok_ = context_watch(ctx_, &hook_);
  }
  ~ContextWatch() { context_unwatch(&hook_); }
  ContextWatch(const ContextWatch&) = delete;
  ContextWatch& operator=(const ContextWatch&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  Context ctx_;  // keeps the watched context alive until unwatched
  CancelHook hook_;
  bool ok_ = true;
};

std::shared_ptr<ContextNode> value_node(const Context& parent, const void* key,
                                        std::shared_ptr<const void> value);

}  // namespace detail

// A child of parent that carries value under key; cancellation and deadline are the
// parent's.
template <class T, class V>
Context with_value(const Context& parent, const ContextKey<T>& key, V&& value) {
  return detail::ContextAccess::make(
      detail::value_node(parent, &key, std::make_shared<const T>(std::forward<V>(value))));
}

}  // namespace goro
