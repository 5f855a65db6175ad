// The pieces of a log line that access_log (middleware/) and Logger (trace/) share.
#pragma once

#include <string>
#include <string_view>

#include <goro/http/middleware.hpp>

namespace goro::http::detail {

// Writes line and its newline to fd in one write(2), off the P (goro::blocking).
void write_whole_line(int fd, std::string_view line);
// To sink, or to stderr when sink is empty.
void write_log_line(const LogSink& sink, std::string_view line);
// "2026-11-25T19:45:01.123Z" for now.
void append_utc_now(std::string& out);
// A logfmt value: bare when it has no space, quote, '=' or control character, else
// quoted with \" \\ and \xNN escapes; "-" when empty.
void append_logfmt_value(std::string& out, std::string_view v);
// A JSON string (RFC 8259 escaping; bytes >= 0x80 are copied as they are).
void append_json_string(std::string& out, std::string_view v);

}  // namespace goro::http::detail
