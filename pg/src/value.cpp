// Values in PostgreSQL's text form: parameters written (Value), results read (Rows, Row),
// and the error category.
#include <libpq-fe.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include <goro/pg/pg.hpp>

namespace goro::pg {

namespace {

using std::chrono::system_clock;

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.pg"; }
  std::string message(int c) const override {
    switch (static_cast<errc>(c)) {
      case errc::server_error: return "the PostgreSQL server refused the statement";
      case errc::protocol_error: return "unsupported PostgreSQL result";
      case errc::closed: return "PostgreSQL pool or transaction closed";
      case errc::bad_value: return "value not of the type asked for";
    }
    return "unknown goro.pg error";
  }
};

constexpr char kHex[] = "0123456789abcdef";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// "YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]]", as timestamptz and timestamp print with
// DateStyle ISO; no offset is UTC.
bool parse_time(std::string_view s, system_clock::time_point& out) {
  std::size_t pos = 0;
  auto number = [&](std::size_t digits, int& v) {
    if (pos + digits > s.size()) return false;
    v = 0;
    for (std::size_t i = 0; i < digits; ++i) {
      const char c = s[pos + i];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    pos += digits;
    return true;
  };
  auto literal = [&](char c) {
    if (pos >= s.size() || s[pos] != c) return false;
    ++pos;
    return true;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!number(4, y) || !literal('-') || !number(2, mo) || !literal('-') || !number(2, d) ||
      !literal(' ') || !number(2, h) || !literal(':') || !number(2, mi) || !literal(':') ||
      !number(2, sec))
    return false;
  long long micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 6) {
        micros = micros * 10 + (s[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return false;
    for (; digits < 6; ++digits) micros *= 10;
  }
  int offset = 0;  // seconds east of UTC
  if (pos < s.size()) {
    const int sign = s[pos] == '+' ? 1 : s[pos] == '-' ? -1 : 0;
    if (sign == 0) return false;
    ++pos;
    int oh = 0, om = 0, os = 0;
    if (!number(2, oh)) return false;
    if (literal(':') && !number(2, om)) return false;
    if (literal(':') && !number(2, os)) return false;
    if (pos != s.size()) return false;
    offset = sign * (oh * 3600 + om * 60 + os);
  }
  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(mo),
                                        std::chrono::day(d)};
  if (!ymd.ok() || h > 24 || mi > 59 || sec > 60) return false;
  // In microseconds first (PostgreSQL's own unit, good for 292,000 years), then only
  // what system_clock's nanoseconds hold (1677-09-21 to 2262-04-11).
  const std::chrono::sys_time<std::chrono::microseconds> t =
      std::chrono::sys_days(ymd) + std::chrono::hours(h) + std::chrono::minutes(mi) +
      std::chrono::seconds(sec) + std::chrono::microseconds(micros) -
      std::chrono::seconds(offset);
  using Nanos = system_clock::duration;
  constexpr auto lowest = std::chrono::floor<std::chrono::microseconds>(Nanos::min());
  constexpr auto highest = std::chrono::floor<std::chrono::microseconds>(Nanos::max());
  if (t.time_since_epoch() < lowest || t.time_since_epoch() > highest) return false;
  out = system_clock::time_point(std::chrono::duration_cast<Nanos>(t.time_since_epoch()));
  return true;
}

}  // namespace

const std::error_category& category() noexcept {
  static const Category c;
  return c;
}

// ---------------------------------------------------------------------------------------
// Parameters.

Value::Value(bool v) : text_(v ? "t" : "f") {}
Value::Value(int v) : text_(std::to_string(v)) {}
Value::Value(long v) : text_(std::to_string(v)) {}
Value::Value(long long v) : text_(std::to_string(v)) {}

Value::Value(double v) {
  if (std::isnan(v)) {
    text_ = "NaN";
  } else if (std::isinf(v)) {
    text_ = v > 0 ? "Infinity" : "-Infinity";
  } else {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    text_ = std::string(buf, ec == std::errc() ? end : buf);
  }
}

Value::Value(const char* v) {
  if (v != nullptr) text_ = v;
}

std::optional<Uuid> Uuid::parse(std::string_view text) noexcept {
  // Hyphens after the 8th, 12th, 16th and 20th digit, or none at all.
  const bool hyphens = text.size() == 36;
  if (!hyphens && text.size() != 32) return std::nullopt;
  Uuid u;
  std::size_t pos = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    if (hyphens && (i == 4 || i == 6 || i == 8 || i == 10)) {
      if (text[pos] != '-') return std::nullopt;
      ++pos;
    }
    const int hi = hex_digit(text[pos]), lo = hex_digit(text[pos + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    u.bytes[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    pos += 2;
  }
  return u;
}

std::string Uuid::to_string() const {
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

Value::Value(system_clock::time_point v) {
  const auto micros = std::chrono::floor<std::chrono::microseconds>(v);
  const auto day = std::chrono::floor<std::chrono::days>(micros);
  const std::chrono::year_month_day ymd{day};
  const std::chrono::hh_mm_ss<std::chrono::microseconds> t{micros - day};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d.%06lld+00",
                static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()), static_cast<int>(t.hours().count()),
                static_cast<int>(t.minutes().count()), static_cast<int>(t.seconds().count()),
                static_cast<long long>(t.subseconds().count()));
  text_ = buf;
}

// ---------------------------------------------------------------------------------------
// Results.

Rows::Rows() noexcept = default;
Rows::Rows(pg_result* res) noexcept : res_(res) {}
Rows::Rows(Rows&& other) noexcept : res_(std::exchange(other.res_, nullptr)) {}
Rows& Rows::operator=(Rows&& other) noexcept {
  if (this != &other) {
    if (res_ != nullptr) PQclear(res_);
    res_ = std::exchange(other.res_, nullptr);
  }
  return *this;
}
Rows::~Rows() {
  if (res_ != nullptr) PQclear(res_);
}

int Rows::size() const noexcept { return res_ != nullptr ? PQntuples(res_) : 0; }
int Rows::columns() const noexcept { return res_ != nullptr ? PQnfields(res_) : 0; }

std::string_view Rows::column_name(int column) const noexcept {
  const char* name = res_ != nullptr ? PQfname(res_, column) : nullptr;
  return name != nullptr ? name : "";
}

long long Rows::affected() const noexcept {
  if (res_ == nullptr) return 0;
  long long n = 0;
  return parse_int(std::string_view(PQcmdTuples(res_)), n) ? n : 0;
}

bool Row::in_range(int column) const noexcept {
  return res_ != nullptr && column >= 0 && column < PQnfields(res_) && row_ >= 0 &&
         row_ < PQntuples(res_);
}

bool Row::is_null(int column) const noexcept {
  return !in_range(column) || PQgetisnull(res_, row_, column) != 0;
}

std::string_view Row::text(int column) const noexcept {
  if (!in_range(column)) return {};
  return {PQgetvalue(res_, row_, column),
          static_cast<std::size_t>(PQgetlength(res_, row_, column))};
}

// Whether column holds a value to parse: in range and not NULL.
Error Row::check(int column) const {
  if (!in_range(column))
    return Error(errc::bad_value, "pg: no column " + std::to_string(column));
  if (PQgetisnull(res_, row_, column) != 0)
    return Error(errc::bad_value, "pg: column " + std::to_string(column) + " (" +
                                      PQfname(res_, column) +
                                      ") is NULL; read it as a std::optional");
  return {};
}

namespace {

Error unreadable(const pg_result* res, int column, std::string_view text, const char* type) {
  std::string shown(text.substr(0, 64));
  if (text.size() > 64) shown += "...";
  return Error(errc::bad_value, "pg: column " + std::to_string(column) + " (" +
                                    PQfname(res, column) + "): \"" + shown + "\" is not " +
                                    type);
}

template <class Int>
Error read_int(const Row& row, const pg_result* res, int column, Int& out, const char* type) {
  const std::string_view t = row.text(column);
  if (!parse_int(t, out)) return unreadable(res, column, t, type);
  return {};
}

}  // namespace

Error Row::read(int column, bool& out) const {
  if (Error e = check(column)) return e;
  const std::string_view t = text(column);
  if (t == "t" || t == "true") {
    out = true;
  } else if (t == "f" || t == "false") {
    out = false;
  } else {
    return unreadable(res_, column, t, "a bool");
  }
  return {};
}

Error Row::read(int column, int& out) const {
  if (Error e = check(column)) return e;
  return read_int(*this, res_, column, out, "an int");
}

Error Row::read(int column, long& out) const {
  if (Error e = check(column)) return e;
  return read_int(*this, res_, column, out, "a long");
}

Error Row::read(int column, long long& out) const {
  if (Error e = check(column)) return e;
  return read_int(*this, res_, column, out, "a long long");
}

Error Row::read(int column, double& out) const {
  if (Error e = check(column)) return e;
  const std::string_view t = text(column);
  if (t == "NaN") {
    out = std::nan("");
  } else if (t == "Infinity") {
    out = HUGE_VAL;
  } else if (t == "-Infinity") {
    out = -HUGE_VAL;
  } else {
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (ec != std::errc() || end != t.data() + t.size() || t.empty())
      return unreadable(res_, column, t, "a double");
  }
  return {};
}

Error Row::read(int column, std::string& out) const {
  if (Error e = check(column)) return e;
  out = std::string(text(column));
  return {};
}

Error Row::read(int column, std::string_view& out) const {
  if (Error e = check(column)) return e;
  out = text(column);
  return {};
}

Error Row::read(int column, Bytes& out) const {
  if (Error e = check(column)) return e;
  const std::string_view t = text(column);
  if (PQfformat(res_, column) == 1) {
    out.data.assign(t);
    return {};
  }
  // bytea_output 'hex' (the server's default): "\x" and two digits a byte.
  if (t.size() < 2 || t[0] != '\\' || t[1] != 'x' || t.size() % 2 != 0)
    return unreadable(res_, column, t, "bytea in hex");
  out.data.resize((t.size() - 2) / 2);
  char* to = out.data.data();
  for (std::size_t i = 2; i < t.size(); i += 2) {
    const int hi = hex_digit(t[i]), lo = hex_digit(t[i + 1]);
    if (hi < 0 || lo < 0) return unreadable(res_, column, t, "bytea in hex");
    *to++ = static_cast<char>(hi * 16 + lo);
  }
  return {};
}

Error Row::read(int column, Uuid& out) const {
  if (Error e = check(column)) return e;
  const std::string_view t = text(column);
  std::optional<Uuid> u = Uuid::parse(t);
  if (!u) return unreadable(res_, column, t, "a uuid");
  out = *u;
  return {};
}

Error Row::read(int column, system_clock::time_point& out) const {
  if (Error e = check(column)) return e;
  const std::string_view t = text(column);
  if (!parse_time(t, out))
    return unreadable(res_, column, t, "a timestamp from 1677-09-21 to 2262-04-11 (system_clock's)");
  return {};
}

}  // namespace goro::pg
