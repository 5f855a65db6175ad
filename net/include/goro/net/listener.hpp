// goro::net::Listener and listen() — accepting stream connections (TCP, Unix).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string_view>
#include <system_error>

#include <goro/net/addr.hpp>
#include <goro/net/conn.hpp>
#include <goro/base/result.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/chan.hpp>

namespace goro::net {

struct ListenOptions {
  // SO_REUSEPORT: several listeners (e.g. one per process) share the port.
  bool reuse_port = false;
  // Length of the kernel's queue of connections not yet accepted (capped by
  // net.core.somaxconn).
  int backlog = 4096;
  // TCP keep-alive idle time and interval set on accepted connections, as Go's
  // default of 15 s; zero turns keep-alive off.
  std::chrono::seconds keep_alive{15};
};

// Owns a listening socket; move-only. Concurrency: accept() from any number of
// goroutines (serialised), close() and set_deadline() from any goroutine.
// close() from a goroutine returns once no accept() is inside the socket any more, so
// the object may be destroyed right after it (see Conn).
class Listener {
 public:
  Listener() noexcept;
  Listener(std::unique_ptr<detail::NetFd> fd, Addr addr, ListenOptions options,
           bool unlink_on_close);
  Listener(Listener&&) noexcept;
  Listener& operator=(Listener&&) noexcept;
  ~Listener();

  // Waits for the next connection. Blocks until one arrives, the deadline passes
  // (errc::timeout) or close() (errc::closed). When the process is out of file
  // descriptors (EMFILE, ENFILE) or kernel memory, it does not fail: it sleeps 5 ms,
  // doubling up to 1 s, retrying until a descriptor frees up, and logs one line to
  // stderr per such episode. close() ends such a sleep at once.
  Result<Conn> accept();
  // The same, given up with ctx.err() when ctx is cancelled first (a back-off sleep
  // for lack of descriptors ends at its next step).
  Result<Conn> accept(const Context& ctx);

  // The bound address (with the real port when listening on port 0).
  const Addr& addr() const noexcept { return addr_; }

  // Stops listening; a waiting accept() returns errc::closed. A Unix socket file
  // this listener created is removed.
  std::error_code close();

  // Deadline for accept() (see Deadline).
  std::error_code set_deadline(Deadline d);

  int fd() const noexcept;
  // False once close() was called.
  bool is_open() const noexcept;

 private:
  std::unique_ptr<detail::NetFd> fd_;
  Addr addr_;
  ListenOptions options_;
  bool unlink_on_close_ = false;
  goro::Chan<char> closed_ = goro::Chan<char>::nil();  // closed by close(): ends a backoff
  std::atomic<bool> closing_{false};                   // closed_ is closed (only once)
};

// Listens on address. network: "tcp" (IPv4 and IPv6: ":8080" listens on both),
// "tcp4", "tcp6" or "unix" (address is a path; "@name" for the abstract namespace).
// address: "127.0.0.1:0", "[::1]:0", ":8080", "localhost:8080" (a name is resolved
// and the first address used). TCP sockets get SO_REUSEADDR.
// Blocks only to resolve a host name (in goro::blocking).
Result<Listener> listen(std::string_view network, std::string_view address,
                        ListenOptions options = {});

}  // namespace goro::net
