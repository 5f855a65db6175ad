#include <goro/net/stream.hpp>

#include "internal.hpp"

namespace goro::net {

Result<std::size_t> read_full(Stream& s, void* buf, std::size_t len) {
  char* p = static_cast<char*>(buf);
  std::size_t done = 0;
  while (done < len) {
    auto n = s.read(p + done, len - done);
    if (!n) return n.error();
    if (*n == 0) break;
    done += *n;
  }
  return done;
}

Result<std::size_t> Stream::read(void* buf, std::size_t len, const Context& ctx) {
  return with_context(*this, IoMode::read, ctx, [&] { return read(buf, len); });
}

Result<std::size_t> Stream::write(const void* buf, std::size_t len, const Context& ctx) {
  return with_context(*this, IoMode::write, ctx, [&] { return write(buf, len); });
}

namespace detail {

std::int64_t to_nanotime(Deadline d) noexcept {
  if (d == Deadline{}) return 0;
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d.time_since_epoch()).count();
  return ns > 0 ? static_cast<std::int64_t>(ns) : 1;
}

}  // namespace detail
}  // namespace goro::net
