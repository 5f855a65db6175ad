// goro::select: waits on several channel operations at once and performs exactly one,
// like Go's select statement.
//
//   std::optional<Job> job;
//   switch (goro::select(goro::recv_case(jobs, job),
//                        goro::send_case(results, last),
//                        goro::recv_case(quit),
//                        goro::timeout_case(std::chrono::seconds(1)))) {
//     case 0: /* job holds a Job, or nullopt: `jobs` is closed */ break;
//     case 1: /* `last` was sent */ break;
//     case 2: /* quit received, or closed */ break;
//     case goro::select_timeout: break;
//   }
//
// select returns the index of the case that fired, counting only the channel cases
// (recv_case / send_case) in argument order; goro::select_default (-1) if a
// default_case was given and no channel case was ready; goro::select_timeout (-2) if a
// timeout_case was given and it expired first. default_case and timeout_case may appear
// anywhere in the list, at most once each, and not together.
//
// Semantics are Go's: if several cases are ready, one is picked uniformly at random
// (no case can starve another); a case on a nil channel (Chan<T>::nil()) is never
// ready; a receive from a closed channel is ready (it yields "closed"); a chosen send on
// a closed channel throws goro::ChanClosed; select() with no channel case, no default
// and no timeout parks forever. The cases are meant to be built in the select() call:
// they refer to the channels and output variables passed to them. Building a case never
// blocks; select() blocks unless it has a default_case.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/detail/waitq.hpp>

namespace goro {

// Returned by select() when the default case ran.
inline constexpr int select_default = -1;
// Returned by select() when the timeout expired.
inline constexpr int select_timeout = -2;

namespace detail {

// One channel case as the type-erased select sees it.
struct SelectCase {
  ChanBase* chan = nullptr;  // nullptr: a nil channel, never ready
  void* elem = nullptr;      // send: the T to move from; recv: raw storage for a T
  bool is_send = false;
  bool received = false;  // out, recv: a T was constructed at elem (false: closed)
  Waiter waiter{};        // this case's place in the channel's queue while parked
};

// What the cases of one select() call add up to.
struct SelectBuild {
  SelectCase* next{};
  bool has_default = false;
  std::int64_t timeout_ns = -1;  // -1: none
};

// Go's selectgo over cases[0..n). order: scratch for 2*n indices. Returns the index of
// the fired case, select_default or select_timeout. Throws ChanClosed for a chosen send
// on a closed channel. Blocks unless has_default.
int select(SelectCase* cases, int n, std::uint16_t* order, bool has_default,
           std::int64_t timeout_ns);

}  // namespace detail

// The default case: makes select() return select_default instead of blocking.
struct DefaultCase {
  void select_prepare(detail::SelectBuild& b) const noexcept { b.has_default = true; }
};
inline constexpr DefaultCase default_case{};

// A timeout case: select() returns select_timeout once `after` has passed (a runtime
// timer, no thread). A zero or negative duration expires at the next scheduling point.
struct TimeoutCase {
  std::chrono::nanoseconds after{};
  void select_prepare(detail::SelectBuild& b) const noexcept {
    b.timeout_ns = after.count() < 0 ? 0 : static_cast<std::int64_t>(after.count());
  }
};
inline TimeoutCase timeout_case(std::chrono::nanoseconds after) noexcept {
  return TimeoutCase{after};
}

// A receive case; build it with recv_case().
template <class T>
class RecvCase {
 public:
  RecvCase(const Chan<T>& ch, std::optional<T>* out, T* value, bool* ok) noexcept
      : chan_(ch.base()), out_(out), value_(value), ok_(ok) {}

  void select_prepare(detail::SelectBuild& b) noexcept {
    b.next->chan = chan_;
    b.next->elem = slot_.raw();
    b.next->is_send = false;
    ++b.next;
  }

  void select_complete(const detail::SelectCase& c) {
    if (c.received) {
      if (out_ != nullptr) {
        *out_ = slot_.take();
      } else if (value_ != nullptr) {
        *value_ = slot_.take();
      } else {
        slot_.get()->~T();
      }
    } else if (out_ != nullptr) {
      out_->reset();
    } else if (value_ != nullptr) {
      if constexpr (std::is_default_constructible_v<T>) *value_ = T{};
    }
    if (ok_ != nullptr) *ok_ = c.received;
  }

 private:
  detail::ChanBase* chan_;
  std::optional<T>* out_;
  T* value_;
  bool* ok_;
  detail::ElemSlot<T> slot_;
};

// A send case; build it with send_case().
template <class T>
class SendCase {
 public:
  SendCase(const Chan<T>& ch, T value) noexcept : chan_(ch.base()), value_(std::move(value)) {}

  void select_prepare(detail::SelectBuild& b) noexcept {
    b.next->chan = chan_;
    b.next->elem = &value_;
    b.next->is_send = true;
    ++b.next;
  }
  void select_complete(const detail::SelectCase&) noexcept {}

 private:
  detail::ChanBase* chan_;
  T value_;
};

// Case `<-ch`: receives and discards the value (or notes that ch is closed).
template <class T>
RecvCase<T> recv_case(const Chan<T>& ch) noexcept {
  return {ch, nullptr, nullptr, nullptr};
}

// Case `v := <-ch`: out gets the value, or std::nullopt if ch is closed and drained.
template <class T>
RecvCase<T> recv_case(const Chan<T>& ch, std::optional<T>& out) noexcept {
  return {ch, &out, nullptr, nullptr};
}

// Case `v, ok := <-ch`: {value, true}, or {T{}, false} if ch is closed and drained.
// clang-format off: clang-format 14 cannot lay out a requires-clause
template <class T>
requires std::is_default_constructible_v<T> RecvCase<T> recv_case(const Chan<T>& ch, T& value,
                                                                  bool& ok)
noexcept { return {ch, nullptr, &value, &ok}; }
// clang-format on

// Case `ch <- value`: the value is taken into the case now (copied or moved) and sent
// only if this case fires; otherwise it is destroyed with the case.
template <class T>
SendCase<T> send_case(const Chan<T>& ch, std::type_identity_t<T> value) noexcept {
  return {ch, std::move(value)};
}

namespace detail {
template <class C>
inline constexpr bool is_channel_case_v = false;
template <class T>
inline constexpr bool is_channel_case_v<RecvCase<T>> = true;
template <class T>
inline constexpr bool is_channel_case_v<SendCase<T>> = true;
}  // namespace detail

// Performs one ready case, or waits until one is ready (see the top of this file).
// Blocks unless a default_case is given.
template <class... Cases>
int select(Cases&&... cases) {
  constexpr int n = (0 + ... + (detail::is_channel_case_v<std::remove_cvref_t<Cases>> ? 1 : 0));
  constexpr int defaults =
      (0 + ... + (std::is_same_v<std::remove_cvref_t<Cases>, DefaultCase> ? 1 : 0));
  constexpr int timeouts =
      (0 + ... + (std::is_same_v<std::remove_cvref_t<Cases>, TimeoutCase> ? 1 : 0));
  static_assert(n + defaults + timeouts == sizeof...(Cases),
                "goro::select takes recv_case, send_case, default_case and timeout_case");
  static_assert(defaults <= 1 && timeouts <= 1,
                "goro::select: at most one default and one timeout");
  static_assert(defaults + timeouts <= 1, "goro::select: a default case makes a timeout pointless");
  static_assert(n < 65536, "goro::select: too many cases");

  std::array<detail::SelectCase, n> channel_cases{};
  std::array<std::uint16_t, 2 * n> order{};
  detail::SelectBuild build{channel_cases.data()};
  (cases.select_prepare(build), ...);
  const int fired =
      detail::select(channel_cases.data(), n, order.data(), build.has_default, build.timeout_ns);
  if constexpr (n > 0) {
    if (fired < 0) return fired;
    int index = 0;
    auto complete = [&](auto& c) {
      if constexpr (detail::is_channel_case_v<std::remove_cvref_t<decltype(c)>>) {
        if (index++ == fired) c.select_complete(channel_cases[fired]);
      }
    };
    (complete(cases), ...);
  }
  return fired;
}

}  // namespace goro
