// goro::pg::Listener: LISTEN on a connection of its own, and a goroutine that reads it
// and hands each NOTIFY to the channel.
#include <mutex>

#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "conn.hpp"

namespace goro::pg {

struct Listener::Loop {
  std::unique_ptr<Conn> conn;  // the reader's, closed by it as it ends
  Chan<Notification> notifications{64};
  std::pair<Context, CancelFunc> stop = with_cancel(background());  // cancelled by close()
  WaitGroup reader;

  goro::Mutex mu;
  bool closed = false;  // (mu)

  // Delivers what arrives until close() or the connection fails.
  void read() {
    const Context& ctx = stop.first;
    bool stopped = false;
    while (!stopped) {
      while (PGnotify* n = PQnotifies(conn->pg)) {
        Notification note{n->relname, n->extra, n->be_pid};
        PQfreemem(n);
        if (goro::select(goro::send_case(notifications, std::move(note)),
                         goro::recv_case(ctx.done())) != 0) {
          stopped = true;
          break;
        }
      }
      if (stopped) break;
      if (conn->watch.wait(net::Interest::read, ctx)) break;
      if (PQconsumeInput(conn->pg) == 0) break;
    }
    conn.reset();
    notifications.close();
    reader.done();
  }
};

Result<std::unique_ptr<Listener>, Error> Pool::listen(const Context& ctx, std::string channel) {
  Result<std::unique_ptr<Conn>, Error> conn = connect_outside(*state_, ctx);
  if (!conn) return conn.error();
  char* quoted = PQescapeIdentifier((*conn)->pg, channel.data(), channel.size());
  if (quoted == nullptr) return (*conn)->failure("quoting the channel's name");
  const std::string command = "LISTEN " + std::string(quoted);
  PQfreemem(quoted);
  Result<ResultPtr, Error> r = (*conn)->run(ctx, command, {}, false);
  if (!r) return r.error();
  auto loop = std::make_shared<Listener::Loop>();
  loop->conn = std::move(*conn);
  loop->reader.add(1);
  goro::go([loop] { loop->read(); });
  return std::unique_ptr<Listener>(new Listener(loop, loop->notifications));
}

Listener::Listener(std::shared_ptr<Loop> loop, Chan<Notification> notifications)
    : loop_(std::move(loop)), notifications_(std::move(notifications)) {}

Listener::~Listener() { close(); }

void Listener::close() {
  {
    std::lock_guard lock(loop_->mu);
    if (loop_->closed) return;
    loop_->closed = true;
  }
  loop_->stop.second();
  loop_->reader.wait();
}

}  // namespace goro::pg
