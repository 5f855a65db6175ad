// A WebSocket connection after its handshake: the reading side (a FrameDecoder over a
// read buffer), the writing side, and the close handshake. WebSocket and MessageWriter
// are thin handles on it.
//
// Locking:
//   read_mu_     one reader at a time; guards the read buffer, the decoder, the message
//                being assembled, the inflater and read_error_. close() takes it to wait
//                for the peer's close frame when nobody else is reading.
//   message_mu_  held for a whole data message (write, or a MessageWriter's lifetime);
//                guards the deflater and deflated_. Taken before frame_mu_.
//   frame_mu_    held while one frame is written; guards masked_, write_error_ and
//                close_sent_. Control frames (pong, ping, close) take only this one, so
//                they go out between the frames of a message.
//   state_mu_    a std::mutex never held across a park: the peer's close code and
//                reason, and whether the stream has been closed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <goro/http/websocket.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/mutex.hpp>

#include "websocket_deflate.hpp"
#include "websocket_frame.hpp"

namespace goro::http::websocket::detail {

// What a handshake hands to the connection.
struct Setup {
  bool server = true;
  std::unique_ptr<net::Stream> owned;  // a client's stream; empty on a server
  net::Stream* stream = nullptr;       // the stream: owned, or the server connection's
  std::string early;                   // bytes read past the handshake
  std::string subprotocol;
  std::optional<DeflateParams> deflate;  // permessage-deflate, when agreed
  int compression_level = 1;
  std::size_t compression_min_size = 128;
  std::size_t max_message_size = 1 << 20;
  std::chrono::nanoseconds close_timeout = std::chrono::seconds(5);
};

class Connection {
 public:
  explicit Connection(Setup setup);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::error_code read(Message& out, const Context& ctx);
  std::error_code write(MessageType type, std::string_view data, const Context& ctx);
  std::error_code ping(std::string_view payload, const Context& ctx);
  std::error_code close(std::uint16_t code, std::string_view reason);

  // MessageWriter's parts. lock_message / unlock_message bracket a message; write_piece
  // sends one frame of it (caller holds the message lock).
  std::error_code lock_message(const Context& ctx) { return message_mu_.lock(ctx); }
  void unlock_message() { message_mu_.unlock(); }
  std::error_code write_piece(MessageType type, bool first, bool fin, bool compress,
                              std::string_view data, const Context& ctx);
  bool compression() const noexcept { return deflater_ != nullptr; }

  net::Stream& stream() noexcept { return *stream_; }
  const std::string& subprotocol() const noexcept { return subprotocol_; }
  std::uint16_t peer_close_code() const;
  std::string peer_close_reason() const;

 private:
  // Reading (caller holds read_mu_).
  std::error_code read_locked(Message& out, const Context& ctx);
  std::error_code fill(const Context& ctx);
  char* input() noexcept { return large_ ? large_.get() : small_; }
  std::size_t input_capacity() const noexcept { return large_ ? large_capacity_ : sizeof small_; }
  std::error_code read_failed(const Result<std::size_t>& n);
  std::error_code finish_message(Message& out);
  std::error_code peer_closed(std::uint16_t code, std::string_view reason);
  std::error_code fail(std::uint16_t code, const char* reason);
  // Ends the connection after the close frames: half-closes, discards what the peer
  // still sends until it closes (bounded by close_timeout), then closes, so that unread
  // input cannot turn the close into a reset that destroys the close frame.
  void linger_close();
  // Closes the stream at once (once).
  void close_stream();

  // Writing.
  enum class CloseSend { sent, already_sent };
  std::error_code send_close(std::uint16_t code, std::string_view reason, const Context& ctx,
                             CloseSend* outcome);
  std::error_code send_control(std::uint8_t op, std::string_view payload, const Context& ctx);
  // Caller holds frame_mu_.
  std::error_code write_frame_locked(bool fin, bool rsv1, std::uint8_t op,
                                     std::string_view payload, const Context& ctx);

  const bool server_;
  std::unique_ptr<net::Stream> owned_;
  net::Stream* const stream_;
  const std::string subprotocol_;
  const std::size_t max_message_size_;
  const std::chrono::nanoseconds close_timeout_;
  const std::size_t compression_min_size_;

  goro::Mutex read_mu_;
  // The input is read into small_ when nothing is left over, the last read drained the
  // socket and came long after the one before (kBusyGapNs in the .cpp), so that a
  // WebSocket waiting for its next message holds no page of input (an idle one is the
  // common case); otherwise into large_, made when a read filled small_ or left part of
  // a frame.
  std::unique_ptr<char[]> large_;
  std::size_t large_capacity_ = 0;
  std::size_t begin_ = 0, end_ = 0;  // unconsumed input: [begin_, end_) of input()
  bool last_read_full_ = false;
  bool input_busy_ = false;  // the last read came within kBusyGapNs of the one before
  std::int64_t last_input_ns_ = INT64_MIN / 2;  // when it came (CLOCK_MONOTONIC_COARSE)
  char small_[512];
  FrameDecoder decoder_;
  std::string message_;     // the data message being assembled
  std::string compressed_;  // ... or its payload, while compressed
  std::unique_ptr<Inflater> inflater_;
  std::error_code read_error_;  // set once reading can never succeed again

  goro::Mutex message_mu_;
  std::unique_ptr<Deflater> deflater_;
  std::string deflated_;

  goro::Mutex frame_mu_;
  std::string masked_;
  std::error_code write_error_;
  bool close_sent_ = false;

  mutable std::mutex state_mu_;
  std::uint16_t peer_code_ = 0;
  std::string peer_reason_;
  bool stream_closed_ = false;
};

}  // namespace goro::http::websocket::detail
