// goro::Result<T>: a value or a std::error_code — the error style of the whole project,
// in goro::base so that every layer names it the same way.
//
// Operations that produce a value return Result<T>; operations that produce nothing
// return a bare std::error_code (empty on success). Nothing in goro's I/O path throws.
// An API whose errors carry a server's words returns Result<T, goro::Error>
// (<goro/base/error.hpp>): the same, with error() a goro::Error. See docs/errors.md.
//
//   goro::Result<goro::net::Conn> c = goro::net::dial("tcp", "example.com:80");
//   if (!c) return c.error();
//   c->write("hi", 2);
#pragma once

#include <cassert>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace goro {

// E: std::error_code, or goro::Error (anything that converts from a std::error_code, to
// bool as "is an error", and to a std::error_code).
template <class T, class E = std::error_code>
class [[nodiscard]] Result {
  static_assert(!std::is_void_v<T>, "use a bare std::error_code for operations without a value");
  static_assert(!std::is_same_v<std::decay_t<T>, std::error_code> &&
                    !std::is_same_v<std::decay_t<T>, E>,
                "Result<error_code> is ambiguous");

 public:
  using error_type = E;

  // A successful result holding value.
  Result(const T& value) : state_(std::in_place_index<0>, value) {}
  Result(T&& value) : state_(std::in_place_index<0>, std::move(value)) {}
  // A failed result. Precondition: ec is an error (not the empty error_code).
  Result(std::error_code ec) : state_(std::in_place_index<1>, E(ec)) { assert(ec); }
  template <class F = E, class = std::enable_if_t<!std::is_same_v<F, std::error_code>>>
  Result(E error) : state_(std::in_place_index<1>, std::move(error)) {
    assert(static_cast<bool>(std::get<1>(state_)));
  }
  template <class C, class = std::enable_if_t<std::is_error_code_enum_v<C> ||
                                              std::is_error_condition_enum_v<C>>>
  Result(C e) : Result(std::error_code(make_error_code(e))) {}

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // The value. Throws std::system_error(error()) when !ok(), like std::expected's
  // bad_expected_access: calling it on an error is a bug, not an error path.
  T& value() & {
    check();
    return *std::get_if<0>(&state_);
  }
  const T& value() const& {
    check();
    return *std::get_if<0>(&state_);
  }
  T&& value() && {
    check();
    return std::move(*std::get_if<0>(&state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The value, or fallback when !ok().
  template <class U>
  T value_or(U&& fallback) const& {
    return ok() ? *std::get_if<0>(&state_) : static_cast<T>(std::forward<U>(fallback));
  }

  // The error; the empty one when ok().
  E error() const noexcept {
    const E* e = std::get_if<1>(&state_);
    return e ? *e : E();
  }

 private:
  void check() const {
    if (!ok()) throw std::system_error(std::error_code(*std::get_if<1>(&state_)));
  }
  std::variant<T, E> state_;
};

}  // namespace goro
