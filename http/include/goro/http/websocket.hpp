// goro::http::websocket — WebSockets (RFC 6455): a handler upgrades its request with
// accept(), a client connects with dial(); messages, ping/pong, the close handshake and
// permessage-deflate (RFC 7692).
//
//   r.handle("GET /ws/echo", [](http::Request& req, http::ResponseWriter& w) {
//     auto ws = http::websocket::accept(req, w);
//     if (!ws) return;                        // the client was answered 400, 403, 426...
//     while (auto m = ws->read()) {           // until the peer closes, or an error
//       if (ws->write(m->type, m->data)) break;
//     }
//   });                                       // returning closes the connection
//
// A WebSocket is written as a loop in its own goroutine, like any goro connection: every
// read and write parks the goroutine, never the thread. Or it is served message by
// message, holding no goroutine between messages (ten thousand idle WebSockets cost a
// sixth of the memory), with serve():
//
//     auto ws = http::websocket::accept(req, w);
//     if (!ws) return;
//     http::websocket::serve(std::make_shared<http::websocket::WebSocket>(std::move(*ws)),
//                            [](http::websocket::WebSocket& ws, http::websocket::Message& m) {
//                              (void)ws.write(m.type, m.data);
//                            });                 // returns at once; so does the handler
//
// Concurrency: one goroutine may read while others write. read() is for one goroutine
// at a time (two readers are serialised). write(), writer(), ping() and close() may be
// called from any goroutine at once: messages never interleave (a message holds the
// connection's message lock until its last frame), while pongs, pings and the close
// frame only take the frame lock, so they go out between the frames of a long message.
//
// Errors are values (docs/errors.md). A read reports the peer's close as an error in
// close_category() whose value is the code the peer sent (1000 normal, 1001 going away,
// ...; 1005 when its close frame had no code, 1006 when the connection ended without
// one); close_code(ec) extracts it. A peer that breaks the protocol is answered with a
// close frame (1002, 1007 or 1009) and the read fails with the matching errc below.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <goro/http/client.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/request.hpp>
#include <goro/http/response.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::http::websocket {

// Errors of this side, in the "goro.websocket" category.
enum class errc {
  // The close handshake is over (or this side closed the connection): no more messages.
  closed = 1,
  // The peer broke RFC 6455 (a bad frame, a masking mistake, a bad close code);
  // answered with close 1002.
  protocol_error,
  // A text message or a close reason that is not UTF-8; answered with close 1007.
  invalid_utf8,
  // A message longer than max_message_size (after decompression); answered with 1009.
  message_too_big,
  // accept: the request is no valid WebSocket handshake (the client has been answered);
  // dial: the server's answer is not a valid 101 (the status is in `response`).
  bad_handshake,
  // accept: the connection cannot be handed to the handler (its response has started,
  // or it is served through a middleware that buffers it, such as http::timeout); the
  // client has been answered 500.
  cannot_upgrade,
};
const std::error_category& websocket_category() noexcept;
std::error_code make_error_code(errc e) noexcept;

// Close codes (RFC 6455 7.4.1). Applications use 4000-4999 for their own.
namespace close_code {
inline constexpr std::uint16_t normal = 1000;
inline constexpr std::uint16_t going_away = 1001;
inline constexpr std::uint16_t protocol_error = 1002;
inline constexpr std::uint16_t unsupported_data = 1003;
inline constexpr std::uint16_t no_status = 1005;   // received only: a close frame without a code
inline constexpr std::uint16_t abnormal = 1006;    // received only: no close frame at all
inline constexpr std::uint16_t invalid_payload = 1007;
inline constexpr std::uint16_t policy_violation = 1008;
inline constexpr std::uint16_t message_too_big = 1009;
inline constexpr std::uint16_t mandatory_extension = 1010;
inline constexpr std::uint16_t internal_error = 1011;
}  // namespace close_code

// The category of the peer's close codes: a read that met the peer's close returns
// std::error_code(code, close_category()); message() names the code.
const std::error_category& close_category() noexcept;
// The close code in ec, or 0 when ec is not a peer's close.
std::uint16_t close_code_of(std::error_code ec) noexcept;

enum class MessageType : std::uint8_t { text = 1, binary = 2 };

// Whether text is valid UTF-8 (RFC 3629), as a text message must be.
bool valid_utf8(std::string_view text) noexcept;

struct Message {
  MessageType type = MessageType::text;
  std::string data{};  // for text: valid UTF-8
};

// permessage-deflate (RFC 7692). Off unless enabled; when both sides want it, messages
// of at least min_size bytes are compressed. Parameters are from this side's point of
// view ("own": what this side compresses; "peer": what the peer compresses), so the
// same settings mean the same on a server and a client.
struct Compression {
  bool enabled = false;
  // zlib level, 1 (fast) to 9; 1 gets most of what text gives, at a fraction of the CPU.
  int level = 1;
  // Messages shorter than this are sent uncompressed (RSV1 off), as compressing them
  // costs more than it saves.
  std::size_t min_size = 128;
  // This side resets its compressor after every message (its *_no_context_takeover):
  // worse compression of similar messages, but no history to keep between them.
  bool no_context_takeover = false;
  // The LZ77 window this side compresses with, 9 to 15: 2^bits bytes. zlib's
  // compressor takes about 2^(bits+3) bytes with it, made on the first compressed message.
  int max_window_bits = 15;
  // Asks the peer to reset its compressor after every message.
  bool peer_no_context_takeover = false;
  // Asks the peer to compress with at most this window (9 to 15); this side's
  // decompressor then takes 2^bits bytes instead of 32 KiB. A server can ask it only of
  // a client that offered the parameter.
  int peer_max_window_bits = 15;
};

// How accept() treats a handshake.
struct AcceptOptions {
  // Subprotocols this server speaks, most preferred first: the first one the client also
  // offers is chosen (WebSocket::subprotocol()); none in common: none is chosen and the
  // connection goes on without one.
  std::vector<std::string> subprotocols{};
  // Whether a request from a browser page of another origin may connect. Empty: only
  // when the Origin header is absent (not a browser) or its host[:port] equals the Host
  // header, which stops other sites' pages from using a visitor's cookies here
  // (cross-site WebSocket hijacking). Refused: 403.
  std::function<bool(Request&)> check_origin{};
  // Largest message accepted, in bytes after decompression; past it the connection is
  // closed with 1009 (errc::message_too_big).
  std::size_t max_message_size = 1 << 20;
  Compression compression{};
  // How long close() (and a close the peer starts) waits for the other side's close
  // frame before closing the connection anyway.
  std::chrono::nanoseconds close_timeout = std::chrono::seconds(5);
  // Time to write the 101 response.
  std::chrono::nanoseconds handshake_timeout = std::chrono::seconds(10);
};

// How dial() connects.
struct DialOptions {
  // Subprotocols to offer, most preferred first (Sec-WebSocket-Protocol).
  std::vector<std::string> subprotocols{};
  // Extra request header fields (Origin, Authorization, Cookie...). The handshake's own
  // fields (Host, Upgrade, Connection, Sec-WebSocket-*) cannot be replaced.
  Headers headers{};
  std::size_t max_message_size = 1 << 20;
  Compression compression{};
  std::chrono::nanoseconds close_timeout = std::chrono::seconds(5);
  // Time for the whole handshake: DNS, TCP, TLS, the upgrade request and its answer.
  std::chrono::nanoseconds handshake_timeout = std::chrono::seconds(10);
  // wss: PEM file of trusted CAs (empty: the system's store), and whether to verify the
  // server's certificate and name (off only for tests).
  std::string ca_file{};
  bool verify = true;
  // The handshake gives up when this context is cancelled (then dial fails with its
  // err()). The connection, once made, does not watch it.
  Context context{};
};

namespace detail {
class Connection;  // http/src/websocket/websocket_connection.hpp
class Session;     // http/src/websocket/websocket_serve.cpp
}  // namespace detail

// Streams one message as several frames (fragmentation): each write() sends one frame,
// close() the last one. While it exists, other goroutines' messages wait; control
// frames do not. Destroying it unfinished finishes the message (errors lost).
class MessageWriter {
 public:
  MessageWriter(MessageWriter&& other) noexcept;
  MessageWriter& operator=(MessageWriter&&) = delete;
  ~MessageWriter();

  // Sends data as the next frame of the message (nothing for empty data). Blocks until
  // written.
  std::error_code write(std::string_view data);
  // Sends the final frame; later calls do nothing.
  std::error_code close();

 private:
  friend class WebSocket;
  MessageWriter(detail::Connection* conn, MessageType type, const Context& ctx,
                std::error_code error);

  detail::Connection* conn_;
  MessageType type_;
  Context ctx_;
  std::error_code error_;
  bool started_ = false;   // a frame has gone out
  bool finished_ = false;  // the final frame has gone out, or the writer gave up
  bool compressed_ = false;
};

class WebSocket {
 public:
  WebSocket() noexcept;
  explicit WebSocket(std::unique_ptr<detail::Connection> conn) noexcept;
  WebSocket(WebSocket&&) noexcept;
  WebSocket& operator=(WebSocket&&) noexcept;
  // Closes the connection at once if it is still open, without a close handshake (the
  // peer sees 1006): call close() first for a clean end.
  ~WebSocket();

  // Reads the next message, answering pings and taking part in the close handshake on
  // the way. Blocks (parks) until a whole message has arrived. Fails with:
  //  - the peer's close code (close_category()): the peer closed; this side has answered
  //    and closed the connection;
  //  - errc::protocol_error, invalid_utf8, message_too_big: this side closed it (1002,
  //    1007, 1009); errc::closed: it was closed already;
  //  - net::errc::timeout (the read deadline) or ctx.err() (ctx cancelled): nothing is
  //    lost, a later read() goes on where this one stopped;
  //  - another net error: the connection broke.
  // Every failure but a timeout or the context's repeats on later reads.
  Result<Message> read(const Context& ctx = {});
  // The same into message, whose buffer is reused.
  std::error_code read(Message& message, const Context& ctx = {});

  // Sends one message in one frame (compressed when permessage-deflate was agreed and
  // it is at least Compression::min_size long). Text must be UTF-8: the peer closes the
  // connection on anything else. Blocks until written (the write deadline, ctx). A write
  // that fails part way leaves the connection unusable for writing: later writes fail
  // with the same error. Fails with errc::closed once a close frame has gone out.
  std::error_code write(MessageType type, std::string_view data, const Context& ctx = {});
  std::error_code write_text(std::string_view text, const Context& ctx = {}) {
    return write(MessageType::text, text, ctx);
  }
  std::error_code write_binary(std::string_view data, const Context& ctx = {}) {
    return write(MessageType::binary, data, ctx);
  }
  // Starts a message sent in pieces (see MessageWriter). Waits (parks) for the message
  // lock; a failure to get it (ctx) is returned by the writer's calls.
  MessageWriter writer(MessageType type, const Context& ctx = {});

  // Sends a ping (payload at most 125 bytes). The pong is not waited for; a peer that
  // stops answering shows as a read that times out.
  std::error_code ping(std::string_view payload = {}, const Context& ctx = {});

  // The close handshake: sends a close frame with code (1000-1003, 1007-1014, 3000-4999,
  // or close_code::no_status to send none) and reason (at most 123 bytes of UTF-8), then
  // waits up to close_timeout for the peer's close frame, discarding the messages that
  // arrive meanwhile unless another goroutine is reading (that read returns the peer's
  // close), and closes the connection. Returns {} when the peer answered;
  // std::errc::invalid_argument for a code or reason that may not be sent; the write
  // error; net::errc::timeout when the peer did not answer in time; errc::closed when
  // the connection was closed already.
  std::error_code close(std::uint16_t code = close_code::normal, std::string_view reason = {});

  // Deadlines for reads and writes (net::Stream's): a passed deadline fails the calls
  // of that direction with net::errc::timeout until another is set. Under serve(), a
  // passed read deadline ends the WebSocket (an idle limit: set it again in each
  // on_message to keep a live peer).
  std::error_code set_read_deadline(net::Deadline d);
  std::error_code set_write_deadline(net::Deadline d);

  // The subprotocol agreed ("" if none), and whether permessage-deflate was.
  const std::string& subprotocol() const noexcept;
  bool compression() const noexcept;
  // The peer's close code (0 until its close frame arrived) and its reason.
  std::uint16_t peer_close_code() const noexcept;
  std::string peer_close_reason() const;
  // The peer's address ("ip:port").
  std::string remote_addr() const;

 private:
  friend class detail::Session;
  std::unique_ptr<detail::Connection> conn_;
};

// Upgrades the request to a WebSocket: checks the handshake (RFC 6455 4.2.1), writes the
// 101 response and takes the connection over. Header fields the handler (or middleware)
// set on w (a cookie, a request id) go out with the 101. On a bad handshake it answers
// the client and fails with errc::bad_handshake, the answer naming the problem:
//   405  not GET (with Allow: GET)
//   426  no "Upgrade: websocket" (a plain HTTP request), or Sec-WebSocket-Version not 13
//        (with Sec-WebSocket-Version: 13)
//   400  Connection without "upgrade", HTTP/1.0, a missing or malformed
//        Sec-WebSocket-Key, a malformed Sec-WebSocket-Extensions
//   403  a cross-origin request that check_origin refuses
// The WebSocket owns the handler's connection: it may outlive the handler (moved to
// another goroutine, kept in a room, given to serve()), and the connection closes when
// it is destroyed. Under Server::serve_conn, whose caller waits for the connection, the
// connection closes when the handler returns instead: the handler must not return while
// the WebSocket is in use. The server counts it as an active connection, so a graceful
// shutdown waits for it until its deadline: serve() says going away by itself; a
// handler that reads on its own watches http::shutdown_context(req) and closes with
// close_code::going_away.
Result<WebSocket> accept(Request& req, ResponseWriter& w, const AcceptOptions& options = {});

// What serve() calls: on_message for each message, on_end once at the end, with why the
// WebSocket ended: what read() would have returned (the peer's close code in
// close_category(), errc::protocol_error..., net::errc::timeout for a read deadline, a
// net error), or, after a close this side made, the peer's answering code.
using MessageHandler = std::function<void(WebSocket& ws, Message& message)>;
using EndHandler = std::function<void(WebSocket& ws, std::error_code why)>;

// Serves a WebSocket message by message, without a goroutine of its own: while no
// message is coming the connection waits the way an idle keep-alive HTTP connection
// does, with no goroutine, no stack and no input buffer (about 2 KiB an idle WebSocket
// instead of 12, docs/http.md). A message's first bytes start a goroutine that reads it
// and calls on_message; after it returns the goroutine waits a moment (30 ms) for the
// next message and then goes. Messages are handled one at a time, in order; on_message
// may write, and may keep ws (through the shared_ptr) for other goroutines to write to.
// Pings are answered and the close handshake is made as read() does. The connection
// ends when the peer closes, on a protocol error, when a read deadline passes, when
// another goroutine calls close() (which then sends its close frame and returns; the
// peer's answer arrives here), and when the server shuts down (close_code::going_away);
// then on_end runs, once. Nobody else may read() meanwhile (it fails with
// std::errc::operation_in_progress). An exception from on_message ends the WebSocket
// with close_code::internal_error (1011), reported on the server's error_log.
//
// Returns at once, and the handler that accepted ws returns too. Where the stream
// cannot wait without a goroutine (TLS, whose decrypted bytes may wait in user space),
// one goroutine reads instead, holding its stack; under Server::serve_conn serve()
// reads on the calling goroutine and returns when the WebSocket has ended. Fails, with
// nothing called, when ws holds no connection (errc::closed) or is served already
// (std::errc::operation_in_progress).
std::error_code serve(std::shared_ptr<WebSocket> ws, MessageHandler on_message,
                      EndHandler on_end = {});

// Connects to a ws:// or wss:// URL (http:// and https:// are taken as the same) and
// performs the handshake. Blocks (parks) until the connection is open or has failed.
// Fails with errc::bad_url, a net or TLS error, a timeout (handshake_timeout), the
// context's error, or errc::bad_handshake when the server did not answer 101 with a
// valid handshake; then `response` (when given) holds the server's answer (its body
// read up to 64 KiB).
Result<WebSocket> dial(std::string_view url, const DialOptions& options = {},
                       ClientResponse* response = nullptr);

}  // namespace goro::http::websocket

template <>
struct std::is_error_code_enum<goro::http::websocket::errc> : std::true_type {};
