// Listening sockets handed from one process to the next: systemd's socket activation
// (LISTEN_FDS), the same protocol from a process to the one it starts (a binary upgrade
// with no port closed), and systemd's readiness notification (NOTIFY_SOCKET).
//
//   // In the new process: the sockets it was given, if any, else its own.
//   Result<std::vector<InheritedListener>> got = inherited_listeners();
//   // In the old one: start the new binary with our listener at descriptor 3, and wait
//   // until it says READY=1 before stopping.
//   Result<NotifySocket> ready = NotifySocket::open();
//   Result<int> pid = start_with_listeners(path, argv, {{"http", ln.fd()}},
//                                          {"NOTIFY_SOCKET=" + ready->name()});
//
// The protocol (sd_listen_fds(3)): descriptors 3, 4, ... are listening sockets, counted by
// LISTEN_FDS, named by LISTEN_FDNAMES (colon-separated, optional), and meant for the
// process whose pid LISTEN_PID holds (not for its children). Both ends share the socket:
// connections the kernel queued before the old process stopped accepting are accepted
// by the new one, so none is refused.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <goro/base/result.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/stream.hpp>
#include <goro/net/wait_fd.hpp>

namespace goro::net {

struct InheritedListener {
  std::string name;  // from LISTEN_FDNAMES; "unknown" when it names none (systemd's word)
  Listener listener;
};

// The listening sockets this process was started with (see above), taken over as
// listener_from_fd does. Empty when LISTEN_FDS is unset or LISTEN_PID names another
// process. Unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES, so that a child does not
// take them for its own. An error (std::errc::invalid_argument) when a descriptor is not
// a listening TCP or Unix stream socket, or the variables do not parse. Call it from a
// goroutine, once.
Result<std::vector<InheritedListener>> inherited_listeners();

// Takes over fd, a listening TCP or Unix stream socket: close-on-exec, non-blocking,
// registered with the netpoller (as Go's net.FileListener, but fd itself is taken, not a
// duplicate). std::errc::invalid_argument when fd is not one. Never blocks.
Result<Listener> listener_from_fd(int fd);

// A listener to pass to a new process: its name (LISTEN_FDNAMES) and descriptor
// (Listener::fd(); it stays open and owned by the caller).
struct PassedListener {
  std::string name;
  int fd = -1;
};

// Starts the program at path (not looked up in PATH) with args (args[0] is its argv[0])
// and this process's environment, less LISTEN_* and NOTIFY_SOCKET, plus env ("NAME=value"
// entries). The listeners' descriptors are at 3, 4, ... in the new process, with
// LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID (its pid) set for them; every other
// descriptor of this process that is close-on-exec stays out. Signal dispositions and
// the signal mask start at their defaults. Returns the new process's pid; it is this
// process's child (waitpid it). Blocks for the fork (in goro::blocking).
Result<int> start_with_listeners(const std::string& path, const std::vector<std::string>& args,
                                 std::span<const PassedListener> listeners,
                                 const std::vector<std::string>& env = {});

// systemd's sd_notify: sends state ("READY=1", "STOPPING=1", "STATUS=...", several
// newline-separated) as one datagram to the Unix socket NOTIFY_SOCKET names (a path, or
// "@name" in the abstract namespace). {} and nothing sent when NOTIFY_SOCKET is unset.
// Never blocks for long (a local datagram).
std::error_code notify(std::string_view state);

// The receiving end of notify(): a Unix datagram socket in the abstract namespace, for a
// process that starts another and waits for its READY=1. Move-only; closes when
// destroyed.
class NotifySocket {
 public:
  // A new socket named "@goro-notify-<pid>-<n>". Call from a goroutine.
  static Result<NotifySocket> open();
  NotifySocket() noexcept = default;
  NotifySocket(NotifySocket&&) noexcept;
  NotifySocket& operator=(NotifySocket&&) noexcept;
  ~NotifySocket();

  // What NOTIFY_SOCKET should say for a sender to reach this socket.
  const std::string& name() const noexcept { return name_; }
  // The next message (one datagram, as sent). Parks until one comes or the deadline
  // passes (errc::timeout).
  Result<std::string> receive(Deadline deadline = no_deadline);

 private:
  int fd_ = -1;
  std::string name_;
  FdWatch watch_;
};

}  // namespace goro::net
