#include "websocket_connection.hpp"

#include <openssl/rand.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include <goro/net/errors.hpp>

namespace goro::http::websocket::detail {
namespace {

constexpr std::size_t kReadBufferSize = 4096;
// The input buffer of a slow WebSocket: room for a whole control frame (139 bytes) and
// a short message.
constexpr std::size_t kSmallInput = 512;
// Input that comes within this of the previous read's is busy: the next read keeps the
// page-sized buffer. On the coarse clock (a few ms resolution), read once per read for
// a few nanoseconds.
constexpr std::int64_t kBusyGapNs = 30'000'000;

std::int64_t coarse_now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
// A data frame's payload at least this long, with nothing buffered, is read straight
// into the message instead of through the read buffer.
constexpr std::size_t kDirectRead = 1024;
constexpr std::size_t kDirectReadMax = 64 * 1024;
// Buffers kept between messages are released past this size, so that one large message
// does not pin its memory for the connection's life.
constexpr std::size_t kKeepBuffer = 64 * 1024;
// Bytes masked per write on a client.
constexpr std::size_t kMaskChunk = 16 * 1024;
// What a lingering close discards at most before closing anyway.
constexpr std::size_t kLingerBytes = 1 << 20;

void release_if_large(std::string& s) {
  if (s.capacity() > kKeepBuffer) std::string().swap(s);
}

// The earlier of two deadlines, where no_deadline is none.
net::Deadline earlier(net::Deadline a, net::Deadline b) noexcept {
  if (a == net::no_deadline) return b;
  if (b == net::no_deadline) return a;
  return std::min(a, b);
}

bool is_context_error(std::error_code ec) { return ec.category() == goro::context_category(); }

// A context that ends after d (none when d is zero).
std::pair<Context, CancelFunc> bounded(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return goro::with_cancel(goro::background());
  return goro::with_timeout(goro::background(), d);
}

}  // namespace

Connection::Connection(Setup setup)
    : server_(setup.server),
      kept_(std::move(setup.kept)),
      owned_(std::move(setup.owned)),
      stream_(setup.stream),
      subprotocol_(std::move(setup.subprotocol)),
      max_message_size_(setup.max_message_size),
      close_timeout_(setup.close_timeout),
      compression_min_size_(setup.compression_min_size),
      shutdown_(std::move(setup.shutdown)),
      decoder_({.server = setup.server,
                .deflate = setup.deflate.has_value(),
                .max_message_size = setup.max_message_size}) {
  if (!setup.early.empty()) {
    resize_input(setup.early.size() > kSmallInput ? std::max(kReadBufferSize, setup.early.size())
                                                  : kSmallInput);
    std::memcpy(input(), setup.early.data(), setup.early.size());
    end_ = setup.early.size();
  }
  if (setup.deflate) {
    const DeflateParams& p = *setup.deflate;
    deflating_ = std::make_unique<Deflating>(setup.compression_level, p.own_window_bits,
                                           p.own_no_context_takeover);
    inflating_ = std::make_unique<Inflating>(p.peer_window_bits, p.peer_no_context_takeover);
  }
}

Connection::~Connection() { close_stream(); }

std::uint16_t Connection::peer_close_code() const {
  std::lock_guard lock(state_mu_);
  return peer_code_;
}

std::string Connection::peer_close_reason() const {
  std::lock_guard lock(state_mu_);
  return peer_reason_ ? *peer_reason_ : std::string();
}

void Connection::close_stream() {
  {
    std::lock_guard lock(state_mu_);
    if (stream_closed_) return;
    stream_closed_ = true;
  }
  stream_->close();
}

// --- reading

std::error_code Connection::read(Message& out, const Context& ctx) {
  if (served_.load(std::memory_order_acquire))
    return std::make_error_code(std::errc::operation_in_progress);
  if (std::error_code ec = read_mu_.lock(ctx)) return ec;
  std::unique_lock lock(read_mu_, std::adopt_lock);
  return read_locked(out, ctx);
}

std::error_code Connection::set_read_deadline(net::Deadline d) {
  std::lock_guard lock(state_mu_);
  read_deadline_ = d;
  if (reader_interrupted_) return {};
  return stream_->set_read_deadline(earlier(d, hold_until_));
}

void Connection::interrupt_reader() {
  std::lock_guard lock(state_mu_);
  reader_interrupted_ = true;
  (void)stream_->set_read_deadline(std::chrono::steady_clock::now());
}

std::error_code Connection::serve_read(Message& out, std::chrono::nanoseconds hold, bool* idle) {
  *idle = false;
  std::lock_guard lock(read_mu_);
  // Only a wait for a message's first byte is held: one that has begun is read whole.
  const bool held = hold.count() > 0 && begin_ == end_ && !decoder_.in_message();
  net::Deadline user{};
  if (held) {
    std::lock_guard state(state_mu_);
    hold_until_ = net::deadline_after(hold);
    user = read_deadline_;
    if (!reader_interrupted_) (void)stream_->set_read_deadline(earlier(user, hold_until_));
  }
  std::error_code ec = read_locked(out, {});
  if (!held) return ec;
  std::lock_guard state(state_mu_);
  hold_until_ = net::no_deadline;
  if (!ec || !net::is_timeout(ec)) return ec;
  // The hold ran out: the connection may wait without a goroutine, under the user's
  // deadline again. The user's own deadline (or close()'s, which set it meanwhile)
  // having passed is a real timeout.
  if (reader_interrupted_) return ec;
  user = read_deadline_;
  (void)stream_->set_read_deadline(user);
  if (user != net::no_deadline && user <= std::chrono::steady_clock::now()) return ec;
  *idle = true;
  return {};
}

void Connection::resize_input(std::size_t capacity) {
  if (capacity == input_capacity_) return;
  auto bigger = std::make_unique<char[]>(capacity);
  if (end_ > begin_) std::memcpy(bigger.get(), input_.get() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  input_ = std::move(bigger);
  input_capacity_ = capacity;
}

void Connection::release_input() noexcept {
  std::lock_guard lock(read_mu_);
  if (begin_ != end_) return;
  begin_ = end_ = 0;
  input_.reset();
  input_capacity_ = 0;
  if (message_.empty()) std::string().swap(message_);
  if (inflating_ && inflating_->compressed.empty()) std::string().swap(inflating_->compressed);
}

std::error_code Connection::read_locked(Message& out, const Context& ctx) {
  using Kind = FrameDecoder::Kind;
  if (read_error_) return read_error_;
  for (;;) {
    std::size_t used = 0;
    FrameDecoder::Event e = decoder_.next(input() + begin_, end_ - begin_, used);
    begin_ += used;
    switch (e.kind) {
      case Kind::payload:
        (decoder_.message_compressed() ? inflating_->compressed : message_).append(e.payload);
        continue;
      case Kind::message_end: return finish_message(out);
      case Kind::ping:
        // The pong goes out under the frame lock only, between the frames of a message
        // another goroutine may be writing. If it cannot be written, the writers learn it.
        (void)send_control(opcode::pong, e.payload, ctx);
        continue;
      case Kind::pong: continue;
      case Kind::close: return peer_closed(e.close_code, e.close_reason);
      case Kind::violation: return fail(e.violation.code, e.violation.reason);
      case Kind::need_more: break;
    }
    const std::uint64_t left = decoder_.payload_left();
    if (begin_ == end_ && left >= kDirectRead) {
      std::string& dest = decoder_.message_compressed() ? inflating_->compressed : message_;
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, kDirectReadMax));
      const std::size_t old = dest.size();
      dest.resize(old + want);
      Result<std::size_t> n = stream_->read(dest.data() + old, want, ctx);
      dest.resize(old + (n ? *n : 0));
      if (!n || *n == 0) return read_failed(n);
      FrameDecoder::Event p = decoder_.take_payload(dest.data() + old, *n);
      if (p.kind == Kind::violation) return fail(p.violation.code, p.violation.reason);
      continue;
    }
    if (std::error_code ec = fill(ctx)) return ec;
  }
}

std::error_code Connection::fill(const Context& ctx) {
  // What is left is at most a partial header or control frame (payload is always taken):
  // move it to the front, so that a whole control frame (139 bytes) always fits.
  if (begin_ > 0) {
    std::memmove(input(), input() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  // Nothing left over, the socket drained and the input slow: this read may wait long,
  // in the small buffer.
  if (end_ == 0 && !last_read_full_ && !input_busy_) {
    resize_input(kSmallInput);
  } else if (input_capacity_ < kReadBufferSize) {
    resize_input(kReadBufferSize);
  }
  const std::size_t space = input_capacity() - end_;
  Result<std::size_t> n = stream_->read(input() + end_, space, ctx);
  if (!n || *n == 0) return read_failed(n);
  end_ += *n;
  last_read_full_ = *n == space;
  const std::int64_t now = coarse_now_ns();
  input_busy_ = now - last_input_ns_ < kBusyGapNs;
  last_input_ns_ = now;
  return {};
}

std::error_code Connection::read_failed(const Result<std::size_t>& n) {
  if (n) {
    // The peer ended the stream without a close frame.
    read_error_ = std::error_code(close_code::abnormal, close_category());
    close_stream();
    return read_error_;
  }
  std::error_code ec = n.error();
  // Nothing is lost: the decoder and the message keep their state for the next read.
  if (net::is_timeout(ec) || is_context_error(ec)) return ec;
  if (ec == net::errc::closed) ec = errc::closed;
  read_error_ = ec;
  close_stream();
  return ec;
}

std::error_code Connection::finish_message(Message& out) {
  const MessageType type =
      decoder_.message_opcode() == opcode::text ? MessageType::text : MessageType::binary;
  if (decoder_.message_compressed()) {
    message_.clear();
    std::string& compressed = inflating_->compressed;
    Inflater::Result r = inflating_->inflater.decompress(compressed, max_message_size_, message_);
    compressed.clear();
    release_if_large(compressed);
    if (r == Inflater::Result::too_big) return fail(1009, "a message longer than the limit");
    if (r == Inflater::Result::corrupt) return fail(1002, "a message that does not decompress");
    if (type == MessageType::text && !valid_utf8(message_))
      return fail(1007, "a text message that is not valid UTF-8");
  }
  out.type = type;
  out.data.swap(message_);
  message_.clear();
  release_if_large(message_);
  return {};
}

std::error_code Connection::peer_closed(std::uint16_t code, std::string_view reason) {
  {
    std::lock_guard lock(state_mu_);
    peer_code_ = code;
    peer_reason_ = reason.empty() ? nullptr : std::make_unique<std::string>(reason);
  }
  // Answer with the same code (RFC 6455 5.5.1), unless this side's close went first.
  auto [ctx, cancel] = bounded(close_timeout_);
  (void)send_close(code, {}, ctx, nullptr);
  read_error_ = std::error_code(code, close_category());
  linger_close();
  return read_error_;
}

std::error_code Connection::fail(std::uint16_t code, const char* reason) {
  auto [ctx, cancel] = bounded(close_timeout_);
  (void)send_close(code, reason, ctx, nullptr);
  read_error_ = code == 1007   ? make_error_code(errc::invalid_utf8)
                : code == 1009 ? make_error_code(errc::message_too_big)
                               : make_error_code(errc::protocol_error);
  linger_close();
  return read_error_;
}

void Connection::linger_close() {
  {
    std::lock_guard lock(state_mu_);
    if (stream_closed_) return;
  }
  auto [ctx, cancel] = bounded(close_timeout_);
  if (!stream_->shutdown_write()) {
    std::size_t discarded = 0;
    while (discarded < kLingerBytes) {
      if (input_capacity_ == 0) resize_input(kSmallInput);
      Result<std::size_t> n = stream_->read(input(), input_capacity(), ctx);
      if (!n || *n == 0) break;
      discarded += *n;
    }
  }
  begin_ = end_ = 0;
  close_stream();
}

// --- writing

std::error_code Connection::write(MessageType type, std::string_view data, const Context& ctx) {
  if (std::error_code ec = message_mu_.lock(ctx)) return ec;
  std::unique_lock lock(message_mu_, std::adopt_lock);
  const bool compress = deflating_ != nullptr && data.size() >= compression_min_size_;
  return write_piece(type, true, true, compress, data, ctx);
}

std::error_code Connection::write_piece(MessageType type, bool first, bool fin, bool compress,
                                        std::string_view data, const Context& ctx) {
  std::string_view payload = data;
  if (compress) {
    if (!deflating_->deflater.compress(data, fin, deflating_->deflated))
      return std::make_error_code(std::errc::not_enough_memory);
    payload = deflating_->deflated;
  }
  const std::uint8_t op = !first ? opcode::continuation
                          : type == MessageType::text ? opcode::text
                                                      : opcode::binary;
  std::error_code ec;
  if (std::error_code locked = frame_mu_.lock(ctx)) {
    ec = locked;
  } else {
    std::unique_lock lock(frame_mu_, std::adopt_lock);
    if (write_error_) {
      ec = write_error_;
    } else if (close_sent_) {
      ec = errc::closed;
    } else {
      ec = write_frame_locked(fin, compress && first, op, payload, ctx);
    }
  }
  if (compress) release_if_large(deflating_->deflated);
  return ec;
}

std::error_code Connection::ping(std::string_view payload, const Context& ctx) {
  if (payload.size() > kMaxControlPayload) return std::make_error_code(std::errc::invalid_argument);
  return send_control(opcode::ping, payload, ctx);
}

std::error_code Connection::send_control(std::uint8_t op, std::string_view payload,
                                         const Context& ctx) {
  if (std::error_code ec = frame_mu_.lock(ctx)) return ec;
  std::unique_lock lock(frame_mu_, std::adopt_lock);
  if (write_error_) return write_error_;
  if (close_sent_) return errc::closed;
  return write_frame_locked(true, false, op, payload, ctx);
}

std::error_code Connection::send_close(std::uint16_t code, std::string_view reason,
                                       const Context& ctx, CloseSend* outcome) {
  if (std::error_code ec = frame_mu_.lock(ctx)) return ec;
  std::unique_lock lock(frame_mu_, std::adopt_lock);
  if (outcome != nullptr) *outcome = close_sent_ ? CloseSend::already_sent : CloseSend::sent;
  if (close_sent_) return {};
  close_sent_ = true;
  if (write_error_) return write_error_;
  char payload[2 + kMaxControlPayload];
  std::size_t size = 0;
  if (code != close_code::no_status) {
    payload[0] = static_cast<char>(code >> 8);
    payload[1] = static_cast<char>(code & 0xFF);
    reason = reason.substr(0, kMaxControlPayload - 2);
    if (!reason.empty()) std::memcpy(payload + 2, reason.data(), reason.size());
    size = 2 + reason.size();
  }
  return write_frame_locked(true, false, opcode::close, {payload, size}, ctx);
}

std::error_code Connection::write_frame_locked(bool fin, bool rsv1, std::uint8_t op,
                                               std::string_view payload, const Context& ctx) {
  // A context already cancelled costs nothing; one cancelled part way through a frame
  // leaves the stream out of step, which the sticky write_error_ records.
  if (std::error_code ec = ctx.err()) return ec;
  char header[kMaxHeaderSize];
  auto writev = [&](const iovec* iov, int count) -> std::error_code {
    Result<std::size_t> n = net::with_context(*stream_, net::IoMode::write, ctx,
                                              [&] { return stream_->writev(iov, count); });
    if (n) return {};
    write_error_ = n.error() == net::errc::closed ? make_error_code(errc::closed) : n.error();
    return write_error_;
  };
  if (server_) {
    const std::size_t size = encode_frame_header(header, fin, rsv1, op, payload.size(), nullptr);
    iovec iov[2] = {{header, size}, {const_cast<char*>(payload.data()), payload.size()}};
    return writev(iov, payload.empty() ? 1 : 2);
  }
  // A client masks every frame with a fresh random key (RFC 6455 5.3), on a copy.
  MaskKey key;
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) key = {0x5a, 0x13, 0xc7, 0x2e};
  const std::size_t size = encode_frame_header(header, fin, rsv1, op, payload.size(), &key);
  std::size_t done = 0;
  do {
    const std::size_t piece = std::min(payload.size() - done, kMaskChunk);
    if (!masked_) masked_ = std::make_unique<std::string>();
    std::string& masked = *masked_;
    masked.assign(payload.data() + done, piece);
    apply_mask(masked.data(), piece, key, done);
    iovec iov[2];
    int count = 0;
    if (done == 0) iov[count++] = {header, size};
    if (piece > 0) iov[count++] = {masked.data(), piece};
    if (std::error_code ec = writev(iov, count)) return ec;
    done += piece;
  } while (done < payload.size());
  return {};
}

// --- closing

std::error_code Connection::close(std::uint16_t code, std::string_view reason) {
  if ((code != close_code::no_status && !sendable_close_code(code)) ||
      (code == close_code::no_status && !reason.empty()) || reason.size() > kMaxControlPayload - 2 ||
      !valid_utf8(reason))
    return std::make_error_code(std::errc::invalid_argument);
  auto [ctx, cancel] = bounded(close_timeout_);
  CloseSend outcome = CloseSend::sent;
  if (std::error_code ec = send_close(code, reason, ctx, &outcome)) {
    close_stream();
    return is_context_error(ec) ? make_error_code(net::errc::timeout) : ec;
  }
  if (outcome == CloseSend::already_sent) return errc::closed;
  if (served_.load(std::memory_order_acquire)) {
    // serve()'s goroutine (or the wake-up that starts it) reads the peer's answer; a
    // peer that gives none meets this deadline there.
    if (close_timeout_.count() > 0) (void)set_read_deadline(net::deadline_after(close_timeout_));
    return {};
  }
  // Wait for the peer's close frame: read it here, or let the goroutine already reading
  // find it (its read returns the peer's close and releases the lock).
  if (read_mu_.lock(ctx)) {
    close_stream();
    return net::errc::timeout;
  }
  std::unique_lock lock(read_mu_, std::adopt_lock);
  return await_peer_close(ctx);
}

std::error_code Connection::close_as_reader(std::uint16_t code, std::string_view reason) {
  auto [ctx, cancel] = bounded(close_timeout_);
  CloseSend outcome = CloseSend::sent;
  if (std::error_code ec = send_close(code, reason, ctx, &outcome)) {
    close_stream();
    return is_context_error(ec) ? make_error_code(net::errc::timeout) : ec;
  }
  // A close that went out before (close() from another goroutine) has had its wait.
  if (outcome == CloseSend::already_sent) {
    close_stream();
    return errc::closed;
  }
  // Whatever deadline was set, or interrupt_reader made pass, the answer gets
  // close_timeout.
  {
    std::lock_guard state(state_mu_);
    reader_interrupted_ = false;
  }
  (void)set_read_deadline(net::no_deadline);
  std::lock_guard lock(read_mu_);
  return await_peer_close(ctx);
}

std::error_code Connection::await_peer_close(const Context& ctx) {
  Message discarded;
  std::error_code ec;
  while (!(ec = read_locked(discarded, ctx))) {
  }
  if (ec.category() == close_category() && ec.value() != close_code::abnormal) return {};
  close_stream();
  return is_context_error(ec) ? make_error_code(net::errc::timeout) : ec;
}

}  // namespace goro::http::websocket::detail
