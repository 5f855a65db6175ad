// How a ServerConn becomes an HTTP/2 connection: ALPN "h2" over TLS (the handshake runs
// here, before the first read, to learn it), or the client preface on a plain
// connection when h2c is on. The ServerConn stays the connection's entry in the
// server's set (connection_count, graceful shutdown), its H2Conn does the serving.
#include <algorithm>
#include <string_view>

#include <goro/net/tls.hpp>

#include "h2_conn.hpp"
#include "server_conn.hpp"

namespace goro::http::detail {
namespace {

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

net::Deadline deadline_in(std::chrono::nanoseconds d) {
  return d.count() > 0 ? net::deadline_after(d) : net::no_deadline;
}

}  // namespace

bool ServerConn::wants_http2() {
  const ServerOptions& options = server_->options;
  if (!options.enable_http2) return false;
  if (auto* tls = dynamic_cast<net::TlsConn*>(stream_.get())) {
    // A failed handshake fails the HTTP/1.1 path's first read the same way.
    set_read_deadline(deadline_in(options.read_header_timeout));
    set_write_deadline(deadline_in(options.read_header_timeout));
    if (tls->handshake()) return false;
    return tls->negotiated_alpn() == "h2";
  }
  if (!options.enable_h2c) return false;
  set_read_deadline(deadline_in(options.read_header_timeout));
  for (;;) {
    std::string_view got = x_->parser.unparsed();
    const std::size_t k = std::min(got.size(), kClientPreface.size());
    if (got.substr(0, k) != kClientPreface.substr(0, k)) return false;
    if (k == kClientPreface.size()) return true;
    std::span<char> space = x_->parser.read_space();
    Result<std::size_t> n = stream_->read(space.data(), space.size());
    if (!n || *n == 0) return false;
    x_->parser.commit(*n);
    bytes_in_ += *n;
  }
}

void ServerConn::serve_http2() {
  // The handshake's deadlines end here; H2Conn sets its own.
  set_read_deadline(net::no_deadline);
  set_write_deadline(net::no_deadline);
  H2Conn conn(server_, *stream_, remote_, std::string(x_->parser.unparsed()));
  bool shutting_down;
  {
    std::lock_guard lock(server_->mu);
    h2_ = &conn;
    idle_.store(false, std::memory_order_seq_cst);
    shutting_down = server_->shutting_down;
  }
  if (shutting_down) conn.begin_shutdown();
  publish_bytes();
  conn.serve();
  std::lock_guard lock(server_->mu);
  h2_ = nullptr;
}

void ServerConn::begin_shutdown() {
  if (h2_ != nullptr) h2_->begin_shutdown();
}

}  // namespace goro::http::detail
