// The pieces of an HTTP/1.1 response head that the engine (h1/conn.cpp) writes: the
// status line, the fields it manages itself, and the check that keeps a field from
// splitting the message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <goro/http/headers.hpp>

namespace goro::http::detail::h1 {

// Appends n in decimal.
void append_number(std::string& out, std::uint64_t n);

// Appends "HTTP/1.1 <status> <reason>\r\n" (made once for each code from 100 to 599).
void append_status_line(std::string& out, int status);

// The header fields the head writer looks at: the ones it manages itself (a handler's
// values for them are not copied verbatim), and the two it adds unless the handler did.
enum class Field { other, content_length, transfer_encoding, connection, date, server };
Field field_of(std::string_view name);

// Fields with a CR or LF would split the message: they are not sent.
bool safe_field(const HeaderField& f);

}  // namespace goro::http::detail::h1
