// HTTP/2 on the server (RFC 9113), on nghttp2: H2Conn, one connection, and H2Stream,
// one request on it. nghttp2 does the framing, HPACK, the stream state machine, the
// flow-control accounting and the RFC's checks of a request (pseudo-header fields,
// connection-specific fields, Content-Length against DATA); this code moves bytes
// between it, the socket and the handlers.
//
// Goroutines of one connection:
//   reader   the connection goroutine (the connection core chose HTTP/2 for it): reads
//            the socket and feeds nghttp2_session_mem_recv; nghttp2's callbacks create
//            streams, start their handlers, and queue request body bytes on them;
//   writer   takes what nghttp2_session_mem_send produces, under the lock, and writes
//            it without the lock; parks on wake_ while nghttp2 has nothing to send;
//   handlers one per stream: the exchange runner (core/exchange.hpp) runs the Handler
//            with a Request and a Response whose sink (H2Stream) queues the response
//            for the writer.
// mu_ (a goro::Mutex: it is held across nghttp2 calls, never across a socket write or
// read) guards the session and every field marked so, in H2Conn and in its H2Streams.
// Lock order: Server::Impl::mu before mu_ (shutdown calls begin_shutdown under the
// former); nothing here takes Server::Impl::mu while holding mu_.
//
// Flow control: nghttp2's automatic WINDOW_UPDATE is off. Request body bytes are
// acknowledged (nghttp2_session_consume) as the handler reads them, or at once when
// nobody will (the handler returned, the body is refused); so a stream holds at most its
// window (kStreamWindow) of unread body, and a connection at most kConnectionWindow.
// Response bytes wait in the stream's out_ (up to write_buffer_size, then the handler
// parks) until the peer's windows let nghttp2 pull them (a data provider that defers
// while out_ is empty).
//
// A stream is done when nghttp2 has closed it and its handler has returned (either may
// come first); the reader frees the rest once the writer and every handler are done.
//
// Allocations: a done stream goes back to its connection's spare list and the next
// HEADERS takes it (H2Stream::reuse), with its wake-up channels, the strings and vectors
// of its head, its Request and Response and the buffers of its bodies: a connection that
// serves call after call allocates nothing per stream once warm, where new/delete of the
// stream, two channels and a dozen growing strings used to cost a quarter of a unary
// gRPC call. Kept streams are bounded (kSpareStreams) and their buffers too
// (kKeptBuffer): a burst of large bodies does not stay held.
#pragma once

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <goro/http/server.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "core/conn.hpp"
#include "core/exchange.hpp"
#include "core/response.hpp"

namespace goro::http::detail {

namespace h2 {
// Serves self as HTTP/2 (early: bytes read already, the client preface on h2c) until the
// connection ends.
void serve(ConnRef& self, std::string_view early);
}  // namespace h2

class H2Conn;

// One request/response exchange; created when its HEADERS begin.
class H2Stream final : public Exchange, public BodyReader, public ResponseSink {
 public:
  explicit H2Stream(H2Conn& conn) : conn_(conn) {}

  // Readies the stream for a new request on stream id: the state of the last one is
  // cleared, its memory kept (the buffers up to kKeptBuffer). Caller holds mu_.
  void reuse(std::int32_t id);

  // nghttp2 callbacks, reader goroutine, caller holds mu_.
  void add_header(std::string_view name, std::string_view value);
  void add_body(const std::uint8_t* data, std::size_t len);
  void end_of_body();
  // The head is complete: answers on the server's own behalf (431, 413, 400) or starts
  // the handler's goroutine.
  void start();
  // nghttp2 closed the stream (answered, reset, or the connection ended). Caller holds mu_.
  void closed(std::uint32_t error_code);
  // The data provider: copies up to len queued response bytes. Caller holds mu_.
  ssize_t pull(std::uint8_t* buf, std::size_t len, std::uint32_t* flags);
  // A frame of this stream went out carrying END_STREAM. Caller holds mu_.
  void response_sent();

  bool freeable() const { return closed_ && !handler_running_; }  // caller holds mu_
  // Closed before its response went out whole: reset by either side, whatever the error
  // code (a client may reset with NO_ERROR), or the connection ended. Caller holds mu_.
  bool cut_off() const {
    return closed_ && (close_code_ != NGHTTP2_NO_ERROR || !response_complete_);
  }
  std::int32_t id() const { return id_; }
  // Where the stream sits in H2Conn::streams_ (caller holds mu_).
  std::size_t slot() const { return slot_; }
  void set_slot(std::size_t slot) { slot_ = slot; }
  // Wakes both the goroutine reading the body and the one writing the response: they
  // may be two (a bidirectional gRPC call) and each rechecks what it waits for. A side
  // with nobody parked gets no token: wait() counts itself in before it lets mu_ go, so a
  // change made under mu_ after that finds it counted (no wake-up is lost), and the
  // common case, nobody waiting, costs no channel operation. Caller holds mu_.
  void wake() {
    if (read_waiters_ > 0) (void)read_wake_.try_send(0);
    if (write_waiters_ > 0) (void)write_wake_.try_send(0);
  }

 private:
  void run();
  // The server's own reply instead of the handler's (core/exchange.hpp), from the reader
  // or the stream's goroutine: caller holds mu_.
  void respond_now(int status, std::string_view message);
  // Queues a response head (and body) on the session. Caller holds mu_.
  std::error_code submit(int status, const Headers& headers, std::int64_t content_length,
                         std::string_view body, bool end);
  // Parks on wake (read_wake_ or write_wake_, counted in waiters: read_waiters_ or
  // write_waiters_) until woken or the deadline; false at the deadline. Caller holds lock.
  bool wait(std::unique_lock<goro::Mutex>& lock, goro::Chan<int>& wake, int& waiters,
            std::chrono::steady_clock::time_point deadline);
  // Acknowledges n body bytes nobody will read or that were read. Caller holds mu_.
  void consume(std::size_t n);
  void reset(std::uint32_t error_code);  // caller holds mu_

  // Exchange (RequestHost)
  std::string_view protocol() const noexcept override { return "HTTP/2"; }
  const Server::Impl& server() const noexcept override;
  void refuse(int status, std::string_view message) override;
  void end_request_context() override;
  Context request_context() override;
  bool client_gone() override;
  const net::TlsConnectionState* tls_state() const noexcept override;
  void count_request() override {
    stats_shard().requests.fetch_add(1, std::memory_order_relaxed);
  }
  // BodyReader
  Result<std::size_t> read(void* buf, std::size_t len) override;
  // ResponseSink
  std::error_code send_head(int status, const Headers& fields, std::int64_t length,
                            std::string_view body, bool end) override;
  std::error_code send_body(std::string_view data) override;
  std::error_code end_body(bool complete, const Headers& trailers) override;
  std::error_code send_informational(int status, const Headers& fields) override;
  Result<TakenConnection> take_over() override;
  std::error_code set_deadline(net::IoMode mode, net::Deadline d) override;
  // Parks while more than the buffer's worth of response waits for the client. Caller
  // holds lock.
  std::error_code wait_for_room(std::unique_lock<goro::Mutex>& lock);

  H2Conn& conn_;
  std::int32_t id_ = 0;
  std::size_t slot_ = 0;  // guarded by mu_
  // Tokens: something this stream's body reader, or its response writer, waits for
  // changed. One each, so that a reader and a writer parked at once (a handler reading
  // in one goroutine and writing in another) cannot take each other's wake-up.
  goro::Chan<int> read_wake_{1};
  goro::Chan<int> write_wake_{1};
  int read_waiters_ = 0;   // guarded by mu_: goroutines in wait() on read_wake_
  int write_waiters_ = 0;  // guarded by mu_: goroutines in wait() on write_wake_

  // The head as received (reader only, until start()).
  std::string method_, path_, authority_;
  std::string field_bytes_;               // names and values of the regular fields, back to back
  std::vector<std::size_t> field_sizes_;  // name size, value size, name size, ...
  std::size_t head_bytes_ = 0;            // as SETTINGS_MAX_HEADER_LIST_SIZE counts them
  bool head_too_large_ = false;
  std::int64_t declared_length_ = -1;
  // The request the handler sees; field_bytes_ stays put while it runs.
  std::vector<HeaderField> fields_;
  Request request_;
  Response writer_;
  OwnReply reply_;
  // Guarded by mu_ (a handler may move them through ResponseController).
  std::chrono::steady_clock::time_point read_deadline_{};   // zero: none
  std::chrono::steady_clock::time_point write_deadline_{};  // zero: none
  bool read_deadline_handlers_ = false;  // set by the handler: its passing resets nothing

  // Guarded by mu_.
  std::string body_;          // received, not yet read
  std::size_t body_pos_ = 0;  // read up to here
  std::uint64_t body_received_ = 0;
  bool body_complete_ = false;  // END_STREAM received
  bool body_too_large_ = false;
  bool handler_running_ = false;
  bool handler_done_ = false;
  bool response_submitted_ = false;
  bool closed_ = false;  // nghttp2 closed it: nothing more goes out
  std::uint32_t close_code_ = 0;
  // A frame of this stream with END_STREAM went out.
  bool response_complete_ = false;
  std::string out_;  // response body bytes not yet taken by nghttp2
  std::size_t out_pos_ = 0;
  bool out_end_ = false;  // no more body after out_
  // Trailer fields to send after the body: lower-case names and values back to back,
  // their sizes in trailer_sizes_ (name, value, name, ...); nghttp2 copies them.
  std::string trailer_bytes_;
  std::vector<std::size_t> trailer_sizes_;
  CancelFunc cancel_;  // the request context's, while it lives
};

// One HTTP/2 connection; lives in the connection goroutine (h2::serve).
class H2Conn final : public Engine {
 public:
  // early: bytes already read from the connection's stream (a preface).
  H2Conn(Connection& conn, std::string early);
  ~H2Conn();
  H2Conn(const H2Conn&) = delete;
  H2Conn& operator=(const H2Conn&) = delete;

  // Serves the connection until it ends (the bytes count in server_stats() as they go).
  void serve();
  // Graceful shutdown: GOAWAY naming the last stream taken, then the connection ends
  // once its streams are done. Any goroutine; never blocks on the socket.
  void begin_shutdown() override;

 private:
  friend class H2Stream;
  friend struct H2Callbacks;

  void writer();
  void closed_early(std::int32_t id);  // caller holds mu_
  void wake_writer() { (void)writer_wake_.try_send(0); }
  // Retires s (to spare_, or frees it) if nghttp2 and its handler are both done with
  // it. Caller holds mu_.
  void maybe_free(H2Stream* s);
  // The read deadline for the connection's state. Caller holds mu_.
  net::Deadline read_deadline() const;

  Server::Impl* server_;
  net::Stream& stream_;
  const std::string_view remote_;
  const net::TlsConnectionState* const tls_;  // nullptr on h2c
  std::string early_;
  // When the bytes of the last read arrived (net::Stream::readable_at), or the epoch when
  // the netpoller had not stamped them: the received_at of the requests they start.
  // Written by the reader before it feeds nghttp2, read by the streams it starts then.
  std::chrono::steady_clock::time_point read_arrived_{};
  goro::WaitGroup goroutines_;  // the writer and every handler
  goro::Chan<int> writer_wake_{1};
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  goro::Mutex mu_;
  nghttp2_session* session_ = nullptr;                                   // guarded by mu_
  // The live streams, in no order (each knows its slot); done ones wait in spare_ for
  // the next HEADERS (h2/conn.hpp's top says why).
  std::vector<std::unique_ptr<H2Stream>> streams_;  // guarded by mu_
  std::vector<std::unique_ptr<H2Stream>> spare_;    // guarded by mu_
  std::size_t handlers_running_ = 0;                                     // guarded by mu_
  std::int32_t max_client_stream_ = 0;                                   // guarded by mu_
  std::deque<std::int32_t> closed_early_;                                // guarded by mu_
  bool preface_seen_ = false;  // guarded by mu_: the client's SETTINGS came
  bool dead_ = false;          // guarded by mu_: the socket failed or the reader left
  bool ending_ = false;        // guarded by mu_: all sent; lingering for the peer's close
  // guarded by mu_: a graceful GOAWAY is decided (shutdown or idle). The writer submits
  // it (goaway_queued_) and serializes it in one hold of mu_, so that nghttp2 counts it
  // as sent, and opens no stream above the last one it names, before the reader feeds
  // more input; submitted anywhere else, streams the reader opened meanwhile would be
  // served above it, and a later GOAWAY (an error) would name a higher stream (6.8).
  bool goaway_sent_ = false;
  bool goaway_queued_ = false;     // guarded by mu_: submitted, not yet serialized
  std::int32_t goaway_last_ = -1;  // guarded by mu_: the last stream it names
  std::chrono::steady_clock::time_point last_active_ = started_;  // guarded by mu_
  // A header block is open since head_started_ (else zero), on stream head_stream_.
  std::chrono::steady_clock::time_point head_started_{};  // guarded by mu_
  std::int32_t head_stream_ = 0;                          // guarded by mu_
  std::chrono::steady_clock::time_point linger_until_{};  // guarded by mu_
};

}  // namespace goro::http::detail
