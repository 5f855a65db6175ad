// Writes the seeds of fuzz/corpus/http2_server/: what an HTTP/2 client sends after the
// connection preface, framed and HPACK-encoded by nghttp2's client session (or, for
// what a client session never sends, frames written here), each after the target's
// settings byte (fuzz/targets/http2_server.cpp says what its bits mean).
//
//   build/fuzz/fuzz/http2_seeds fuzz/corpus/http2_server
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

nghttp2_nv field(std::string_view name, std::string_view value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

std::vector<nghttp2_nv> request_fields(std::string_view method, std::string_view path,
                                       std::vector<nghttp2_nv> extra = {}) {
  std::vector<nghttp2_nv> nv = {field(":method", method), field(":scheme", "http"),
                                field(":authority", "fuzz"), field(":path", path)};
  nv.insert(nv.end(), extra.begin(), extra.end());
  return nv;
}

// A client session whose frames are gathered, the preface left out.
class Client {
 public:
  Client() {
    nghttp2_session_callbacks* callbacks;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
  }
  ~Client() { nghttp2_session_del(session_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void settings(std::vector<nghttp2_settings_entry> entries = {}) {
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries.data(), entries.size());
  }
  // A request; body: sent as DATA (none: END_STREAM on HEADERS).
  std::int32_t request(const std::vector<nghttp2_nv>& nv, const std::string* body = nullptr) {
    nghttp2_data_provider provider{};
    provider.source.ptr = const_cast<std::string*>(body);
    provider.read_callback = [](nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t len,
                                std::uint32_t* flags, nghttp2_data_source* source,
                                void*) -> ssize_t {
      auto* rest = static_cast<std::string*>(source->ptr);
      const std::size_t n = std::min(len, rest->size());
      std::copy_n(rest->data(), n, buf);
      rest->erase(0, n);
      if (rest->empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    };
    return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                  body != nullptr ? &provider : nullptr, nullptr);
  }
  nghttp2_session* session() { return session_; }
  // Everything submitted so far, framed.
  std::string take() {
    std::string out;
    const std::uint8_t* data;
    for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;)
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    if (!sent_preface_) {
      out.erase(0, kPreface.size());
      sent_preface_ = true;
    }
    return out;
  }

 private:
  nghttp2_session* session_ = nullptr;
  bool sent_preface_ = false;
};

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  std::string_view payload) {
  std::string f;
  const std::size_t len = payload.size();
  for (int shift : {16, 8, 0}) f.push_back(static_cast<char>(len >> shift & 0xff));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift : {24, 16, 8, 0}) f.push_back(static_cast<char>(stream >> shift & 0xff));
  f.append(payload);
  return f;
}

std::string hpack(const std::vector<nghttp2_nv>& nv) {
  nghttp2_hd_deflater* deflater;
  nghttp2_hd_deflate_new(&deflater, 4096);
  std::string out(nghttp2_hd_deflate_bound(deflater, nv.data(), nv.size()), '\0');
  const ssize_t n = nghttp2_hd_deflate_hd(deflater, reinterpret_cast<std::uint8_t*>(out.data()),
                                          out.size(), nv.data(), nv.size());
  nghttp2_hd_deflate_del(deflater);
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

bool write_seed(const std::string& dir, const std::string& name, std::uint8_t settings,
                const std::string& bytes) {
  std::ofstream file(dir + "/" + name, std::ios::binary);
  file.put(static_cast<char>(settings));
  file << bytes;
  return static_cast<bool>(file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: http2_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  auto seed = [&](const std::string& name, std::uint8_t settings, const std::string& bytes) {
    ok = write_seed(dir, name, settings, bytes) && ok;
  };
  {
    Client c;
    c.settings();
    c.request(request_fields("GET", "/"));
    c.request(request_fields("HEAD", "/"));
    seed("get-and-head", 0x00, c.take());
  }
  {
    Client c;
    c.settings();
    std::string body = "hello, echo";
    c.request(request_fields("POST", "/echo", {field("content-type", "text/plain")}), &body);
    const std::string bytes = c.take();
    seed("echo", 0x04, bytes);
    seed("echo-byte-by-byte", 0x01, bytes);
  }
  {
    Client c;
    c.settings({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}});
    c.request(request_fields("GET", "/stream"));
    c.request(request_fields("GET", "/big"));
    nghttp2_submit_window_update(c.session(), NGHTTP2_FLAG_NONE, 0, 1 << 20);
    seed("stream-and-big-with-windows", 0x07, c.take());
  }
  {
    Client c;
    c.settings();
    const std::int32_t big = c.request(request_fields("GET", "/big"));
    const std::string request = c.take();
    seed("big-stalled", 0x00, request);
    // The response stops at the 65,535-byte windows until these come.
    nghttp2_submit_window_update(c.session(), NGHTTP2_FLAG_NONE, big, 40000);
    nghttp2_submit_window_update(c.session(), NGHTTP2_FLAG_NONE, 0, 40000);
    seed("big-window-updates-later", 0x06, request + c.take());
  }
  {
    Client c;
    c.settings();
    c.request(request_fields("GET", "/throw"));
    c.request(request_fields("GET", "/flush-throw"));
    c.request(request_fields("GET", "/short"));
    c.request(request_fields("GET", "/nowhere"));
    seed("failures", 0x04, c.take());
  }
  {
    Client c;
    c.settings();
    std::string body = "0123456789abcdef";
    c.request(request_fields("PUT", "/partial"), &body);
    seed("partial-read", 0x04, c.take());
  }
  {
    Client c;
    c.settings();
    c.request(request_fields("GET", "/", {field("x-long", std::string(300, 'x'))}));
    std::string body(200, 'b');
    c.request(request_fields("POST", "/echo", {field("content-length", "200")}), &body);
    std::string unsized(150, 'u');
    c.request(request_fields("POST", "/echo"), &unsized);
    c.request(request_fields("GET", "/stream"));
    c.request(request_fields("GET", "/stream"));
    seed("tight-limits", 0x34, c.take());
  }
  {
    Client c;
    c.settings();
    const std::int32_t id = c.request(request_fields("GET", "/big"));
    std::string bytes = c.take();
    nghttp2_submit_rst_stream(c.session(), NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    nghttp2_submit_ping(c.session(), NGHTTP2_FLAG_NONE, nullptr);
    c.request(request_fields("OPTIONS", "*"));
    nghttp2_submit_goaway(c.session(), NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, nullptr, 0);
    bytes += c.take();
    seed("reset-ping-options-goaway", 0x04, bytes);
  }
  {
    // A handler that waits for its request's context: the client resets its stream
    // (with CANCEL, and with NO_ERROR), or the connection ends under it. The reset with
    // NO_ERROR once left its handler waiting for ever (tests/http/http2_test.cpp,
    // ResetWithNoErrorCancelsTheRequestContext).
    Client c;
    c.settings();
    const std::int32_t cancelled = c.request(request_fields("GET", "/watch"));
    const std::int32_t no_error = c.request(request_fields("GET", "/watch"));
    c.request(request_fields("GET", "/watch"));
    std::string bytes = c.take();
    nghttp2_submit_rst_stream(c.session(), NGHTTP2_FLAG_NONE, cancelled, NGHTTP2_CANCEL);
    nghttp2_submit_rst_stream(c.session(), NGHTTP2_FLAG_NONE, no_error, NGHTTP2_NO_ERROR);
    bytes += c.take();
    seed("regression-reset-with-no-error", 0x04, bytes);
  }
  {
    // Graceful shutdown while /big waits for window and /stream answers.
    Client c;
    c.settings();
    c.request(request_fields("GET", "/big"));
    std::string bytes = c.take();
    c.request(request_fields("GET", "/stream"));
    bytes += c.take();
    nghttp2_submit_window_update(c.session(), NGHTTP2_FLAG_NONE, 0, 100000);
    nghttp2_submit_window_update(c.session(), NGHTTP2_FLAG_NONE, 1, 100000);
    c.request(request_fields("GET", "/"));
    bytes += c.take();
    seed("shutdown-with-streams-open", 0x0e, bytes);
  }
  {
    Client c;
    c.settings();
    std::string body = "with trailers";
    const std::int32_t id =
        c.request(request_fields("POST", "/echo", {field("te", "trailers")}), &body);
    std::vector<nghttp2_nv> trailer = {field("x-checksum", "0")};
    nghttp2_submit_trailer(c.session(), id, trailer.data(), trailer.size());
    seed("echo-trailers", 0x03, c.take());
  }
  {
    // HEADERS, CONTINUATION, CONTINUATION: a client session splits a block only past
    // 16 KiB.
    Client c;
    c.settings();
    std::string bytes = c.take();
    const std::string block = hpack(request_fields("GET", "/stream", {field("x-a", "1")}));
    const std::size_t third = block.size() / 3;
    bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_STREAM, 1, block.substr(0, third));
    bytes += frame(NGHTTP2_CONTINUATION, 0, 1, block.substr(third, third));
    bytes += frame(NGHTTP2_CONTINUATION, NGHTTP2_FLAG_END_HEADERS, 1, block.substr(2 * third));
    seed("continuation", 0x02, bytes);
  }
  {
    // A PING of 7 bytes: a connection error, answered with GOAWAY(FRAME_SIZE_ERROR).
    Client c;
    c.settings();
    c.request(request_fields("GET", "/"));
    std::string bytes = c.take();
    bytes += frame(NGHTTP2_PING, 0, 0, "1234567");
    seed("bad-ping-size", 0x00, bytes);
  }
  {
    // A HEADERS padded and with priority fields, and a SETTINGS ack.
    Client c;
    c.settings();
    std::string bytes = c.take();
    std::string payload;
    payload.push_back(3);                       // pad length
    payload.append("\x00\x00\x00\x00\x10", 5);  // stream dependency 0, weight 16
    payload += hpack(request_fields("GET", "/"));
    payload.append(3, '\0');
    bytes += frame(NGHTTP2_HEADERS,
                   NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_PADDED |
                       NGHTTP2_FLAG_PRIORITY,
                   1, payload);
    bytes += frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, "");
    seed("padded-priority-headers", 0x00, bytes);
  }
  return ok ? 0 : 1;
}
