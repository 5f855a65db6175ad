// The HTTP/2 side of goro::http::Client (RFC 9113), on nghttp2's client session:
// H2ClientConn, one connection to an origin, and H2ClientStream, one request on it (the
// ClientStream of the public header). Client::Impl (client.cpp) keeps the connections of
// each origin and picks one with a free stream slot.
//
// Goroutines of one connection, as on the server side (h2/conn.hpp):
//   reader   reads the socket and feeds nghttp2_session_mem_recv; nghttp2's callbacks
//            hand response heads, body bytes and trailers to the streams and wake them;
//            it also keeps the connection's timers through its read deadline: PINGs
//            (ping_interval, ping_timeout) and the idle timeout;
//   writer   takes what nghttp2_session_mem_send produces, under the lock, up to
//            kWriteBatch bytes, and writes it without the lock: the HEADERS and DATA of
//            many calls go out in one write; parks on writer_wake_ while nothing is due
//            (a woken writer usually runs once the caller that queued a unary call's
//            HEADERS and DATA has parked for the answer, so both leave in one write:
//            164 writes for 80 such calls at 1, 2 and 4 Ps);
//   callers  the goroutines using the streams: they submit requests, queue body bytes
//            and read what the reader left; no goroutine exists per stream.
// mu_ (a goro::Mutex held across nghttp2 calls, never across a socket read or write)
// guards the session, the connection's state and every stream field marked so.
//
// A stream parks its writing caller on write_wake_ and its reading caller on read_wake_
// (separate tokens, so a bidirectional call's two goroutines never take each other's
// wake-up); a park also ends at the call's deadline or when its context is cancelled,
// and the stream is then reset (RST_STREAM CANCEL).
//
// Flow control: automatic WINDOW_UPDATE is off; response bytes are acknowledged
// (nghttp2_session_consume) as the caller reads them, so the server runs at most a
// stream window ahead of a slow reader. Request bytes wait in the stream's out_ (up to
// kSendBuffer, then write parks) until the server's windows let the data provider take
// them.
//
// Lifetime: streams and the two goroutines hold the connection by shared_ptr; a stream
// detaches itself from the session when destroyed (resetting it if it has not ended).
// The connection ends when the reader leaves (socket error or EOF, a PING unanswered,
// idle too long, GOAWAY with no stream left, close()); every stream still open then
// fails with errc::connection_lost.
#pragma once

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <goro/http/client.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>

namespace goro::http::detail {

class H2ClientConn;

class H2ClientStream final : public ClientStream {
 public:
  // Use H2ClientConn::open.
  H2ClientStream(std::shared_ptr<H2ClientConn> conn, const Context& ctx, net::Deadline deadline);
  ~H2ClientStream() override;

  std::error_code write(std::string_view data, bool end) override;
  std::error_code close_send() override;
  std::error_code wait_response() override;
  const ClientResponse& response() const override { return response_; }
  Result<std::size_t> read(void* buf, std::size_t len) override;
  void cancel() override;
  std::uint32_t reset_code() const override;

  // Client::send: waits for the whole response (collected as it arrives, up to
  // max_body_bytes), each wait bounded by read_timeout too; then moves it out.
  Result<ClientResponse> collect(std::chrono::nanoseconds read_timeout);
  // Whether a response head arrived (a call that failed without one may be retried).
  bool answered() const;

 private:
  friend class H2ClientConn;
  friend struct H2ClientCallbacks;
  friend ssize_t pull_request_body(nghttp2_session*, std::int32_t, std::uint8_t*, std::size_t,
                                   std::uint32_t*, nghttp2_data_source*, void*);

  // Parks until woken through wake, the call's deadline, limit or the context's end;
  // then the stream's error, if it has one (the context's or a timeout set by this
  // park). Caller holds lock.
  std::error_code park(std::unique_lock<goro::Mutex>& lock, const Chan<int>& wake,
                       net::Deadline limit = net::no_deadline);
  // A context that ended while no call was parked ends the stream now. Caller holds mu_.
  void check_context();
  // Ends the stream with ec (the first error stays) and resets it unless nghttp2 has
  // closed it. Caller holds mu_.
  void fail(std::error_code ec);
  // Submits RST_STREAM(CANCEL) unless it has been already. Caller holds mu_, the
  // connection is not dead_ and the stream not closed_.
  void reset();
  // nghttp2 closed the stream. Caller holds mu_.
  void closed(std::uint32_t error_code);
  // The data provider: copies up to len queued request bytes. Caller holds mu_.
  ssize_t pull(std::uint8_t* buf, std::size_t len, std::uint32_t* flags);
  void wake_reader() { (void)read_wake_.try_send(0); }
  void wake_writer() { (void)write_wake_.try_send(0); }

  std::shared_ptr<H2ClientConn> conn_;
  const Context ctx_;
  const bool cancellable_;
  const Chan<std::monostate> done_;  // the context's; nil when it cannot be cancelled
  const net::Deadline deadline_;     // the call's (request or client timeout, context)
  Chan<int> read_wake_{1};
  Chan<int> write_wake_{1};
  std::int32_t id_ = -1;

  // Guarded by the connection's mu_.
  H2ClientStream* prev_ = nullptr;  // the connection's list of open streams
  H2ClientStream* next_ = nullptr;
  ClientResponse response_;
  std::size_t head_bytes_ = 0;
  bool head_done_ = false;  // the final (non-1xx) head arrived
  bool collect_ = false;    // body bytes go to response_.body (Client::send)
  std::uint64_t max_body_ = 0;
  std::string in_;  // response body received, not yet read
  std::size_t in_pos_ = 0;
  bool in_end_ = false;  // END_STREAM received
  std::string out_;      // request body queued, not yet taken by nghttp2
  std::size_t out_pos_ = 0;
  bool out_end_ = false;  // no more request body after out_
  bool closed_ = false;   // nghttp2 closed the stream (or the connection ended)
  // RST_STREAM submitted (see reset()).
  bool reset_submitted_ = false;
  std::error_code error_;
  std::uint32_t reset_code_ = 0;
};

// Client options the connection needs; copied, since the connection may outlive the
// Client while its streams are in use.
struct H2ClientSettings {
  std::chrono::nanoseconds write_timeout{0};
  std::chrono::nanoseconds idle_timeout{0};
  std::chrono::nanoseconds ping_interval{0};
  std::chrono::nanoseconds ping_timeout{0};
  std::size_t max_header_bytes = 0;
  std::uint64_t max_body_bytes = 0;
  std::string user_agent;
};

class H2ClientConn : public std::enable_shared_from_this<H2ClientConn> {
 public:
  // Starts HTTP/2 on stream (connected, TLS done): sends the preface and SETTINGS and
  // starts the reader and the writer. Never blocks.
  static std::shared_ptr<H2ClientConn> start(std::unique_ptr<net::Stream> stream,
                                             H2ClientSettings settings);
  ~H2ClientConn();
  H2ClientConn(const H2ClientConn&) = delete;
  H2ClientConn& operator=(const H2ClientConn&) = delete;

  // Parks until the server's SETTINGS arrived (so its MAX_CONCURRENT_STREAMS is known),
  // the connection ended (errc::connection_lost), the deadline or ctx's end.
  std::error_code wait_ready(const Context& ctx, net::Deadline deadline);
  // Takes a stream slot if the connection takes new streams and has one free below the
  // server's MAX_CONCURRENT_STREAMS. open() uses it; release_slot() gives it back unused.
  bool try_reserve();
  void release_slot();
  // Whether the connection will never take another stream (ended, GOAWAY, closing).
  bool finished();
  // Ends the connection once it has no stream (at once if it has none); with
  // only_if_idle, does nothing to a connection in use. When it ends now: a channel
  // closed once its goroutines have let go of it.
  std::optional<Chan<std::monostate>> close(bool only_if_idle);

  // Sends request's head on a reserved slot; with end, request.body follows and ends
  // the request, else request.body (if any) is queued and the stream stays open for
  // write. Fails with errc::invalid_request or errc::connection_lost. Never blocks
  // (the writer sends it).
  Result<std::unique_ptr<H2ClientStream>> open(const ClientRequest& request, const Url& url,
                                               bool end, bool collect, net::Deadline deadline);

 private:
  friend class H2ClientStream;
  friend struct H2ClientCallbacks;

  H2ClientConn(std::unique_ptr<net::Stream> stream, H2ClientSettings settings);
  void reader();
  void writer();
  void wake_writer() { (void)writer_wake_.try_send(0); }
  // The reader's deadline for the connection's timers. Caller holds mu_.
  net::Deadline read_deadline() const;
  // Tells the reader to look at its timers again. Caller holds mu_.
  void refresh_read_deadline() { stream_->set_read_deadline(read_deadline()); }
  void link(H2ClientStream* s);    // caller holds mu_
  void unlink(H2ClientStream* s);  // caller holds mu_

  std::unique_ptr<net::Stream> stream_;
  const H2ClientSettings settings_;
  // Closed by each goroutine after it has dropped its reference (so that a runtime
  // ending right after sees none left behind).
  Chan<std::monostate> writer_ended_;
  Chan<std::monostate> ended_;
  Chan<int> writer_wake_{1};
  Chan<std::monostate> ready_;  // closed at the server's SETTINGS or the connection's end

  goro::Mutex mu_;
  nghttp2_session* session_ = nullptr;  // guarded by mu_
  H2ClientStream* streams_ = nullptr;   // guarded by mu_: the open streams with a caller
  std::size_t active_ = 0;       // guarded by mu_: slots taken (reserved or open in nghttp2)
  bool ready_closed_ = false;    // guarded by mu_
  bool dead_ = false;            // guarded by mu_: the reader has left
  bool goaway_ = false;          // guarded by mu_: the server sent GOAWAY
  bool closing_ = false;         // guarded by mu_: ends when active_ reaches 0
  bool broken_ = false;          // guarded by mu_: a write failed; the reader ends it
  bool ping_outstanding_ = false;  // guarded by mu_
  std::chrono::steady_clock::time_point last_read_;  // guarded by mu_
  std::chrono::steady_clock::time_point ping_sent_;  // guarded by mu_
  std::chrono::steady_clock::time_point idle_since_;  // guarded by mu_
};

}  // namespace goro::http::detail
