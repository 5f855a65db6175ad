// goro::Error: a std::error_code with the words of whoever reported it — a server's
// message and the fields it sent with it (PostgreSQL's SQLSTATE, detail and hint; the
// first word of a Redis error) — for the APIs whose failures a std::error_code alone
// cannot explain. It converts to and compares with std::error_code, so code that tests
// for errc::timeout or passes the code on keeps working; goro::Result<T, goro::Error>
// carries it where a plain Result<T> carries the code.
//
//   goro::Result<redis::Reply, goro::Error> r = client.command(ctx, {"INCR", "name"});
//   if (!r) log("%s", r.error().what().c_str());  // "WRONGTYPE Operation against a key ..."
//   if (r.error() == goro::net::errc::timeout) retry();
//
// Copying one copies a std::error_code and a shared pointer: the words are kept once.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace goro {

class Error {
 public:
  // A named field a server sent with the error ("sqlstate", "detail", "hint", ...).
  struct Field {
    std::string name;
    std::string value;
  };

  // No error.
  Error() noexcept = default;
  // Just the code: what() is code.message().
  Error(std::error_code code) noexcept : code_(code) {}  // NOLINT: implicit, as error_code
  template <class E, class = std::enable_if_t<std::is_error_code_enum_v<E>>>
  Error(E e) noexcept : code_(make_error_code(e)) {}  // NOLINT
  // The code with the words that explain it, and any fields.
  Error(std::error_code code, std::string message, std::vector<Field> fields = {})
      : code_(code),
        detail_(std::make_shared<const Detail>(Detail{std::move(message), std::move(fields)})) {}

  explicit operator bool() const noexcept { return static_cast<bool>(code_); }
  std::error_code code() const noexcept { return code_; }
  operator std::error_code() const noexcept { return code_; }  // NOLINT: interop

  // The message given, or else the code's own.
  std::string what() const {
    if (detail_ && !detail_->message.empty()) return detail_->message;
    return code_.message();
  }
  // The value of the field named name, or "" when there is none.
  std::string_view field(std::string_view name) const noexcept {
    if (detail_) {
      for (const Field& f : detail_->fields) {
        if (f.name == name) return f.value;
      }
    }
    return {};
  }
  const std::vector<Field>& fields() const noexcept {
    static const std::vector<Field> none;
    return detail_ ? detail_->fields : none;
  }

  friend bool operator==(const Error& a, const std::error_code& b) noexcept {
    return a.code_ == b;
  }
  friend bool operator==(const Error& a, const std::error_condition& b) noexcept {
    return a.code_ == b;
  }
  template <class E, class = std::enable_if_t<std::is_error_code_enum_v<E> ||
                                              std::is_error_condition_enum_v<E>>>
  friend bool operator==(const Error& a, E b) noexcept {
    return a.code_ == b;
  }

 private:
  struct Detail {
    std::string message;
    std::vector<Field> fields;
  };
  std::error_code code_;
  std::shared_ptr<const Detail> detail_;
};

}  // namespace goro
