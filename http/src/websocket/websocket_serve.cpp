// serve(): a WebSocket served message by message, with no goroutine while it waits.
//
// A Session is the served WebSocket's state: the handlers, the reference that keeps it
// alive, and its watch on the server's shutdown. It is in one of three places at a time:
//   reading   a goroutine reads messages and calls on_message (run);
//   armed     it waits with no goroutine: the netpoller holds a readable wake-up
//             (net::Stream::start_on) whose argument is the session, and armed_ is the
//             reference that wake-up holds; the wake-up starts a goroutine that reads;
//   ended     on_end has run; the last reference frees the session, and with it (unless
//             the user keeps ws) the WebSocket and the server's connection.
// After a message the reading goroutine waits kHold for the next one's first byte, then
// arms and returns, so that a busy WebSocket does not pay for a wake-up and a goroutine
// per message, and an idle one holds no stack.
//
// Shutdown: a server's session is its connection's engine (http/src/core/conn.hpp), so
// a shutdown that finds the connection busy tells it; one served on its handler's
// goroutine (Server::serve_conn) watches the server's shutdown context instead. Either
// way (under a lock: nothing may block) it sets stopping_ and starts a goroutine that
// interrupts the reader
// (Connection::interrupt_reader: the read deadline passes, and stays passed): an armed
// wake-up starts its goroutine, one armed later starts at once, and a goroutine waiting
// in a read returns. Whichever goroutine reads next finds stopping_ and says going
// away.
#include <goro/http/websocket.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <goro/net/errors.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>

#include "core/conn.hpp"
#include "websocket_connection.hpp"

namespace goro::http::websocket {
namespace detail {

namespace {
// How long a reading goroutine waits for the next message before it goes.
constexpr std::chrono::milliseconds kHold{30};
}  // namespace

class Session final : public std::enable_shared_from_this<Session>, public http::detail::Engine {
 public:
  Session(std::shared_ptr<WebSocket> ws, MessageHandler on_message, EndHandler on_end)
      : ws_(std::move(ws)),
        conn_(*ws_->conn_),
        on_message_(std::move(on_message)),
        on_end_(std::move(on_end)) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  static std::error_code serve(std::shared_ptr<WebSocket> ws, MessageHandler on_message,
                               EndHandler on_end);

 private:
  // Reads and dispatches until the WebSocket ends or the session arms. may_park: the
  // connection may go on after this goroutine (not under Server::serve_conn).
  static void run(std::shared_ptr<Session> self, bool may_park);
  // Arms the readable wake-up with self's reference: true when armed (self is then
  // empty); false, self kept, when the stream cannot wait that way or bytes may be
  // waiting: then the caller reads on.
  bool arm(std::shared_ptr<Session>& self);
  static void woken(void* arg);
  // A shutdown began (see the file comment): as the connection's engine, under the
  // server's lock, or as a watcher of the shutdown context.
  void begin_shutdown() override;
  static void shutdown_began(goro::detail::CancelHook* hook);
  void stop();
  // on_message threw: the peer gets 1011, the server's error log the reason.
  void failed(const char* what);
  // The close handshake made here, then on_end with the peer's answering code (or why
  // there was none).
  void close_and_end(std::uint16_t code, std::string_view reason);
  void end(std::error_code why);

  const std::shared_ptr<WebSocket> ws_;
  Connection& conn_;
  const MessageHandler on_message_;
  const EndHandler on_end_;
  std::shared_ptr<Session> armed_;  // the armed wake-up's reference
  std::atomic<bool> stopping_{false};
  // The server's connection this session is the engine of; nullptr for a client's
  // WebSocket or one served on its handler's goroutine.
  http::detail::Connection* server_conn_ = nullptr;
};

std::error_code Session::serve(std::shared_ptr<WebSocket> ws, MessageHandler on_message,
                               EndHandler on_end) {
  if (!ws || !ws->conn_) return errc::closed;
  Connection& conn = *ws->conn_;
  if (!conn.begin_serving()) return std::make_error_code(std::errc::operation_in_progress);
  auto self = std::make_shared<Session>(std::move(ws), std::move(on_message), std::move(on_end));
  Session& s = *self;
  if (!conn.outlives_handler()) {
    // The connection ends with the handler: serve on its goroutine. The session lives
    // until the watch, whose hook points at it, is gone.
    const std::shared_ptr<Session> keep = self;
    goro::detail::ContextWatch watch(conn.shutdown_context(), &Session::shutdown_began, &s);
    if (!watch.ok()) s.stopping_.store(true, std::memory_order_seq_cst);  // begun already
    run(std::move(self), false);
    return {};
  }
  // set_engine tells a shutdown already under way at once.
  s.server_conn_ = http::detail::taken_connection(conn.kept());
  if (s.server_conn_ != nullptr) s.server_conn_->set_engine(&s);
  if (!conn.input_buffered() && s.arm(self)) return {};
  goro::go(GoOptions{.name = "websocket"}, [self = std::move(self)]() mutable {
    run(std::move(self), true);
  });
  return {};
}

void Session::run(std::shared_ptr<Session> self, bool may_park) {
  Session& s = *self;
  Connection& conn = s.conn_;
  Message m;
  // The first read holds too: a wake-up may find no message (the readiness it started
  // on was already read, with the handshake), and then the session arms again. A failed
  // arm reads without a hold (the stream cannot wait without a goroutine, or bytes are
  // there), so a TLS WebSocket sets no timer while it waits.
  bool hold = true;
  for (;;) {
    if (s.stopping_.load(std::memory_order_seq_cst)) {
      s.stop();
      return;
    }
    bool idle = false;
    std::error_code ec = conn.serve_read(m, hold && may_park ? kHold : std::chrono::nanoseconds(0),
                                         &idle);
    if (idle) {
      hold = false;
      if (!s.stopping_.load(std::memory_order_seq_cst) && s.arm(self)) return;
      continue;
    }
    if (ec && net::is_timeout(ec) && s.stopping_.load(std::memory_order_seq_cst)) continue;
    if (ec) {
      if (net::is_timeout(ec)) {
        // A read deadline: the user's idle limit, or close()'s wait for the answer.
        (void)conn.close_as_reader(close_code::going_away, "read timeout");
      }
      s.end(ec);
      return;
    }
    if (s.on_message_) {
      try {
        s.on_message_(*s.ws_, m);
      } catch (const std::exception& e) {
        s.failed(e.what());
        return;
      } catch (...) {
        s.failed("unknown exception");
        return;
      }
    }
    hold = true;
  }
}

bool Session::arm(std::shared_ptr<Session>& self) {
  conn_.release_input();
  // Keeps the session alive through this call: the wake-up may start, and its goroutine
  // end the session, before start_on returns.
  std::shared_ptr<Session> keep = self;
  armed_ = std::move(self);
  if (!conn_.stream().start_on(net::Wake::readable, {&Session::woken, this, 0, "websocket"})) {
    self = std::move(armed_);
    return false;
  }
  // The goroutine about to end leaves its stack in the runtime's cache: many WebSockets
  // going idle together give theirs back (rate-limited, as for parking connections).
  goro::return_freed_memory_soon();
  return true;
}

void Session::woken(void* arg) {
  auto* s = static_cast<Session*>(arg);
  run(std::move(s->armed_), true);
}

void Session::begin_shutdown() {
  stopping_.store(true, std::memory_order_seq_cst);
  // Under a lock: start a goroutine, block nothing. The session is alive (a reference
  // holds it while it is the engine or watches), but may end as soon as this returns.
  if (std::shared_ptr<Session> self = weak_from_this().lock()) {
    goro::go(GoOptions{.name = "websocket shutdown"},
             [self = std::move(self)] { self->conn_.interrupt_reader(); });
  }
}

void Session::shutdown_began(goro::detail::CancelHook* hook) {
  static_cast<Session*>(hook->arg)->begin_shutdown();
}

void Session::stop() { close_and_end(close_code::going_away, "server shutting down"); }

void Session::close_and_end(std::uint16_t code, std::string_view reason) {
  std::error_code ec = conn_.close_as_reader(code, reason);
  if (!ec) ec = std::error_code(conn_.peer_close_code(), close_category());
  end(ec);
}

void Session::failed(const char* what) {
  std::string message = "websocket on_message from ";
  message.append(conn_.stream().remote_addr().to_string());
  message.append(" threw: ");
  message.append(what);
  if (server_conn_ != nullptr) {
    server_conn_->server().log_error(message);
  } else {
    std::fprintf(stderr, "goro/http: %s\n", message.c_str());
  }
  close_and_end(close_code::internal_error, "internal error");
}

void Session::end(std::error_code why) {
  // After this no shutdown calls begin_shutdown (set_engine takes the server's lock).
  if (server_conn_ != nullptr) server_conn_->set_engine(nullptr);
  if (!on_end_) return;
  try {
    on_end_(*ws_, why);
  } catch (const std::exception& e) {
    if (server_conn_ != nullptr)
      server_conn_->server().log_error(std::string("websocket on_end threw: ") + e.what());
  } catch (...) {
    if (server_conn_ != nullptr) server_conn_->server().log_error("websocket on_end threw");
  }
}

}  // namespace detail

std::error_code serve(std::shared_ptr<WebSocket> ws, MessageHandler on_message, EndHandler on_end) {
  return detail::Session::serve(std::move(ws), std::move(on_message), std::move(on_end));
}

}  // namespace goro::http::websocket
