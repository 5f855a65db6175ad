// Socket activation, passing listeners to a new process, and sd_notify (activation.hpp).
#include <goro/net/activation.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <optional>
#include <utility>
#include <cstdlib>
#include <cstring>

#include <goro/net/wait_fd.hpp>
#include <goro/scheduler/runtime.hpp>

#include "internal.hpp"
#include "net_fd.hpp"

extern char** environ;

namespace goro::net {

namespace {

constexpr int kFirstFd = 3;  // SD_LISTEN_FDS_START

const std::error_code kInvalid = std::make_error_code(std::errc::invalid_argument);

int get_int_option(int fd, int level, int name) {
  int value = 0;
  socklen_t len = sizeof value;
  return ::getsockopt(fd, level, name, &value, &len) == 0 ? value : -1;
}

std::optional<long> parse_number(const char* s) {
  if (s == nullptr || *s == '\0') return std::nullopt;
  long n = 0;
  auto [end, ec] = std::from_chars(s, s + std::strlen(s), n);
  if (ec != std::errc() || *end != '\0' || n < 0) return std::nullopt;
  return n;
}

bool is_activation_variable(std::string_view entry) {
  for (std::string_view name : {"LISTEN_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES=", "NOTIFY_SOCKET="}) {
    if (entry.starts_with(name)) return true;
  }
  return false;
}

// Writes n in decimal at out (room for 20 digits and a NUL); async-signal-safe.
void write_decimal(char* out, long n) {
  char digits[24];
  int len = 0;
  do {
    digits[len++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  for (int i = 0; i < len; ++i) out[i] = digits[len - 1 - i];
  out[len] = '\0';
}

// The child's side of start_with_listeners, between fork and exec: async-signal-safe
// calls only. Never returns.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp,
                             char* pid_digits, const int* fds, int count) {
  write_decimal(pid_digits, static_cast<long>(::getpid()));
  // Out of the way of the targets first: a source may sit where another goes.
  int moved[64];
  for (int i = 0; i < count; ++i) {
    moved[i] = ::fcntl(fds[i], F_DUPFD_CLOEXEC, kFirstFd + count);
    if (moved[i] < 0) ::_exit(127);
  }
  for (int i = 0; i < count; ++i) {
    if (::dup2(moved[i], kFirstFd + i) < 0) ::_exit(127);  // dup2 clears FD_CLOEXEC
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) (void)::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  ::_exit(127);
}

}  // namespace

Result<Listener> listener_from_fd(int fd) {
  if (fd < 0 || get_int_option(fd, SOL_SOCKET, SO_ACCEPTCONN) != 1 ||
      get_int_option(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM) {
    return kInvalid;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return detail::last_errno();
  Network kind;
  switch (ss.ss_family) {
    case AF_INET:
    case AF_INET6: kind = Network::tcp; break;
    case AF_UNIX: kind = Network::unix_stream; break;
    default: return kInvalid;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    return detail::last_errno();
  }
  auto nfd = std::make_unique<detail::NetFd>(fd, ss.ss_family, kind);
  if (std::error_code ec = nfd->init()) return ec;
  Addr addr = nfd->local_addr();
  return Listener(std::move(nfd), addr, ListenOptions{}, false);
}

Result<std::vector<InheritedListener>> inherited_listeners() {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  const char* names = std::getenv("LISTEN_FDNAMES");
  std::optional<long> for_pid = parse_number(pid);
  std::optional<long> count = parse_number(fds);
  const std::string name_list = names != nullptr ? names : "";
  const bool present = fds != nullptr;
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  std::vector<InheritedListener> out;
  if (!present) return out;
  if (!for_pid || !count || *count > 64) return kInvalid;
  if (*for_pid != static_cast<long>(::getpid())) return out;
  std::vector<std::string> split;
  for (std::size_t from = 0; !name_list.empty();) {
    const std::size_t colon = name_list.find(':', from);
    split.push_back(name_list.substr(from, colon - from));
    if (colon == std::string::npos) break;
    from = colon + 1;
  }
  for (long i = 0; i < *count; ++i) {
    Result<Listener> ln = listener_from_fd(kFirstFd + static_cast<int>(i));
    if (!ln) return ln.error();
    const std::size_t k = static_cast<std::size_t>(i);
    out.push_back({k < split.size() && !split[k].empty() ? split[k] : "unknown", std::move(*ln)});
  }
  return out;
}

Result<int> start_with_listeners(const std::string& path, const std::vector<std::string>& args,
                                 std::span<const PassedListener> listeners,
                                 const std::vector<std::string>& env) {
  if (listeners.size() > 64 || args.empty()) return kInvalid;
  // Everything the child needs is made here: after fork it may not allocate.
  std::vector<std::string> entries;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (!is_activation_variable(*e)) entries.emplace_back(*e);
  }
  for (const std::string& e : env) entries.push_back(e);
  std::string names;
  std::vector<int> fds;
  for (const PassedListener& l : listeners) {
    if (l.fd < 0) return std::make_error_code(std::errc::bad_file_descriptor);
    if (!names.empty()) names += ':';
    names += l.name;
    fds.push_back(l.fd);
  }
  if (!listeners.empty()) {
    entries.push_back("LISTEN_FDS=" + std::to_string(listeners.size()));
    entries.push_back("LISTEN_FDNAMES=" + names);
    entries.push_back("LISTEN_PID=" + std::string(24, '\0'));
  }
  std::vector<char*> envp;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* pid_digits = listeners.empty() ? nullptr : entries.back().data() + std::strlen("LISTEN_PID=");
  std::vector<std::string> argv_copy = args;
  std::vector<char*> argv;
  for (std::string& a : argv_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  char dummy[24];
  if (pid_digits == nullptr) pid_digits = dummy;
  int pid = -1;
  int fork_errno = 0;
  goro::blocking([&] {
    pid = ::fork();
    if (pid == 0) {
      exec_child(path.c_str(), argv.data(), envp.data(), pid_digits, fds.data(),
                 static_cast<int>(fds.size()));
    }
    if (pid < 0) fork_errno = errno;
  });
  if (pid < 0) return detail::errno_code(fork_errno);
  return pid;
}

std::error_code notify(std::string_view state) {
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (where == nullptr || *where == '\0') return {};
  Result<Addr> addr = detail::parse_unix(where);
  if (!addr) return addr.error();
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return detail::last_errno();
  std::error_code ec;
  if (::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, addr->sockaddr_ptr(), addr->size()) < 0)
    ec = detail::last_errno();
  ::close(fd);
  return ec;
}

Result<NotifySocket> NotifySocket::open() {
  static std::atomic<unsigned> sequence{0};
  NotifySocket s;
  s.name_ = "@goro-notify-" + std::to_string(::getpid()) + "-" +
            std::to_string(sequence.fetch_add(1, std::memory_order_relaxed));
  Result<Addr> addr = detail::parse_unix(s.name_);
  if (!addr) return addr.error();
  s.fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s.fd_ < 0) return detail::last_errno();
  if (::bind(s.fd_, addr->sockaddr_ptr(), addr->size()) != 0) return detail::last_errno();
  Result<FdWatch> watch = FdWatch::open(s.fd_);
  if (!watch) return watch.error();
  s.watch_ = std::move(*watch);
  return s;
}

NotifySocket::NotifySocket(NotifySocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      name_(std::move(other.name_)),
      watch_(std::move(other.watch_)) {}

NotifySocket& NotifySocket::operator=(NotifySocket&& other) noexcept {
  if (this != &other) {
    watch_ = std::move(other.watch_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    name_ = std::move(other.name_);
  }
  return *this;
}

NotifySocket::~NotifySocket() {
  watch_.release();
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> NotifySocket::receive(Deadline deadline) {
  if (fd_ < 0) return std::make_error_code(std::errc::bad_file_descriptor);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n >= 0) return std::string(buf, static_cast<std::size_t>(n));
    if (errno != EAGAIN && errno != EINTR) return detail::last_errno();
    if (std::error_code ec = watch_.wait(Interest::read, deadline)) return ec;
  }
}

}  // namespace goro::net
