// pg_value: bytes as a PostgreSQL column's value, through goro::pg::Row::get's parsers
// (integers, double, bool, bytea in hex and in binary, timestamps, uuid, strings).
//
// The value sits in a result libpq makes without a server (PQmakeEmptyPGresult,
// PQsetvalue), in a text column and in a binary one, with a NULL row below. Checked:
// each parser accepts exactly what a reading written differently here accepts, and
// what it reads goes back out (Value, Uuid::to_string) as text that reads the same;
// a refusal is errc::bad_value naming the column; NULL reads as an empty optional.
// Settings byte: none (all of the input is the value).
#include <goro/pg/pg.hpp>

#include <libpq-fe.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

using pg::Bytes;
using pg::Row;
using std::chrono::system_clock;

struct ClearResult {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};

// Whether every character is a digit, with at most a leading '-' (what from_chars takes).
bool plain_integer(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// strtoll's reading of a plain integer: the value, and whether it fits a long long.
bool read_ll(const std::string& s, long long& out) {
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

template <class T>
std::string refusal(const Result<T, Error>& r, const char* type) {
  if (r) return "";
  if (r.error() != pg::errc::bad_value) return std::string(type) + ": refused with another code";
  if (r.error().what().find("column 0") == std::string::npos)
    return std::string(type) + ": a refusal that does not name the column";
  return "";
}

std::string check_integers(const Row& row, const std::string& text) {
  long long want = 0;
  const bool fits_ll = plain_integer(text) && read_ll(text, want);
  const Result<long long, Error> ll = row.get<long long>(0);
  if (static_cast<bool>(ll) != fits_ll) return "long long accepted otherwise than strtoll";
  if (ll && *ll != want) return "long long read otherwise than strtoll";
  const Result<int, Error> i = row.get<int>(0);
  const bool fits_int = fits_ll && want >= INT32_MIN && want <= INT32_MAX;
  if (static_cast<bool>(i) != fits_int) return "int accepted otherwise than its range says";
  if (i && *i != want) return "int read otherwise than strtoll";
  if (std::string e = refusal(i, "int"); !e.empty()) return e;
  return refusal(ll, "long long");
}

std::string check_double(const Row& row) {
  const Result<double, Error> d = row.get<double>(0);
  if (!d) return refusal(d, "double");
  // Written back as a parameter's text and read again: the same double.
  const pg::Value v(*d);
  PGresult* res = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  std::unique_ptr<PGresult, ClearResult> owned(res);
  PGresAttDesc col{};
  col.name = const_cast<char*>("d");
  if (PQsetResultAttrs(res, 1, &col) == 0 ||
      PQsetvalue(res, 0, 0, const_cast<char*>(v.text().data()), static_cast<int>(v.text().size())) == 0)
    return "";
  pg::Rows rows(owned.release());
  const Result<double, Error> again = rows[0].get<double>(0);
  if (!again) return "a double written back out does not read: " + std::string(v.text());
  if (std::isnan(*d) ? !std::isnan(*again) : *again != *d)
    return "a double written back out reads otherwise: " + std::string(v.text());
  return "";
}

std::string check_bool(const Row& row, const std::string& text) {
  const Result<bool, Error> b = row.get<bool>(0);
  const bool known = text == "t" || text == "true" || text == "f" || text == "false";
  if (static_cast<bool>(b) != known) return "bool accepted otherwise than t/true/f/false";
  if (b && *b != (text[0] == 't')) return "bool read the wrong way";
  return refusal(b, "bool");
}

std::string check_bytea(const Row& row, const std::string& text) {
  const Result<Bytes, Error> text_form = row.get<Bytes>(0);
  bool hex_ok = text.size() >= 2 && text[0] == '\\' && text[1] == 'x' && text.size() % 2 == 0;
  for (std::size_t i = 2; hex_ok && i < text.size(); ++i) hex_ok = hex(text[i]) >= 0;
  if (static_cast<bool>(text_form) != hex_ok) return "bytea (hex) accepted otherwise than \\x and pairs of hex digits";
  if (text_form) {
    if (text_form->data.size() != (text.size() - 2) / 2) return "bytea (hex) of the wrong length";
    std::string again = "\\x";
    static constexpr char kDigits[] = "0123456789abcdef";
    for (char c : text_form->data) {
      again += kDigits[static_cast<unsigned char>(c) >> 4];
      again += kDigits[static_cast<unsigned char>(c) & 15];
    }
    if (again != lower(text)) return "bytea (hex) read otherwise than its digits";
  }
  // Column 1 holds the same bytes in binary: read as they are.
  const Result<Bytes, Error> binary = row.get<Bytes>(1);
  if (!binary || binary->data != text) return "bytea (binary) not read as the bytes themselves";
  return refusal(text_form, "bytea");
}

std::string check_time(const Row& row) {
  const Result<system_clock::time_point, Error> t = row.get<system_clock::time_point>(0);
  if (!t) return refusal(t, "timestamp");
  // Written back out (UTC, microseconds) and read again: the same instant, when it is
  // one Value can write (four-digit years).
  const auto day = std::chrono::floor<std::chrono::days>(*t);
  const int year = static_cast<int>(std::chrono::year_month_day(day).year());
  if (year < 1 || year > 9999) return "";
  const pg::Value v(*t);
  PGresult* res = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  std::unique_ptr<PGresult, ClearResult> owned(res);
  PGresAttDesc col{};
  col.name = const_cast<char*>("t");
  if (PQsetResultAttrs(res, 1, &col) == 0 ||
      PQsetvalue(res, 0, 0, const_cast<char*>(v.text().data()), static_cast<int>(v.text().size())) == 0)
    return "";
  pg::Rows rows(owned.release());
  const auto again = rows[0].get<system_clock::time_point>(0);
  if (!again || std::chrono::floor<std::chrono::microseconds>(*again) !=
                    std::chrono::floor<std::chrono::microseconds>(*t))
    return "a timestamp written back out reads otherwise: " + std::string(v.text());
  return "";
}

std::string check_uuid(const Row& row, const std::string& text) {
  const Result<pg::Uuid, Error> u = row.get<pg::Uuid>(0);
  if (!u) return refusal(u, "uuid");
  // Canonical text is the input in lowercase, hyphens where the canonical form has them.
  std::string digits;
  for (char c : text) {
    if (c != '-') digits += c;
  }
  std::string canonical = u->to_string();
  std::string canonical_digits;
  for (char c : canonical) {
    if (c != '-') canonical_digits += c;
  }
  if (canonical_digits != lower(digits)) return "uuid read otherwise than its digits";
  if (text.size() == 36 && canonical != lower(text)) return "uuid with hyphens elsewhere accepted";
  if (pg::Uuid::parse(canonical) != *u) return "uuid written out does not parse back";
  return "";
}

}  // namespace

std::string pg_value(std::string_view input) {
  const std::string text(input);
  PGresult* res = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  if (res == nullptr) return "";
  std::unique_ptr<PGresult, ClearResult> owned(res);
  PGresAttDesc cols[2] = {};
  cols[0].name = const_cast<char*>("value");
  cols[1].name = const_cast<char*>("binary");
  cols[1].format = 1;
  if (PQsetResultAttrs(res, 2, cols) == 0) return "";
  char* value = const_cast<char*>(text.data());
  const int len = static_cast<int>(text.size());
  if (PQsetvalue(res, 0, 0, value, len) == 0 || PQsetvalue(res, 0, 1, value, len) == 0 ||
      PQsetvalue(res, 1, 0, nullptr, -1) == 0)
    return "";
  const pg::Rows rows(owned.release());
  const Row row = rows[0];

  const Result<std::string, Error> s = row.get<std::string>(0);
  if (!s || *s != text) return "a string not read as it was";
  for (auto check : {check_integers(row, text), check_double(row), check_bool(row, text),
                     check_bytea(row, text), check_time(row), check_uuid(row, text)}) {
    if (!check.empty()) return check;
  }
  // NULL: an empty optional for every type, a refusal for a plain one.
  const Row null_row = rows[1];
  const Result<std::optional<long long>, Error> null = null_row.get<std::optional<long long>>(0);
  if (!null || null->has_value()) return "NULL read as a value";
  if (null_row.get<int>(0) || null_row.get<pg::Uuid>(0)) return "NULL read as a plain type";
  return "";
}

}  // namespace goro::fuzz
