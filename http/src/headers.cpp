#include <goro/http/headers.hpp>

namespace goro::http {
namespace {

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool has_token(std::string_view value, std::string_view token) noexcept {
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

void Headers::set(std::string_view name, std::string_view value) {
  remove(name);
  add(name, value);
}

void Headers::add(std::string_view name, std::string_view value) {
  Entry e;
  e.name_offset = static_cast<std::uint32_t>(arena_.size());
  e.name_size = static_cast<std::uint32_t>(name.size());
  arena_.append(name);
  e.value_offset = static_cast<std::uint32_t>(arena_.size());
  e.value_size = static_cast<std::uint32_t>(value.size());
  arena_.append(value);
  entries_.push_back(e);
}

void Headers::remove(std::string_view name) {
  std::erase_if(entries_, [&](const Entry& e) {
    return iequals({arena_.data() + e.name_offset, e.name_size}, name);
  });
}

std::string_view Headers::get(std::string_view name) const noexcept {
  for (const Entry& e : entries_) {
    if (iequals({arena_.data() + e.name_offset, e.name_size}, name)) {
      return {arena_.data() + e.value_offset, e.value_size};
    }
  }
  return {};
}

bool Headers::has(std::string_view name) const noexcept {
  for (const Entry& e : entries_) {
    if (iequals({arena_.data() + e.name_offset, e.name_size}, name)) return true;
  }
  return false;
}

void Headers::clear() noexcept {
  arena_.clear();
  entries_.clear();
}

HeaderField Headers::operator[](std::size_t i) const noexcept {
  const Entry& e = entries_[i];
  return {{arena_.data() + e.name_offset, e.name_size},
          {arena_.data() + e.value_offset, e.value_size}};
}

}  // namespace goro::http
