#include <goro/net/conn.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <goro/net/errors.hpp>

#include "internal.hpp"
#include "net_fd.hpp"

namespace goro::net {

namespace {
const std::error_code kNotOpen = std::make_error_code(std::errc::bad_file_descriptor);
}

Conn::Conn() noexcept = default;
Conn::Conn(std::unique_ptr<detail::NetFd> fd) noexcept : fd_(std::move(fd)) {}
Conn::Conn(Conn&&) noexcept = default;
Conn& Conn::operator=(Conn&& other) noexcept {
  if (this != &other) {
    if (fd_) fd_->close();
    fd_ = std::move(other.fd_);
  }
  return *this;
}
Conn::~Conn() {
  if (fd_) fd_->close();
}

Result<std::size_t> Conn::read(void* buf, std::size_t len) {
  if (!fd_) return kNotOpen;
  return fd_->read(buf, len);
}

Result<std::size_t> Conn::read_full(void* buf, std::size_t len) {
  return net::read_full(*this, buf, len);
}

Result<std::size_t> Conn::write(const void* buf, std::size_t len) {
  if (!fd_) return kNotOpen;
  return fd_->write(buf, len);
}

Result<std::size_t> Conn::writev(const struct iovec* iov, int count) {
  if (!fd_) return kNotOpen;
  return fd_->writev(iov, count);
}

std::error_code Conn::send_file(int file, std::uint64_t offset, std::uint64_t count,
                                std::uint64_t& sent) {
  sent = 0;
  if (!fd_) return kNotOpen;
  return fd_->send_file(file, offset, count, sent);
}

std::error_code Conn::close() {
  if (!fd_) return kNotOpen;
  return fd_->close();
}

std::error_code Conn::shutdown_write() {
  if (!fd_) return kNotOpen;
  return fd_->shutdown(SHUT_WR);
}

std::error_code Conn::shutdown_read() {
  if (!fd_) return kNotOpen;
  return fd_->shutdown(SHUT_RD);
}

bool Conn::peer_closed() const { return fd_ && fd_->peer_closed(); }

std::error_code Conn::set_read_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::read);
}

std::error_code Conn::set_write_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::write);
}

std::error_code Conn::set_deadline(Deadline d) {
  if (!fd_) return kNotOpen;
  return fd_->set_deadline(d, detail::IoMode::both);
}

void* Conn::operator new(std::size_t size) { return goro::pool_alloc(size); }
void Conn::operator delete(void* p, std::size_t size) noexcept { goro::pool_free(p, size); }

bool Conn::start_on(Wake what, const WakeCall& call) { return fd_ && fd_->start_on(what, call); }
bool Conn::cancel_start(Wake what) { return fd_ && fd_->cancel_start(what); }
std::chrono::steady_clock::time_point Conn::readable_at() const {
  return fd_ ? fd_->readable_at() : std::chrono::steady_clock::time_point();
}

Addr Conn::remote_addr() const { return fd_ ? fd_->remote_addr() : Addr(); }
Addr Conn::local_addr() const { return fd_ ? fd_->local_addr() : Addr(); }
int Conn::fd() const noexcept { return fd_ && !fd_->closed() ? fd_->sysfd() : -1; }
bool Conn::is_open() const noexcept { return fd_ && !fd_->closed(); }

std::error_code Conn::set_nodelay(bool on) {
  if (!fd_) return kNotOpen;
  return fd_->set_option(IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0);
}

std::error_code Conn::set_keepalive(bool on, std::chrono::seconds period) {
  if (!fd_) return kNotOpen;
  return detail::set_keepalive(*fd_, on, period);
}

std::error_code Conn::set_linger(int sec) {
  if (!fd_) return kNotOpen;
  struct linger l = {};
  l.l_onoff = sec >= 0 ? 1 : 0;
  l.l_linger = sec >= 0 ? sec : 0;
  return fd_->set_option(SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

std::error_code Conn::set_read_buffer(int bytes) {
  if (!fd_) return kNotOpen;
  return fd_->set_option(SOL_SOCKET, SO_RCVBUF, bytes);
}

std::error_code Conn::set_write_buffer(int bytes) {
  if (!fd_) return kNotOpen;
  return fd_->set_option(SOL_SOCKET, SO_SNDBUF, bytes);
}

}  // namespace goro::net
