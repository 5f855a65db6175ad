// goro::net::dial and resolve — opening connections and looking up host names.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include <goro/net/addr.hpp>
#include <goro/net/conn.hpp>
#include <goro/base/result.hpp>

namespace goro::net {

// Connects to address. network: "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6" or
// "unix". address: "host:port" with a name or IP literal ("example.com:80",
// "127.0.0.1:80", "[::1]:80"), or a Unix path. A name is resolved (getaddrinfo in
// goro::blocking) and its addresses tried in order until one connects; each try gets
// an equal share of the time left (at least 2 s, as Go does). timeout bounds the whole
// dial, lookup included, though a lookup cannot be interrupted: one that outlasts it
// ends the dial with errc::timeout when it returns. Zero means none (the kernel's connect timeout
// still applies). Returns the first error when every address fails, errc::timeout if time ran out.
// Blocks (parks) until connected or failed.
Result<Conn> dial(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout = {});
// The same under a context: its deadline bounds the dial like a timeout, and its
// cancellation ends a connect in progress; either way the dial returns ctx.err().
Result<Conn> dial(std::string_view network, std::string_view address, const Context& ctx);
Result<Conn> dial(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout, const Context& ctx);

// Looks host up: an IP literal is returned as is, a name is resolved with getaddrinfo
// (in goro::blocking: /etc/hosts, then DNS). Returns the distinct addresses in the
// resolver's order, as Network::ip addresses with port 0. Blocks (parks) until done.
Result<std::vector<Addr>> resolve(std::string_view host);

}  // namespace goro::net
