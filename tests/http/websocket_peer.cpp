// goro's side of the WebSocket conformance tests, driven by clients and servers nobody
// here wrote (websocket_python_test.py, websocket_node_test.js).
//
//   websocket_peer serve        serves on 127.0.0.1:<free port>, prints "listening PORT"
//   websocket_peer client URL   runs goro's client against an echo server at URL (the
//                               Python test's websockets server); prints "ok <case>" per
//                               case, exits 1 on the first that fails
//
// Routes of `serve`:
//   /echo        echoes every message; permessage-deflate on, subprotocols chat, superchat;
//                served by websocket::serve() (no goroutine between messages)
//   /echo-plain  echoes, without compression, from a read loop in the handler
//   /small       echoes messages of at most 1024 bytes (larger: close 1009)
//   /fragments   sends "fragmented" in three frames and a binary message in two, then echoes
//   /close?code=N&reason=R   closes at once with that code and reason
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/http/websocket.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/runtime.hpp>

namespace http = goro::http;
namespace ws = goro::http::websocket;

namespace {

void echo(ws::WebSocket& socket) {
  ws::Message m;
  while (!socket.read(m)) {
    if (socket.write(m.type, m.data)) return;
  }
}

http::Handler echo_route(ws::AcceptOptions options, bool served = false) {
  return [options, served](http::Request& req, http::ResponseWriter& w) {
    auto socket = ws::accept(req, w, options);
    if (!socket) return;
    if (!served) return echo(*socket);
    (void)ws::serve(std::make_shared<ws::WebSocket>(std::move(*socket)),
                    [](ws::WebSocket& s, ws::Message& m) { (void)s.write(m.type, m.data); });
  };
}

int serve() {
  return goro::run([]() -> int {
    http::Router r;
    ws::AcceptOptions echo_options;
    echo_options.compression.enabled = true;
    echo_options.subprotocols = {"chat", "superchat"};
    r.handle("GET /echo", echo_route(echo_options, true));
    r.handle("GET /echo-plain", echo_route({}));
    ws::AcceptOptions small;
    small.max_message_size = 1024;
    r.handle("GET /small", echo_route(small));
    r.handle("GET /fragments", [](http::Request& req, http::ResponseWriter& w) {
      auto socket = ws::accept(req, w);
      if (!socket) return;
      {
        ws::MessageWriter text = socket->writer(ws::MessageType::text);
        (void)text.write("frag");
        (void)text.write("men");
        (void)text.write("ted");
      }
      {
        ws::MessageWriter binary = socket->writer(ws::MessageType::binary);
        (void)binary.write(std::string("\x00\x01", 2));
        (void)binary.write(std::string("\x02\x03", 2));
      }
      echo(*socket);
    });
    r.handle("GET /close", [](http::Request& req, http::ResponseWriter& w) {
      auto socket = ws::accept(req, w);
      if (!socket) return;
      const int code = std::atoi(req.query("code").value_or("1000").c_str());
      (void)socket->close(static_cast<std::uint16_t>(code), req.query("reason").value_or(""));
    });
    auto listener = goro::net::listen("tcp", "127.0.0.1:0");
    if (!listener) {
      std::fprintf(stderr, "websocket_peer: listen: %s\n", listener.error().message().c_str());
      return 1;
    }
    std::printf("listening %u\n", static_cast<unsigned>(listener->addr().port()));
    std::fflush(stdout);
    http::Server server(r);
    server.serve(*listener);
    return 0;
  });
}

// The client cases; each prints "ok <name>" or the reason it failed.
class ClientRun {
 public:
  explicit ClientRun(std::string base) : base_(std::move(base)) {}

  bool check(bool ok, const char* name, const std::string& detail = {}) {
    if (ok) {
      std::printf("ok %s\n", name);
    } else {
      std::printf("FAIL %s %s\n", name, detail.c_str());
      failed_ = true;
    }
    std::fflush(stdout);
    return ok;
  }

  int run() {
    echo_cases(true);
    echo_cases(false);
    close_codes();
    invalid_utf8();
    oversize();
    return failed_ ? 1 : 0;
  }

 private:
  void echo_cases(bool compress) {
    ws::DialOptions options;
    options.compression.enabled = compress;
    options.compression.min_size = 0;
    options.subprotocols = {"chat"};
    auto socket = ws::dial(base_ + "/echo", options);
    if (!check(static_cast<bool>(socket), "dial",
               socket ? "" : socket.error().message()))
      return;
    check(socket->subprotocol() == "chat", "subprotocol", socket->subprotocol());
    check(socket->compression() == compress, compress ? "deflate agreed" : "no deflate");
    const std::string binary("\x00\xff\x10\x80", 4);
    const std::string large(200000, 'L');
    const std::string unicode = "héllo wörld ✓ 𝄞";
    bool ok = !socket->write_text("hello") && !socket->write_binary(binary) &&
              !socket->write_text(large) && !socket->write_text(unicode);
    auto a = socket->read(), b = socket->read(), c = socket->read(), d = socket->read();
    check(ok && a && a->data == "hello" && a->type == ws::MessageType::text && b &&
              b->data == binary && b->type == ws::MessageType::binary && c && c->data == large &&
              d && d->data == unicode,
          "echo text, binary, large, unicode");
    {
      ws::MessageWriter writer = socket->writer(ws::MessageType::text);
      ok = !writer.write("frag") && !writer.write("men") && !writer.write("ted") && !writer.close();
    }
    auto e = socket->read();
    check(ok && e && e->data == "fragmented", "fragmented message reassembled by the peer",
          e ? e->data : e.error().message());
    check(!socket->ping("are you there"), "ping");
    ok = !socket->write_text("after ping");
    auto f = socket->read();
    check(ok && f && f->data == "after ping", "pong consumed");
    check(!socket->close(ws::close_code::normal, "bye"), "close handshake");
  }

  void close_codes() {
    auto socket = ws::dial(base_ + "/close4001");
    if (!check(static_cast<bool>(socket), "dial /close4001")) return;
    auto m = socket->read();
    check(!m && ws::close_code_of(m.error()) == 4001 && socket->peer_close_reason() == "custom",
          "server close code and reason", m ? "a message" : m.error().message());
  }

  void invalid_utf8() {
    auto socket = ws::dial(base_ + "/invalid-utf8");
    if (!check(static_cast<bool>(socket), "dial /invalid-utf8")) return;
    auto m = socket->read();
    check(!m && m.error() == ws::errc::invalid_utf8, "invalid UTF-8 refused with 1007",
          m ? m->data : m.error().message());
  }

  void oversize() {
    auto socket = ws::dial(base_ + "/oversize");
    if (!check(static_cast<bool>(socket), "dial /oversize")) return;
    auto m = socket->read();
    check(!m && m.error() == ws::errc::message_too_big, "oversize message refused with 1009",
          m ? "a message" : m.error().message());
  }

  std::string base_;
  bool failed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "serve") return serve();
  if (argc == 3 && std::string(argv[1]) == "client") {
    std::string base = argv[2];
    return goro::run([&] { return ClientRun(base).run(); });
  }
  std::fprintf(stderr, "usage: websocket_peer serve | websocket_peer client ws://HOST:PORT\n");
  return 2;
}
