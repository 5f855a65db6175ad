#include <goro/net/errors.hpp>

#include <string>

namespace goro::net {
namespace {

class NetCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.net"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::closed: return "use of closed network connection";
      case errc::timeout: return "i/o timeout";
      case errc::host_not_found: return "no such host";
      case errc::lookup_failed: return "host name lookup failed";
      case errc::interrupted: return "operation interrupted";
    }
    return "unknown goro.net error";
  }
  std::error_condition default_error_condition(int value) const noexcept override {
    if (static_cast<errc>(value) == errc::timeout) return std::errc::timed_out;
    return std::error_condition(value, *this);
  }
};

}  // namespace

const std::error_category& net_category() noexcept {
  static const NetCategory category;
  return category;
}

std::error_code make_error_code(errc e) noexcept {
  return std::error_code(static_cast<int>(e), net_category());
}

bool is_timeout(std::error_code ec) noexcept { return ec == std::errc::timed_out; }

bool is_closed(std::error_code ec) noexcept { return ec == errc::closed; }

}  // namespace goro::net
