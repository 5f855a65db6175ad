// goro-ws-chat: a chat room over WebSocket, with the page that joins it served by the same
// server.
//
//   $ ./goro-ws-chat --addr 127.0.0.1:8080
//   open http://127.0.0.1:8080/ in two browser tabs, pick names, type
//
//   GET /                 the chat page (HTML and JavaScript, no other files)
//   GET /ws?name=NAME     the room: every text message a member sends is broadcast to
//                         all members as "NAME: text"; joins and leaves are announced
//
// The room is the one of goro-chat (examples/chat), over WebSocket instead of lines of
// TCP: a goroutine owns the member list, and joining, leaving and saying are messages to
// it. Each member has a reader (the handler) and a writer goroutine that drains its own
// queue; a member that does not read loses messages (try_send into 64 places) and one
// whose writes stall for 10 s is dropped, so one slow browser never stalls the room.
// Messages are limited to 4 KiB (larger: close 1009) and compressed when the browser
// agrees (permessage-deflate). A shutdown (SIGTERM) closes every member with 1001
// "going away", which the page shows.
#include <goro/app.hpp>
#include <goro/goro.hpp>
#include <goro/http/websocket.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace http = goro::http;
namespace ws = goro::http::websocket;
using namespace std::chrono_literals;

namespace {

struct Member {
  std::string name;
  goro::Chan<std::string> outbox{64};
};
using MemberPtr = std::shared_ptr<Member>;

struct Room {
  goro::Chan<MemberPtr> join{0};
  goro::Chan<MemberPtr> leave{0};
  goro::Chan<std::string> say{64};

  // The room goroutine: the only owner of the member list.
  void run() {
    std::vector<MemberPtr> members;
    for (;;) {
      std::optional<MemberPtr> joined, left;
      std::optional<std::string> line;
      switch (goro::select(goro::recv_case(join, joined), goro::recv_case(leave, left),
                           goro::recv_case(say, line))) {
        case 0: members.push_back(*joined); break;
        case 1:
          std::erase(members, *left);
          (*left)->outbox.close();  // its writer goroutine drains and stops
          break;
        case 2:
          for (const MemberPtr& m : members) m->outbox.try_send(*line);
          break;
      }
    }
  }
};

// A display name from ?name=: UTF-8 (it travels in text messages), at most 32 bytes, no
// control characters (the page shows names as text, never as HTML).
std::string member_name(http::Request& req) {
  static std::atomic<int> guests{0};
  std::string name = req.query("name").value_or("");
  std::erase_if(name, [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
  if (name.size() > 32) name.resize(32);
  if (name.empty() || !ws::valid_utf8(name)) name = "guest-" + std::to_string(++guests);
  return name;
}

void serve_member(http::Request& req, http::ResponseWriter& w, Room& room) {
  ws::AcceptOptions options;
  options.max_message_size = 4096;
  options.compression.enabled = true;
  auto socket = ws::accept(req, w, options);
  if (!socket) return;  // not a WebSocket handshake: answered already
  auto me = std::make_shared<Member>();
  me->name = member_name(req);
  room.join.send(me);
  room.say.send(me->name + " joined");

  goro::WaitGroup writer;
  writer.add(1);
  goro::go([&] {
    while (auto line = me->outbox.recv()) {
      (void)socket->set_write_deadline(goro::net::deadline_after(10s));
      if (socket->write_text(*line)) {
        // The browser stopped reading or went away: wake the reader below.
        (void)socket->set_read_deadline(goro::net::deadline_after(0s));
        break;
      }
    }
    writer.done();
  });

  // Until the member leaves, the connection fails, or the server starts shutting down.
  const goro::Context stopping = http::shutdown_context(req);
  ws::Message m;
  while (!socket->read(m, stopping)) {
    if (m.type == ws::MessageType::text) room.say.send(me->name + ": " + m.data);
  }
  room.leave.send(me);  // closes the outbox: the writer returns
  writer.wait();
  if (stopping.cancelled()) (void)socket->close(ws::close_code::going_away, "server shutting down");
  room.say.send(me->name + " left");
}

constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>goro chat</title>
<style>
  body { font: 15px system-ui, sans-serif; max-width: 40em; margin: 2em auto; }
  #log { list-style: none; padding: 0.5em; height: 20em; overflow-y: auto; border: 1px solid #ccc; }
  #log li.event { color: #777; }
  form { display: flex; gap: 0.5em; margin-top: 0.5em; }
  #text { flex: 1; }
</style>
</head>
<body>
<h1>goro chat</h1>
<p>Status: <span id="status">connecting</span></p>
<ul id="log"></ul>
<form id="form"><input id="text" autocomplete="off" placeholder="say something" maxlength="2000">
<button id="send">Send</button></form>
<script>
  const params = new URLSearchParams(location.search);
  const name = params.get('name') || prompt('Your name?') || '';
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const socket = new WebSocket(scheme + '://' + location.host + '/ws?name=' + encodeURIComponent(name));
  const log = document.getElementById('log');
  const status = document.getElementById('status');
  function show(text, event) {
    const li = document.createElement('li');
    li.textContent = text;  // text, never HTML
    if (event) li.className = 'event';
    log.appendChild(li);
    log.scrollTop = log.scrollHeight;
  }
  socket.onopen = () => { status.textContent = 'connected'; };
  socket.onmessage = (e) => {
    show(e.data, / (joined|left)$/.test(e.data));
  };
  socket.onclose = (e) => {
    status.textContent = 'closed (' + e.code + (e.reason ? ' ' + e.reason : '') + ')';
  };
  function say(text) {
    if (text && socket.readyState === WebSocket.OPEN) socket.send(text);
  }
  document.getElementById('form').onsubmit = (e) => {
    e.preventDefault();
    const input = document.getElementById('text');
    say(input.value);
    input.value = '';
  };
</script>
</body>
</html>
)html";

}  // namespace

int main(int argc, char** argv) {
  goro::App app(argc, argv, {.name = "goro-ws-chat", .shutdown_timeout = 5s});
  return app.run([]() -> http::Handler {
    auto room = std::make_shared<Room>();
    goro::go([room] { room->run(); });
    http::Router r;
    r.handle("GET /{$}", [](http::Request&, http::ResponseWriter& w) {
      w.header().set("Content-Type", "text/html; charset=utf-8");
      w.write(kPage);
    });
    r.handle("GET /ws", [room](http::Request& req, http::ResponseWriter& w) {
      serve_member(req, w, *room);
    });
    return r;
  });
}
