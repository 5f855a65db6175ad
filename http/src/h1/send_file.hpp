// sendfile(2) onto a plain HTTP/1.1 connection's socket, for FileSender (h1/conn.cpp).
#pragma once

#include <cstdint>
#include <system_error>

#include <goro/net/stream.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::http::detail::h1 {

// Sends count bytes of the file fd from offset onto the non-blocking socket; sent counts
// what went. When the socket is full the goroutine parks on the netpoller until it has
// room, deadline passes (net::errc::timeout; no_deadline: none) or ctx ends (its error).
// errc::unexpected_eof when the file ends first; else the error of sendfile(2).
std::error_code send_file(int socket, int fd, std::uint64_t offset, std::uint64_t count,
                          net::Deadline deadline, const Context& ctx, std::uint64_t& sent);

}  // namespace goro::http::detail::h1
