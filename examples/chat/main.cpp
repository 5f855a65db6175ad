// goro-chat: a TCP chat room on goro::net, written the way Go's net package is used.
//
//   $ ./goro-chat 127.0.0.1:9000
//   $ nc 127.0.0.1 9000          # in several terminals; type lines
//
// Every connection is a goroutine that reads lines and hands them to the room; every
// client also has a writer goroutine that drains its own buffered channel to the socket.
// The room goroutine owns the member list, so joining, leaving and broadcasting are
// messages to it and no lock is needed. The server protects itself the way a real one
// must:
//   - a client silent for 5 minutes is disconnected (a read deadline before each read);
//   - a line longer than 1 KiB ends the connection with an error message;
//   - a client that does not read loses messages (try_send into its 64-line queue)
//     and a write stuck for 10 s ends it, so one slow client never stalls the room.
#include <goro/goro.hpp>

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace net = goro::net;
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

// Sends what lands in m's outbox until the room closes it ({}) or a write fails (its
// error: errc::timeout when the client has not read for 10 s, or a reset, ...).
std::error_code write_loop(net::Conn& conn, const MemberPtr& m) {
  for (;;) {
    auto line = m->outbox.recv();
    if (!line) return {};  // closed: the member left
    (void)conn.set_write_deadline(net::deadline_after(10s));
    if (auto w = conn.write(line->data(), line->size()); !w) return w.error();
  }
}

constexpr std::size_t kMaxLine = 1024;
const std::error_code kLineTooLong = std::make_error_code(std::errc::message_size);

// Reads lines from conn and says them in the room until the peer closes ({}), a read
// fails (its error: a timeout after 5 idle minutes, a reset, ...), a line is longer
// than kMaxLine (kLineTooLong), or the writer gave up on the client (errc::timeout).
std::error_code read_lines(net::Conn& conn, Room& room, const Member& me,
                           const std::atomic<bool>& writer_failed) {
  std::string pending;
  char buf[512];
  for (;;) {
    (void)conn.set_read_deadline(net::deadline_after(5min));
    // The writer sets writer_failed, then a deadline in the past; checked after our own
    // deadline, so that one of the two always stops this loop.
    if (writer_failed.load()) return net::errc::timeout;
    auto n = conn.read(buf, sizeof buf);
    if (!n) return n.error();
    if (*n == 0) return {};  // the peer closed
    pending.append(buf, *n);
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      if (nl > kMaxLine) return kLineTooLong;
      room.say.send(me.name + ": " + pending.substr(0, nl + 1));
      pending.erase(0, nl + 1);
    }
    if (pending.size() > kMaxLine) return kLineTooLong;
  }
}

void serve(net::Conn conn, std::shared_ptr<Room> room) {
  auto me = std::make_shared<Member>();
  me->name = conn.remote_addr().to_string();
  room->join.send(me);
  room->say.send(me->name + " joined\n");

  goro::WaitGroup writer;
  std::atomic<bool> writer_failed{false};
  std::error_code write_error;  // read after writer.wait()
  writer.add(1);
  goro::go([&] {
    write_error = write_loop(conn, me);
    if (write_error) {
      // The client stopped reading (or went away): wake our reader.
      writer_failed.store(true);
      (void)conn.set_read_deadline(net::deadline_after(0s));
    }
    writer.done();
  });

  std::error_code why = read_lines(conn, *room, *me, writer_failed);
  room->leave.send(me);  // closes the outbox: the writer returns
  writer.wait();
  if (why == kLineTooLong) {
    const std::string msg = "line too long (over 1024 bytes); goodbye\n";
    (void)conn.set_write_deadline(net::deadline_after(10s));
    (void)conn.write(msg.data(), msg.size());
    // Closing with unread input would send a reset, which can destroy the message
    // before the client reads it: half-close, then discard input for up to a second.
    (void)conn.shutdown_write();
    (void)conn.set_read_deadline(net::deadline_after(1s));
    char sink[512];
    while (auto n = conn.read(sink, sizeof sink)) {
      if (*n == 0) break;
    }
  }
  if (write_error) why = write_error;
  const char* reason = write_error && net::is_timeout(write_error) ? "dropped (not reading)"
                       : !why                                      ? "left"
                       : net::is_timeout(why)                      ? "timed out"
                                                                   : "dropped";
  room->say.send(me->name + " " + reason + "\n");
  std::fprintf(stderr, "%s %s%s%s\n", me->name.c_str(), reason, why ? ": " : "",
               why ? why.message().c_str() : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = argc > 1 ? argv[1] : "127.0.0.1:9000";
  return goro::run([&]() -> int {
    auto ln = net::listen("tcp", address);
    if (!ln) {
      std::fprintf(stderr, "goro-chat: listen %s: %s\n", address.c_str(),
                   ln.error().message().c_str());
      return 1;
    }
    std::fprintf(stderr, "goro-chat on %s\n", ln->addr().to_string().c_str());
    auto room = std::make_shared<Room>();
    goro::go([room] { room->run(); });
    for (;;) {
      auto conn = ln->accept();
      if (!conn) {
        std::fprintf(stderr, "goro-chat: accept: %s\n", conn.error().message().c_str());
        return 1;
      }
      goro::go([c = std::move(*conn), room]() mutable { serve(std::move(c), room); });
    }
  });
}
