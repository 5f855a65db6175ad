// A WebSocket connection after its handshake: the reading side (a FrameDecoder over a
// read buffer), the writing side, and the close handshake. WebSocket and MessageWriter
// are thin handles on it.
//
// Locking:
//   read_mu_     one reader at a time; guards the read buffer, the decoder, the message
//                being assembled, the inflater and read_error_. close() takes it to wait
//                for the peer's close frame when nobody else is reading (never under
//                serve(), whose goroutine, or armed wake-up, is the reader).
//   message_mu_  held for a whole data message (write, or a MessageWriter's lifetime);
//                guards the deflater and its output. Taken before frame_mu_.
//   frame_mu_    held while one frame is written; guards masked_, write_error_ and
//                close_sent_. Control frames (pong, ping, close) take only this one, so
//                they go out between the frames of a message.
//   state_mu_    a std::mutex never held across a park: the peer's close code and
//                reason, whether the stream has been closed, and the read deadlines (the
//                user's and serve()'s hold), which it also orders on the stream.
#pragma once

#include <atomic>
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
  // A server's: what keeps its connection open (TakenConnection::owner); empty when the
  // connection ends with the handler.
  std::shared_ptr<net::Stream> kept;
  Context shutdown;  // a server's: cancelled when the server begins to shut down
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
  bool compression() const noexcept { return deflating_ != nullptr; }

  net::Stream& stream() noexcept { return *stream_; }
  const std::string& subprotocol() const noexcept { return subprotocol_; }
  std::uint16_t peer_close_code() const;
  std::string peer_close_reason() const;
  std::error_code set_read_deadline(net::Deadline d);

  // --- serve() (websocket_serve.cpp): reading without a goroutine of one's own ---
  // Whether the connection can go on once the handler that accepted it returns: a
  // client's always; a server's when it holds its owner.
  bool outlives_handler() const noexcept { return !server_ || kept_ != nullptr; }
  const std::shared_ptr<net::Stream>& kept() const noexcept { return kept_; }
  const Context& shutdown_context() const noexcept { return shutdown_; }
  // Marks the connection served: from now on read() refuses and close() leaves the
  // reading to the server's goroutine. False when it was served already.
  bool begin_serving() noexcept { return !served_.exchange(true, std::memory_order_acq_rel); }
  // The serving goroutine's read. hold > 0: a read that finds no byte of a message
  // waiting waits at most hold for one (within the read deadline); when none comes it
  // returns {} with *idle set, and the connection may wait with no goroutine (nothing
  // of a message is lost: a partial frame stays buffered).
  std::error_code serve_read(Message& out, std::chrono::nanoseconds hold, bool* idle);
  // Whether input is buffered (a frame, or the start of one, read past the last
  // message): then the serving goroutine reads on instead of waiting for the socket.
  bool input_buffered() const noexcept { return begin_ != end_; }
  // Before a wait with no goroutine: the read buffers go (nothing is buffered).
  void release_input() noexcept;
  // Wakes the reader for good: the read deadline passes and stays passed, whatever
  // deadline is set later, until close_as_reader (serve()'s shutdown).
  void interrupt_reader();
  // The close handshake made by the reader itself (serve's goroutine, at shutdown or a
  // read deadline): sends code unless a close went out already, waits up to
  // close_timeout for the peer's answer, closes the stream. Returns what close() does.
  std::error_code close_as_reader(std::uint16_t code, std::string_view reason);

 private:
  // Reading (caller holds read_mu_).
  std::error_code read_locked(Message& out, const Context& ctx);
  // After this side's close frame: reads until the peer's (discarding messages), then
  // closes the stream. {} when the peer answered.
  std::error_code await_peer_close(const Context& ctx);
  std::error_code fill(const Context& ctx);
  char* input() noexcept { return input_.get(); }
  std::size_t input_capacity() const noexcept { return input_capacity_; }
  // Makes the input buffer `capacity` bytes, keeping what it holds (which fits).
  void resize_input(std::size_t capacity);
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
  // Destroyed last: the server connection the stream belongs to.
  const std::shared_ptr<net::Stream> kept_;
  std::unique_ptr<net::Stream> owned_;
  net::Stream* const stream_;
  const std::string subprotocol_;
  const std::size_t max_message_size_;
  const std::chrono::nanoseconds close_timeout_;
  const std::size_t compression_min_size_;
  const Context shutdown_;
  std::atomic<bool> served_{false};

  goro::Mutex read_mu_;
  // The input buffer: kSmallInput bytes (in the .cpp) when nothing is left over, the
  // last read drained the socket and came long after the one before (kBusyGapNs), so
  // that a WebSocket waiting for its next message holds no page of input (an idle one is
  // the common case); kReadBufferSize otherwise (a read filled the small one or left
  // part of a frame); none at all while serve() waits with no goroutine
  // (release_input). Made on the first read.
  std::unique_ptr<char[]> input_;
  std::size_t input_capacity_ = 0;
  std::size_t begin_ = 0, end_ = 0;  // unconsumed input: [begin_, end_) of input()
  bool last_read_full_ = false;
  bool input_busy_ = false;  // the last read came within kBusyGapNs of the one before
  std::int64_t last_input_ns_ = INT64_MIN / 2;  // when it came (CLOCK_MONOTONIC_COARSE)
  FrameDecoder decoder_;
  std::string message_;     // the data message being assembled
  // permessage-deflate's reading side, when agreed: the inflater and the payload of a
  // compressed message being assembled.
  struct Inflating {
    Inflating(int window_bits, bool no_context_takeover) : inflater(window_bits, no_context_takeover) {}
    Inflater inflater;
    std::string compressed;
  };
  std::unique_ptr<Inflating> inflating_;
  std::error_code read_error_;  // set once reading can never succeed again

  goro::Mutex message_mu_;
  // ... and its writing side: the deflater and its output.
  struct Deflating {
    Deflating(int level, int window_bits, bool no_context_takeover)
        : deflater(level, window_bits, no_context_takeover) {}
    Deflater deflater;
    std::string deflated;
  };
  std::unique_ptr<Deflating> deflating_;

  goro::Mutex frame_mu_;
  std::unique_ptr<std::string> masked_;  // a client's masked copy of a frame (made on its first)
  std::error_code write_error_;
  bool close_sent_ = false;

  mutable std::mutex state_mu_;
  std::uint16_t peer_code_ = 0;
  std::unique_ptr<std::string> peer_reason_;  // made when the peer's close frame has one
  bool stream_closed_ = false;
  // The read deadline the user set, and the end of a serving goroutine's hold while it
  // waits for a next message (no_deadline: none); the stream's deadline is the earlier.
  net::Deadline read_deadline_ = net::no_deadline;
  net::Deadline hold_until_ = net::no_deadline;
  bool reader_interrupted_ = false;  // interrupt_reader: the stream's deadline is past
};

}  // namespace goro::http::websocket::detail
