// Header fields, and the values the server reads and writes in them: tokens and dates.
#include <goro/http/headers.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include <goro/scheduler/thread_local.hpp>

#include "access.hpp"

namespace goro::http {
namespace {

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

}  // namespace

namespace {

// Whether words x and y, read from two strings, hold the same bytes but for the case of
// ASCII letters: they may differ only in bit 0x20 of a byte, and only where that byte
// is a letter. Per byte, with its top bit as the flag: (l & 0x7f) + 0x1f reaches 0x80
// from 'a' on and + 0x05 from past 'z', and no sum carries into the next byte.
template <class Word>
bool same_ignoring_case(Word x, Word y) noexcept {
  constexpr Word kBytes = static_cast<Word>(~Word{0}) / 0xff;  // 0x0101...
  const Word diff = x ^ y;
  if ((diff & ~(kBytes * 0x20)) != 0) return false;
  const Word l = (x | (kBytes * 0x20)) & (kBytes * 0x7f);
  const Word letter =
      (l + kBytes * 0x1f) & ~(l + kBytes * 0x05) & ~x & (kBytes * 0x80);
  return ((diff << 2) & ~letter) == 0;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  const char* p = a.data();
  const char* q = b.data();
  std::size_t n = a.size();
  for (; n >= 8; p += 8, q += 8, n -= 8) {
    std::uint64_t x, y;
    std::memcpy(&x, p, 8);
    std::memcpy(&y, q, 8);
    if (x != y && !same_ignoring_case(x, y)) return false;
  }
  if (n >= 4) {
    std::uint32_t x, y;
    std::memcpy(&x, p, 4);
    std::memcpy(&y, q, 4);
    if (x != y && !same_ignoring_case(x, y)) return false;
    p += 4;
    q += 4;
    n -= 4;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (lower(p[i]) != lower(q[i])) return false;
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

std::vector<std::string_view> Headers::values(std::string_view name) const {
  std::vector<std::string_view> out;
  for (HeaderField f : *this) {
    if (iequals(f.name, name)) out.push_back(f.value);
  }
  return out;
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

// --- HTTP dates: the Date field, formatted once per second per thread, and the three
// forms a recipient must read.

namespace goro::http::detail {
namespace {

constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Per thread, not per goroutine: the text is copied out inside the ThreadLocal scope.
struct DateCache {
  std::time_t second = -1;
  char line[40] = "Date: ";  // "Date: <IMF-fixdate>\r\n"
};
constexpr std::size_t kDateAt = 6, kDateLine = kDateAt + kHttpDateSize + 2;
constinit goro::ThreadLocal date_cache = [] { return DateCache{}; };

}  // namespace

void add_vary(Headers& h, std::string_view field) {
  for (HeaderField f : h) {
    if (iequals(f.name, "vary") && (has_token(f.value, field) || has_token(f.value, "*"))) return;
  }
  h.add("Vary", field);
}

void format_http_date(long long t, char* out) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm;
  gmtime_r(&tt, &tm);
  // strftime's %a/%b follow the locale; the header needs the English names.
  auto two = [](char* p, int v) {
    p[0] = static_cast<char>('0' + v / 10 % 10);
    p[1] = static_cast<char>('0' + v % 10);
  };
  std::memcpy(out, kDays[tm.tm_wday], 3);
  std::memcpy(out + 3, ", ", 2);
  two(out + 5, tm.tm_mday);
  out[7] = ' ';
  std::memcpy(out + 8, kMonths[tm.tm_mon], 3);
  out[11] = ' ';
  int year = tm.tm_year + 1900;
  two(out + 12, year / 100);
  two(out + 14, year % 100);
  out[16] = ' ';
  two(out + 17, tm.tm_hour);
  out[19] = ':';
  two(out + 20, tm.tm_min);
  out[22] = ':';
  two(out + 23, tm.tm_sec);
  std::memcpy(out + 25, " GMT", 4);
  out[29] = '\0';
}

namespace {

// The cache, formatted for the current second.
void refresh(DateCache& cache) {
  std::time_t now = std::time(nullptr);
  if (cache.second != now) {
    format_http_date(now, cache.line + kDateAt);
    cache.line[kDateAt + kHttpDateSize] = '\r';
    cache.line[kDateAt + kHttpDateSize + 1] = '\n';
    cache.second = now;
  }
}

}  // namespace

void http_date_now(char* out) {
  auto cache = date_cache.use();
  refresh(*cache);
  std::memcpy(out, cache->line + kDateAt, kHttpDateSize);
}

void append_date_header(std::string& out) {
  auto cache = date_cache.use();
  refresh(*cache);
  out.append(cache->line, kDateLine);
}

namespace {

// The number in s (digits only, or with one leading space when pad_ok); -1 otherwise.
int number(std::string_view s, bool pad_ok = false) {
  if (pad_ok && !s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (s.empty()) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

int month_of(std::string_view s) {
  for (int i = 0; i < 12; ++i)
    if (s == kMonths[i]) return i;
  return -1;
}

// "hh:mm:ss"
bool clock_of(std::string_view s, int& hour, int& minute, int& second) {
  if (s.size() != 8 || s[2] != ':' || s[5] != ':') return false;
  hour = number(s.substr(0, 2));
  minute = number(s.substr(3, 2));
  second = number(s.substr(6, 2));
  return hour >= 0 && minute >= 0 && second >= 0;
}

}  // namespace

long long parse_http_date(std::string_view s) {
  // The three forms a recipient must accept (RFC 9110 5.6.7):
  //   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
  //   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"
  //   asctime      "Sun Nov  6 08:49:37 1994"
  int day = -1, month = -1, year = -1, hour = -1, minute = -1, second = -1;
  std::size_t comma = s.find(',');
  if (s.size() == 29 && comma == 3) {
    if (s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || s.substr(25) != " GMT")
      return -1;
    day = number(s.substr(5, 2));
    month = month_of(s.substr(8, 3));
    year = number(s.substr(12, 4));
    if (!clock_of(s.substr(17, 8), hour, minute, second)) return -1;
  } else if (comma >= 6 && comma <= 9 && s.size() == comma + 24) {
    std::string_view r = s.substr(comma + 1);  // " 06-Nov-94 08:49:37 GMT"
    if (r[0] != ' ' || r[3] != '-' || r[7] != '-' || r[10] != ' ' || r.substr(19) != " GMT")
      return -1;
    day = number(r.substr(1, 2));
    month = month_of(r.substr(4, 3));
    int yy = number(r.substr(8, 2));
    if (yy < 0) return -1;
    year = yy >= 69 ? 1900 + yy : 2000 + yy;  // Go's reading of a two-digit year
    if (!clock_of(r.substr(11, 8), hour, minute, second)) return -1;
  } else if (s.size() == 24 && comma == std::string_view::npos) {
    if (s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ') return -1;
    month = month_of(s.substr(4, 3));
    day = number(s.substr(8, 2), true);
    if (!clock_of(s.substr(11, 8), hour, minute, second)) return -1;
    year = number(s.substr(20, 4));
  } else {
    return -1;
  }
  if (month < 0 || year < 0 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return -1;
  std::tm tm{};
  tm.tm_mday = day;
  tm.tm_mon = month;
  tm.tm_year = year - 1900;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<long long>(timegm(&tm));
}

}  // namespace goro::http::detail
