// Errors of goro::net: std::error_code values (see docs/errors.md).
//
// Errors goro itself defines live in goro::net::errc (category "goro.net"). Errors
// the kernel reports keep their errno in std::system_category(), so compare them with
// std::errc: `ec == std::errc::connection_refused`, `ec == std::errc::connection_reset`,
// `ec == std::errc::broken_pipe`. TLS errors have their own categories (tls.hpp).
#pragma once

#include <system_error>
#include <type_traits>

namespace goro::net {

enum class errc {
  // The connection, listener or packet socket was closed by this process (Go's
  // net.ErrClosed): the operation was waiting or started after close().
  closed = 1,
  // A deadline set with set_deadline / set_read_deadline / set_write_deadline, or a
  // dial timeout, passed. Compares equal to std::errc::timed_out.
  timeout = 2,
  // resolve()/dial(): the name does not exist (getaddrinfo's EAI_NONAME / EAI_NODATA).
  host_not_found = 3,
  // resolve()/dial(): the lookup failed otherwise (no answer from DNS, EAI_AGAIN, ...).
  lookup_failed = 4,
  // Stream::interrupt woke the operation (how a context's cancellation reaches a read
  // or write; the context-taking calls return the context's error instead).
  interrupted = 5,
};

// The "goro.net" category.
const std::error_category& net_category() noexcept;

std::error_code make_error_code(errc e) noexcept;

// True for a deadline that passed (errc::timeout) or a kernel ETIMEDOUT (keep-alive
// probes, a connect the kernel gave up on).
bool is_timeout(std::error_code ec) noexcept;

// True for errc::closed: the caller (or another goroutine) closed this object.
bool is_closed(std::error_code ec) noexcept;

}  // namespace goro::net

template <>
struct std::is_error_code_enum<goro::net::errc> : std::true_type {};
