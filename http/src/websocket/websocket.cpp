// WebSocket and MessageWriter: handles on a detail::Connection; and the error categories.
#include <goro/http/websocket.hpp>

#include <string>

#include "websocket_connection.hpp"

namespace goro::http::websocket {
namespace {

class WebSocketCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.websocket"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::closed: return "websocket closed";
      case errc::protocol_error: return "websocket protocol error from the peer (closed with 1002)";
      case errc::invalid_utf8: return "websocket text that is not UTF-8 (closed with 1007)";
      case errc::message_too_big: return "websocket message too big (closed with 1009)";
      case errc::bad_handshake: return "bad websocket handshake";
      case errc::cannot_upgrade: return "this connection cannot be upgraded to a websocket";
    }
    return "unknown goro.websocket error";
  }
};

class CloseCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.websocket.close"; }
  std::string message(int value) const override {
    const char* name = "closed by the peer";
    switch (value) {
      case close_code::normal: name = "normal closure"; break;
      case close_code::going_away: name = "going away"; break;
      case close_code::protocol_error: name = "protocol error"; break;
      case close_code::unsupported_data: name = "unsupported data"; break;
      case close_code::no_status: name = "no status code"; break;
      case close_code::abnormal: name = "closed without a close frame"; break;
      case close_code::invalid_payload: name = "invalid payload data"; break;
      case close_code::policy_violation: name = "policy violation"; break;
      case close_code::message_too_big: name = "message too big"; break;
      case close_code::mandatory_extension: name = "mandatory extension"; break;
      case close_code::internal_error: name = "internal error"; break;
      default: break;
    }
    return "websocket closed by the peer: " + std::to_string(value) + " " + name;
  }
};

// The error of an operation on a WebSocket that holds no connection (moved from).
std::error_code no_connection() { return errc::closed; }

}  // namespace

const std::error_category& websocket_category() noexcept {
  static const WebSocketCategory category;
  return category;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), websocket_category()};
}

const std::error_category& close_category() noexcept {
  static const CloseCategory category;
  return category;
}

std::uint16_t close_code_of(std::error_code ec) noexcept {
  return ec.category() == close_category() ? static_cast<std::uint16_t>(ec.value()) : 0;
}

bool valid_utf8(std::string_view text) noexcept { return detail::valid_utf8(text); }

// --- WebSocket

WebSocket::WebSocket() noexcept = default;
WebSocket::WebSocket(std::unique_ptr<detail::Connection> conn) noexcept : conn_(std::move(conn)) {}
WebSocket::WebSocket(WebSocket&&) noexcept = default;
WebSocket& WebSocket::operator=(WebSocket&&) noexcept = default;
WebSocket::~WebSocket() = default;

Result<Message> WebSocket::read(const Context& ctx) {
  Message m;
  if (std::error_code ec = read(m, ctx)) return ec;
  return m;
}

std::error_code WebSocket::read(Message& message, const Context& ctx) {
  return conn_ ? conn_->read(message, ctx) : no_connection();
}

std::error_code WebSocket::write(MessageType type, std::string_view data, const Context& ctx) {
  return conn_ ? conn_->write(type, data, ctx) : no_connection();
}

MessageWriter WebSocket::writer(MessageType type, const Context& ctx) {
  if (!conn_) return MessageWriter(nullptr, type, ctx, no_connection());
  return MessageWriter(conn_.get(), type, ctx, conn_->lock_message(ctx));
}

std::error_code WebSocket::ping(std::string_view payload, const Context& ctx) {
  return conn_ ? conn_->ping(payload, ctx) : no_connection();
}

std::error_code WebSocket::close(std::uint16_t code, std::string_view reason) {
  return conn_ ? conn_->close(code, reason) : no_connection();
}

std::error_code WebSocket::set_read_deadline(net::Deadline d) {
  return conn_ ? conn_->set_read_deadline(d) : no_connection();
}

std::error_code WebSocket::set_write_deadline(net::Deadline d) {
  return conn_ ? conn_->stream().set_write_deadline(d) : no_connection();
}

const std::string& WebSocket::subprotocol() const noexcept {
  static const std::string none;
  return conn_ ? conn_->subprotocol() : none;
}

bool WebSocket::compression() const noexcept { return conn_ && conn_->compression(); }

std::uint16_t WebSocket::peer_close_code() const noexcept {
  return conn_ ? conn_->peer_close_code() : 0;
}

std::string WebSocket::peer_close_reason() const {
  return conn_ ? conn_->peer_close_reason() : std::string();
}

std::string WebSocket::remote_addr() const {
  return conn_ ? conn_->stream().remote_addr().to_string() : std::string();
}

// --- MessageWriter

MessageWriter::MessageWriter(detail::Connection* conn, MessageType type, const Context& ctx,
                             std::error_code error)
    : conn_(conn), type_(type), ctx_(ctx), error_(error) {
  // Without the message lock (error_ set) there is nothing to finish.
  finished_ = static_cast<bool>(error_);
  compressed_ = conn_ != nullptr && conn_->compression();
}

MessageWriter::MessageWriter(MessageWriter&& other) noexcept
    : conn_(other.conn_),
      type_(other.type_),
      ctx_(std::move(other.ctx_)),
      error_(other.error_),
      started_(other.started_),
      finished_(other.finished_),
      compressed_(other.compressed_) {
  other.finished_ = true;
  other.conn_ = nullptr;
}

MessageWriter::~MessageWriter() { (void)close(); }

std::error_code MessageWriter::write(std::string_view data) {
  if (finished_) return error_ ? error_ : make_error_code(errc::closed);
  if (data.empty()) return {};
  error_ = conn_->write_piece(type_, !started_, false, compressed_, data, ctx_);
  started_ = true;
  if (error_) {
    finished_ = true;
    conn_->unlock_message();
  }
  return error_;
}

std::error_code MessageWriter::close() {
  if (finished_) return error_;
  error_ = conn_->write_piece(type_, !started_, true, compressed_, {}, ctx_);
  finished_ = true;
  conn_->unlock_message();
  return error_;
}

}  // namespace goro::http::websocket
