// The Date header, formatted once per second per thread.
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>

#include "access.hpp"

namespace goro::http::detail {
namespace {

constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Per thread (per M), not per goroutine: the text is copied out at once, and no goro
// call sits between reading and using it, so a goroutine moving threads cannot see a
// half-written cache.
struct DateCache {
  std::time_t second = -1;
  char text[30] = {};
};
thread_local DateCache date_cache;

}  // namespace

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

std::string_view http_date_now() {
  std::time_t now = std::time(nullptr);
  DateCache& cache = date_cache;
  if (cache.second != now) {
    format_http_date(now, cache.text);
    cache.second = now;
  }
  return {cache.text, 29};
}

void append_date_header(std::string& out) {
  out.append("Date: ");
  out.append(http_date_now());
  out.append("\r\n");
}

long long parse_http_date(std::string_view s) {
  // IMF-fixdate only ("Sun, 06 Nov 1994 08:49:37 GMT"), as every current client sends.
  if (s.size() != 29 || s[3] != ',' || s.substr(25) != " GMT") return -1;
  std::tm tm{};
  char month[4] = {};
  int day, year, hour, minute, second;
  std::string copy(s);
  if (std::sscanf(copy.c_str() + 5, "%2d %3s %4d %2d:%2d:%2d", &day, month, &year, &hour, &minute,
                  &second) != 6) {
    return -1;
  }
  int m = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::strcmp(month, kMonths[i]) == 0) m = i;
  }
  if (m < 0 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return -1;
  tm.tm_mday = day;
  tm.tm_mon = m;
  tm.tm_year = year - 1900;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<long long>(timegm(&tm));
}

}  // namespace goro::http::detail
