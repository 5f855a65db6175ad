// The call is made directly, not in goro::blocking, as nginx makes it: the socket is
// non-blocking, so it returns once the socket buffer is full, and a 1 MiB call outlasts
// the blocking protocol's short-call limit: the P hand-off every such call then paid cost
// a third more CPU per response in the load kit's static1m. The price: pages of the file
// not in the page cache are read from the disk while the thread keeps its P.
#include "h1/send_file.hpp"

#include <sys/sendfile.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <goro/http/errors.hpp>
#include <goro/net/errors.hpp>
#include <goro/net/wait_fd.hpp>

namespace goro::http::detail::h1 {

std::error_code send_file(int socket, int fd, std::uint64_t offset, std::uint64_t count,
                          net::Deadline deadline, const Context& ctx, std::uint64_t& sent) {
  auto at = static_cast<off_t>(offset);
  sent = 0;
  while (sent < count) {
    constexpr std::uint64_t kMaxCall = 1u << 30;
    const auto want = static_cast<std::size_t>(std::min(count - sent, kMaxCall));
    const ssize_t n = ::sendfile(socket, fd, &at, want);
    const int err = n < 0 ? errno : 0;
    if (n > 0) {
      sent += static_cast<std::uint64_t>(n);
      continue;
    }
    // The file is shorter than it was: the promised length cannot be met.
    if (n == 0) return make_error_code(errc::unexpected_eof);
    if (err == EINTR) continue;
    if (err != EAGAIN) return std::error_code(err, std::generic_category());
    if (deadline == net::no_deadline) {
      if (std::error_code ec = net::wait_fd(socket, net::Interest::write, ctx)) return ec;
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return make_error_code(net::errc::timeout);
    auto [bounded, cancel] = goro::with_deadline(ctx, deadline);
    std::error_code ec = net::wait_fd(socket, net::Interest::write, bounded);
    cancel();
    if (ec == goro::make_error_code(goro::context_errc::deadline_exceeded) && !ctx.err()) {
      return make_error_code(net::errc::timeout);
    }
    if (ec) return ec;
  }
  return {};
}

}  // namespace goro::http::detail::h1
