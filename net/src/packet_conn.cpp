#include <goro/net/packet_conn.hpp>

#include <goro/net/errors.hpp>

#include "internal.hpp"
#include "net_fd.hpp"

namespace goro::net {

namespace {
const std::error_code kNotOpen = std::make_error_code(std::errc::bad_file_descriptor);
}

PacketConn::PacketConn() noexcept = default;
PacketConn::PacketConn(std::unique_ptr<detail::NetFd> fd) noexcept : fd_(std::move(fd)) {}
PacketConn::PacketConn(PacketConn&&) noexcept = default;
PacketConn& PacketConn::operator=(PacketConn&& other) noexcept {
  if (this != &other) {
    if (fd_) fd_->close();
    fd_ = std::move(other.fd_);
  }
  return *this;
}
PacketConn::~PacketConn() {
  if (fd_) fd_->close();
}

Result<std::pair<std::size_t, Addr>> PacketConn::read_from(void* buf, std::size_t len) {
  if (!fd_) return kNotOpen;
  Addr from;
  auto n = fd_->read_from(buf, len, &from);
  if (!n) return n.error();
  return std::pair{*n, from};
}

Result<std::size_t> PacketConn::write_to(const void* buf, std::size_t len, const Addr& addr) {
  if (!fd_) return kNotOpen;
  return fd_->write_to(buf, len, addr);
}

std::error_code PacketConn::close() {
  if (!fd_) return kNotOpen;
  return fd_->close();
}

std::error_code PacketConn::set_read_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::read);
}

std::error_code PacketConn::set_write_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::write);
}

std::error_code PacketConn::set_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::both);
}

Addr PacketConn::local_addr() const { return fd_ ? fd_->local_addr() : Addr(); }
int PacketConn::fd() const noexcept { return fd_ && !fd_->closed() ? fd_->sysfd() : -1; }
bool PacketConn::is_open() const noexcept { return fd_ && !fd_->closed(); }

Result<PacketConn> listen_packet(std::string_view network, std::string_view address) {
  auto spec = detail::parse_network(network);
  if (!spec) return spec.error();
  if (spec->sotype != SOCK_DGRAM) return std::errc::protocol_not_supported;
  auto fd = detail::bind_socket(*spec, address, false, -1);
  if (!fd) return fd.error();
  return PacketConn(std::move(*fd));
}

}  // namespace goro::net
