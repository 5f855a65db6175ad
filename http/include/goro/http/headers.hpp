// Header fields: an ordered list of name/value pairs with case-insensitive names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace goro::http {

// One header field. In a server Request the views point into the connection's read
// buffer and stay valid until the handler returns.
struct HeaderField {
  std::string_view name{};
  std::string_view value{};
};

// ASCII case-insensitive equality, as header names and tokens are compared.
bool iequals(std::string_view a, std::string_view b) noexcept;

// True when the comma-separated list `value` (a Connection or Transfer-Encoding value)
// holds `token`, compared case-insensitively.
bool has_token(std::string_view value, std::string_view token) noexcept;

// Header fields owned by their holder (a response being built, a client request or
// response). Names and values are copied into one growing arena, so clearing and
// refilling the list for the next message allocates nothing once warm.
class Headers {
 public:
  // Replaces every field named `name` by one field.
  void set(std::string_view name, std::string_view value);
  // Appends a field, keeping those already present (Set-Cookie, Vary, ...).
  void add(std::string_view name, std::string_view value);
  // Removes every field named `name`.
  void remove(std::string_view name);
  // The first value of `name`, or an empty view when absent.
  std::string_view get(std::string_view name) const noexcept;
  // Every value of `name`, in order (Set-Cookie, Vary, Link, ...); empty when absent.
  std::vector<std::string_view> values(std::string_view name) const;
  bool has(std::string_view name) const noexcept;
  // Removes all fields; keeps the memory for the next message.
  void clear() noexcept;

  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  HeaderField operator[](std::size_t i) const noexcept;

  class iterator {
   public:
    using value_type = HeaderField;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const Headers* h, std::size_t i) : headers_(h), index_(i) {}
    HeaderField operator*() const noexcept { return (*headers_)[index_]; }
    iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator t = *this;
      ++index_;
      return t;
    }
    bool operator==(const iterator& o) const noexcept { return index_ == o.index_; }

   private:
    const Headers* headers_ = nullptr;
    std::size_t index_ = 0;
  };
  iterator begin() const noexcept { return {this, 0}; }
  iterator end() const noexcept { return {this, entries_.size()}; }

 private:
  struct Entry {
    std::uint32_t name_offset, name_size, value_offset, value_size;
  };
  std::string arena_;
  std::vector<Entry> entries_;
};

}  // namespace goro::http
