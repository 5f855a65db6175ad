// http2_server: one HTTP/2 connection of the server, cleartext with prior knowledge.
// The input (after its settings byte) is what a client sends after the connection
// preface, which the target puts in front; http::Server::serve_conn (enable_h2c)
// serves it from an in-memory stream to a router, and what the server writes back must
// be a well-formed HTTP/2 frame sequence, checked frame by frame against RFC 9113:
//   - whole frames (a 9-byte header and the length it states, at most 16,384 bytes:
//     the size every peer accepts, which goro never exceeds whatever the client
//     allows), the first a SETTINGS frame; only types and flags RFC 9113 defines, no
//     PUSH_PROMISE, the reserved bit clear, each type on stream 0 or not as it must be,
//     fixed-size frames of their size, valid SETTINGS values, non-zero window increments;
//   - a header block is HEADERS then CONTINUATION frames of the same stream, nothing
//     between, and decodes (HPACK, one decoder for the connection's blocks in order) to
//     a response: :status (3 digits) first and alone among pseudo-header fields,
//     lower-case names, no connection-specific field (8.2.2); 1xx heads before a final
//     one, trailers only with END_STREAM;
//   - frames only on streams the client opened (a HEADERS of its input); nothing but
//     RST_STREAM and WINDOW_UPDATE after a stream's END_STREAM, nothing after its
//     RST_STREAM, DATA only after a final head;
//   - DATA within the client's flow-control windows: per stream at most the largest
//     SETTINGS_INITIAL_WINDOW_SIZE the input states (65,535 if none) plus its
//     WINDOW_UPDATEs for the stream, on the connection 65,535 plus its connection
//     WINDOW_UPDATEs (bounds from above: the input is not known to have been accepted);
//   - after a GOAWAY: no frame on a stream above its last stream id, and a later GOAWAY
//     names no higher one (6.8); after a GOAWAY with an error code, no frame at all (the
//     connection ends: nghttp2 sends nothing after terminating a session);
//   - a response a handler completed (200 with END_STREAM, no reset) carries exactly the
//     bytes the handler wrote (none for HEAD), and its content-length when it has one;
//     a head without X-Request (the server's own reply) is 200 (OPTIONS *), 400, 413,
//     431 or 500;
//   - a handler's request context ends only when its client is gone (client_gone).
// And serve_conn returns: the stream ends the input like a client that sent it and
// closed, after letting the server's goroutines run until none makes progress, so the
// server has said all it would before it sees the end (it then cancels what is open).
//
// Settings byte: bits 0-1 how the input is split into reads (read_steps); bit 2 the
// server runs between reads (else only once all the input is in); bit 3 a graceful
// shutdown (Server::shutdown, GOAWAY) begins at the third read, or at the end of the
// input if that comes first; bit 4 tight limits
// (300 header-list bytes, 100 body bytes, 2 concurrent streams, 64-byte write buffer)
// instead of moderate ones; bit 5 an on_error_reply hook that adds fields, one of them
// Connection (which must not go out).
#include <nghttp2/nghttp2.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "harness.hpp"
#include "memory_stream.hpp"

namespace goro::fuzz {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::size_t kFrameHeader = 9;
constexpr std::uint32_t kMaxFrame = 16384;
constexpr std::uint64_t kDefaultWindow = 65535;

enum FrameType : std::uint8_t {
  kData = 0,
  kHeaders = 1,
  kPriority = 2,
  kRstStream = 3,
  kSettings = 4,
  kPushPromise = 5,
  kPing = 6,
  kGoaway = 7,
  kWindowUpdate = 8,
  kContinuation = 9,
};
constexpr std::uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4, kPadded = 0x8,
                       kPriorityFlag = 0x20;

// What each request the handler saw was answered with, by its X-Request number.
struct Handled {
  std::string method;
  std::optional<std::string> body;  // what the handler wrote, once it completed normally
};

// Guarded by mu: on one P the goroutines still run in parallel when the runtime
// detaches one that holds its thread too long (preemption) and hands the P on.
struct Served {
  std::mutex mu;
  std::string output;
  std::vector<Handled> handled;
  int progress = 0;    // bumped as handlers start and end (see settle)
  std::string broken;  // a property a handler saw broken
};

// Lets the connection's other goroutines (its writer, the handlers) run until a few
// rounds pass in which none did anything visible. One P: the reader yielding is how they
// run while it has input.
void settle(Served& served) {
  const auto snapshot = [&served] {
    std::lock_guard lock(served.mu);
    return std::pair(served.output.size(), served.progress);
  };
  int quiet = 0;
  for (int round = 0; round < 1000 && quiet < 3; ++round) {
    const auto before = snapshot();
    const int alive = goro::num_goroutine();
    goro::yield();
    const bool same = before == snapshot() && alive == goro::num_goroutine();
    quiet = same ? quiet + 1 : 0;
  }
}

std::size_t request_number(http::ResponseWriter& w) {
  return std::stoul(std::string(w.header().get("X-Request")));
}

// served: the record of the input being served, which the routes' handlers fill in.
http::Router make_router(Served*& served) {
  http::Router r;
  auto done = [&served](http::ResponseWriter& w, std::string body) {
    std::lock_guard lock(served->mu);
    served->handled[request_number(w)].body = std::move(body);
  };
  r.handle("GET /{$}", [done](http::Request&, http::ResponseWriter& w) {
    w.text("root\n");
    done(w, "root\n");
  });
  r.handle("POST /echo", [done](http::Request& req, http::ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (!body) {
      w.text(body.error().message(), 400);
      return;
    }
    w.header().set("Content-Type", req.header("content-type"));
    w.write(*body);
    done(w, *body);
  });
  // Reads 3 bytes of the body and answers: the rest is discarded, the stream reset.
  r.handle("PUT /partial", [done](http::Request& req, http::ResponseWriter& w) {
    char buf[3];
    std::size_t got = 0;
    while (got < sizeof buf) {
      Result<std::size_t> n = req.read(buf + got, sizeof buf - got);
      if (!n) return;
      if (*n == 0) break;
      got += *n;
    }
    w.text(std::string(buf, got));
    done(w, std::string(buf, got));
  });
  r.handle("GET /stream", [done](http::Request&, http::ResponseWriter& w) {
    std::string all;
    for (int i = 0; i < 3; ++i) {
      const std::string part = "part " + std::to_string(i) + "\n";
      if (w.write(part) || w.flush()) return;
      all += part;
    }
    done(w, all);
  });
  // Past the client's initial windows: the handler parks until WINDOW_UPDATEs come.
  r.handle("GET /big", [done](http::Request&, http::ResponseWriter& w) {
    std::string all;
    for (int i = 0; i < 20; ++i) {
      const std::string part(5000, static_cast<char>('a' + i));
      if (w.write(part)) return;
      all += part;
    }
    done(w, all);
  });
  // Declares more than it writes, after sending the head: the stream ends in RST_STREAM.
  r.handle("GET /short", [](http::Request&, http::ResponseWriter& w) {
    w.header().set("Content-Length", "10");
    w.write("abc");
    w.flush();
  });
  // Waits for the request's context, which ends only when the client resets the stream
  // or the connection ends (no deadline, no shutdown deadline here): then the client is
  // gone.
  r.handle("GET /watch", [&served](http::Request& req, http::ResponseWriter&) {
    req.context().done().recv();
    if (!req.client_gone()) {
      std::lock_guard lock(served->mu);
      served->broken = "a request context ended with the client there";
    }
  });
  r.handle("/throw", [](http::Request&, http::ResponseWriter&) {
    throw std::runtime_error("handler failure");
  });
  r.handle("GET /flush-throw", [](http::Request&, http::ResponseWriter& w) {
    w.write("begun");
    w.flush();
    throw std::runtime_error("handler failure after the head");
  });
  return r;
}

void serve(std::string_view input, std::uint8_t settings, Served& served) {
  static Served* current = nullptr;
  static const http::Router router = make_router(current);
  current = &served;
  http::ServerOptions options;
  options.enable_h2c = true;
  options.error_log = [](std::string_view) {};
  options.read_header_timeout = {};
  options.idle_timeout = {};
  if (settings & 0x10) {
    options.max_header_bytes = 300;
    options.max_body_bytes = 100;
    options.http2_max_concurrent_streams = 2;
    options.write_buffer_size = 64;
  } else {
    options.max_header_bytes = 4096;
    options.max_body_bytes = 64 * 1024;
    options.http2_max_concurrent_streams = 16;
    options.write_buffer_size = 4096;
  }
  if (settings & 0x20) {
    options.on_error_reply = [](http::ErrorReply& reply) {
      reply.headers.set("X-Error-Method", reply.method);
      reply.headers.set("X-Error-Fields", std::to_string(reply.request_headers.size()));
      reply.headers.set("Connection", "close");
    };
  }
  const bool run_between_reads = (settings & 0x04) != 0;
  const bool shut_down = (settings & 0x08) != 0;
  std::string bytes(kPreface);
  bytes.append(input);
  on_goroutine([&] {
    http::Server server(options, [&served](http::Request& req, http::ResponseWriter& w) {
      {
        std::lock_guard lock(served.mu);
        w.header().set("X-Request", std::to_string(served.handled.size()));
        served.handled.push_back({std::string(req.method()), std::nullopt});
        ++served.progress;
      }
      router(req, w);
      std::lock_guard lock(served.mu);
      ++served.progress;
    });
    auto stream = std::make_unique<MemoryStream>(bytes, read_steps(settings), served.output);
    stream->set_output_lock(&served.mu);
    std::size_t reads = 0;
    bool shutdown_begun = false;
    goro::WaitGroup shutdown_done;
    stream->set_before_read([&](bool input_left) {
      if (run_between_reads || !input_left) settle(served);
      // GOAWAY while streams may be open; the shutdown returns once the connection ends.
      if (shut_down && !shutdown_begun && (++reads == 3 || !input_left)) {
        shutdown_begun = true;
        shutdown_done.add(1);
        goro::go([&server, &shutdown_done] {
          server.shutdown(std::chrono::steady_clock::now() + std::chrono::hours(1));
          shutdown_done.done();
        });
        settle(served);
      }
    });
    server.serve_conn(std::move(stream));
    shutdown_done.wait();
  });
  current = nullptr;
}

std::uint32_t u32(std::string_view p) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(p[0])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(p[1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(p[2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(p[3]));
}

struct Frame {
  std::uint8_t type = 0, flags = 0;
  std::uint32_t stream = 0;  // the reserved bit included
  std::string_view payload;
};

// The next whole frame of rest, removed from it; nullopt when rest holds none.
std::optional<Frame> take_frame(std::string_view& rest) {
  if (rest.size() < kFrameHeader) return std::nullopt;
  const std::uint32_t length = u32(rest) >> 8;
  if (rest.size() - kFrameHeader < length) return std::nullopt;
  Frame f{static_cast<std::uint8_t>(rest[3]), static_cast<std::uint8_t>(rest[4]),
          u32(rest.substr(5)), rest.substr(kFrameHeader, length)};
  rest.remove_prefix(kFrameHeader + length);
  return f;
}

// What the client's frames allow the server (an upper bound: they are read as frames
// without asking whether the server accepted them).
struct ClientView {
  std::set<std::uint32_t> opened;  // streams the client sent HEADERS on
  std::uint64_t initial_window = kDefaultWindow;
  std::uint64_t connection_updates = 0;
  std::map<std::uint32_t, std::uint64_t> stream_updates;
};

ClientView read_client(std::string_view input) {
  ClientView view;
  std::string_view rest = input;
  // nghttp2 takes a HEADERS frame in pieces, so a cut one may open its stream too.
  auto note_headers = [&view](std::string_view at) {
    if (at.size() >= kFrameHeader && at[3] == kHeaders)
      view.opened.insert(u32(at.substr(5)) & 0x7fffffff);
  };
  for (note_headers(rest); std::optional<Frame> f = take_frame(rest); note_headers(rest)) {
    const std::uint32_t id = f->stream & 0x7fffffff;
    if (f->type == kSettings && !(f->flags & kAck)) {
      for (std::size_t at = 0; at + 6 <= f->payload.size(); at += 6) {
        const std::string_view entry = f->payload.substr(at, 6);
        const unsigned id_hi = static_cast<unsigned char>(entry[0]);
        const unsigned id_lo = static_cast<unsigned char>(entry[1]);
        if ((id_hi << 8 | id_lo) == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
          view.initial_window = std::max<std::uint64_t>(view.initial_window, u32(entry.substr(2)));
      }
    }
    if (f->type == kWindowUpdate && f->payload.size() == 4) {
      const std::uint32_t increment = u32(f->payload) & 0x7fffffff;
      if (id == 0)
        view.connection_updates += increment;
      else
        view.stream_updates[id] += increment;
    }
  }
  return view;
}

bool connection_specific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

// The server's side of each stream, as its frames show it.
struct StreamSeen {
  bool final_head = false;
  bool ended = false;  // END_STREAM sent
  bool reset = false;  // RST_STREAM sent
  int status = 0;
  std::optional<std::size_t> request;  // X-Request
  std::optional<std::string> content_length;
  std::uint64_t data_bytes = 0;
  std::string body;
};

class OutputChecker {
 public:
  OutputChecker(const Served& served, const ClientView& client) : served_(served), client_(client) {
    nghttp2_hd_inflate_new(&inflater_);
  }
  ~OutputChecker() { nghttp2_hd_inflate_del(inflater_); }
  OutputChecker(const OutputChecker&) = delete;
  OutputChecker& operator=(const OutputChecker&) = delete;

  std::string check() {
    std::string_view rest = served_.output;
    for (std::size_t n = 0; !rest.empty(); ++n) {
      std::optional<Frame> f = take_frame(rest);
      if (!f) return "frame " + std::to_string(n) + ": cut short";
      if (std::string failure = check_frame(*f, n == 0); !failure.empty())
        return "frame " + std::to_string(n) + " (type " + std::to_string(f->type) + ", stream " +
               std::to_string(f->stream) + "): " + failure;
    }
    if (block_stream_ != 0) return "the output ends inside a header block";
    return {};
  }

 private:
  std::string check_frame(const Frame& f, bool first) {
    const std::size_t len = f.payload.size();
    const std::uint32_t id = f.stream;
    if (len > kMaxFrame) return "longer than 16384 bytes";
    if (id & 0x80000000u) return "reserved bit set";
    if (first && (f.type != kSettings || (f.flags & kAck))) return "the first frame is no SETTINGS";
    if (goaway_error_) return "a frame after a GOAWAY with an error code";
    if (block_stream_ != 0 && (f.type != kContinuation || id != block_stream_))
      return "inside a header block, a frame other than its CONTINUATION";
    if (id != 0 && goaway_last_ && id > *goaway_last_) return "on a stream above GOAWAY's last";
    static constexpr std::uint8_t kAllowedFlags[] = {
        kEndStream | kPadded,
        kEndStream | kEndHeaders | kPadded | kPriorityFlag,
        0,
        0,
        kAck,
        0,
        kAck,
        0,
        0,
        kEndHeaders};
    if (f.type > kContinuation) return "unknown frame type";
    if (f.flags & ~kAllowedFlags[f.type]) return "undefined flags";
    const bool on_stream = f.type == kData || f.type == kHeaders || f.type == kPriority ||
                           f.type == kRstStream || f.type == kContinuation;
    const bool on_connection = f.type == kSettings || f.type == kPing || f.type == kGoaway;
    if (on_stream && id == 0) return "on stream 0";
    if (on_connection && id != 0) return "not on stream 0";
    if (id != 0 && !client_.opened.count(id)) return "on a stream the client never opened";
    StreamSeen* s = id != 0 ? &streams_[id] : nullptr;
    if (s != nullptr && s->reset && f.type != kPriority) return "after the stream's RST_STREAM";
    switch (f.type) {
      case kData: return data(f, *s);
      case kHeaders: {
        if (s->ended) return "HEADERS after END_STREAM";
        std::string_view block = f.payload;
        if (f.flags & kPadded) {
          if (block.empty() || static_cast<unsigned char>(block[0]) >= block.size())
            return "padding past the payload";
          block = block.substr(1, block.size() - 1 - static_cast<unsigned char>(block[0]));
        }
        if (f.flags & kPriorityFlag) {
          if (block.size() < 5) return "priority fields cut";
          block.remove_prefix(5);
        }
        block_.assign(block);
        block_end_stream_ = (f.flags & kEndStream) != 0;
        if (!(f.flags & kEndHeaders)) {
          block_stream_ = id;
          return {};
        }
        return header_block(*s);
      }
      case kContinuation:
        if (block_stream_ == 0) return "CONTINUATION outside a header block";
        block_.append(f.payload);
        if (!(f.flags & kEndHeaders)) return {};
        block_stream_ = 0;
        return header_block(*s);
      case kPriority: return len == 5 ? "" : "PRIORITY not of 5 bytes";
      case kRstStream:
        if (len != 4) return "RST_STREAM not of 4 bytes";
        s->reset = true;
        return {};
      case kSettings:
        if (f.flags & kAck) return len == 0 ? "" : "SETTINGS ack with a payload";
        if (len % 6 != 0) return "SETTINGS not a multiple of 6 bytes";
        for (std::size_t at = 0; at < len; at += 6) {
          const std::string_view e = f.payload.substr(at, 6);
          const unsigned key =
              static_cast<unsigned char>(e[0]) << 8 | static_cast<unsigned char>(e[1]);
          const std::uint32_t value = u32(e.substr(2));
          if (key == NGHTTP2_SETTINGS_ENABLE_PUSH && value > 1) return "ENABLE_PUSH not 0 or 1";
          if (key == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE && value > 0x7fffffff)
            return "INITIAL_WINDOW_SIZE too large";
          if (key == NGHTTP2_SETTINGS_MAX_FRAME_SIZE && (value < 16384 || value > 0xffffff))
            return "MAX_FRAME_SIZE out of range";
        }
        return {};
      case kPushPromise: return "PUSH_PROMISE (goro never pushes)";
      case kPing: return len == 8 ? "" : "PING not of 8 bytes";
      case kGoaway: {
        if (len < 8) return "GOAWAY shorter than 8 bytes";
        const std::uint32_t last = u32(f.payload) & 0x7fffffff;
        if (goaway_last_ && last > *goaway_last_) return "a GOAWAY names a higher last stream";
        goaway_last_ = last;
        goaway_error_ = u32(f.payload.substr(4)) != NGHTTP2_NO_ERROR;
        return {};
      }
      case kWindowUpdate: {
        if (len != 4) return "WINDOW_UPDATE not of 4 bytes";
        if ((u32(f.payload) & 0x7fffffff) == 0) return "WINDOW_UPDATE of 0";
        return {};
      }
      default: return {};
    }
  }

  std::string data(const Frame& f, StreamSeen& s) {
    if (!s.final_head) return "DATA before a final response head";
    if (s.ended) return "DATA after END_STREAM";
    std::string_view body = f.payload;
    if (f.flags & kPadded) {
      if (body.empty() || static_cast<unsigned char>(body[0]) >= body.size())
        return "padding past the payload";
      body = body.substr(1, body.size() - 1 - static_cast<unsigned char>(body[0]));
    }
    s.data_bytes += f.payload.size();
    connection_data_ += f.payload.size();
    auto updates = client_.stream_updates.find(f.stream);
    const std::uint64_t stream_allowed =
        client_.initial_window + (updates == client_.stream_updates.end() ? 0 : updates->second);
    if (s.data_bytes > stream_allowed) return "DATA past the stream's flow-control window";
    if (connection_data_ > kDefaultWindow + client_.connection_updates)
      return "DATA past the connection's flow-control window";
    s.body.append(body);
    if (f.flags & kEndStream) return end_stream(s);
    return {};
  }

  std::string header_block(StreamSeen& s) {
    std::vector<std::pair<std::string, std::string>> fields;
    std::string_view in = block_;
    for (;;) {
      nghttp2_nv nv;
      int flags = 0;
      const ssize_t used = nghttp2_hd_inflate_hd2(
          inflater_, &nv, &flags, reinterpret_cast<const std::uint8_t*>(in.data()), in.size(), 1);
      if (used < 0) return "a header block that does not decode";
      in.remove_prefix(static_cast<std::size_t>(used));
      if (flags & NGHTTP2_HD_INFLATE_EMIT) {
        fields.emplace_back(std::string(reinterpret_cast<const char*>(nv.name), nv.namelen),
                            std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen));
      }
      if (flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(inflater_);
        break;
      }
      if (used == 0 && in.empty()) return "a header block that stops short";
    }
    const bool trailers = s.final_head;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const auto& [name, value] = fields[i];
      if (name.empty()) return "an empty field name";
      if (name.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos)
        return "an upper-case field name: " + name;
      if (connection_specific(name)) return "a connection-specific field: " + name;
      if (name[0] == ':') {
        if (trailers || i != 0 || name != ":status") return "pseudo-header field " + name;
        if (value.size() != 3 || value.find_first_not_of("0123456789") != std::string::npos)
          return "a malformed :status " + value;
        s.status = std::stoi(value);
      } else if (!trailers && name == "x-request") {
        s.request = std::stoul(value);
      } else if (!trailers && name == "content-length") {
        s.content_length = value;
      }
    }
    if (trailers) return block_end_stream_ ? end_stream(s) : "trailers without END_STREAM";
    if (s.status == 0) return "a response head without :status";
    if (s.status < 200) {
      if (block_end_stream_) return "an interim head with END_STREAM";
      s.request.reset();
      s.content_length.reset();
      s.status = 0;
      return {};
    }
    s.final_head = true;
    if (!s.request) {
      switch (s.status) {
        case 200:
        case 400:
        case 413:
        case 431:
        case 500: break;
        default: return "the server's own reply with status " + std::to_string(s.status);
      }
    } else if (*s.request >= served_.handled.size()) {
      return "X-Request of a request no handler saw";
    }
    return block_end_stream_ ? end_stream(s) : "";
  }

  // The stream's response is complete: it must be what the handler wrote.
  std::string end_stream(StreamSeen& s) {
    s.ended = true;
    if (!s.request || s.status != 200) return {};
    const Handled& h = served_.handled[*s.request];
    if (h.method == "HEAD") return s.body.empty() ? "" : "a body in a response to HEAD";
    if (s.content_length && *s.content_length != std::to_string(s.body.size()))
      return "content-length " + *s.content_length + " with " + std::to_string(s.body.size()) +
             " body bytes";
    if (h.body && *h.body != s.body) return "a body other than the one the handler wrote";
    return {};
  }

  const Served& served_;
  const ClientView& client_;
  nghttp2_hd_inflater* inflater_ = nullptr;
  std::map<std::uint32_t, StreamSeen> streams_;
  std::uint32_t block_stream_ = 0;  // a header block is open on this stream
  std::string block_;
  bool block_end_stream_ = false;
  std::optional<std::uint32_t> goaway_last_;
  bool goaway_error_ = false;
  std::uint64_t connection_data_ = 0;
};

}  // namespace

std::string http2_server(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  input.remove_prefix(1);
  Served served;
  serve(input, settings, served);
  if (!served.broken.empty()) return served.broken;
  const ClientView client = read_client(input);
  return OutputChecker(served, client).check();
}

}  // namespace goro::fuzz
