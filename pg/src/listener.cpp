// goro::pg::Listener: LISTEN on a connection of its own, and a goroutine that reads it,
// hands each NOTIFY to the channel, and makes the connection again when it breaks.
#include <atomic>
#include <mutex>

#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "conn.hpp"

namespace goro::pg {

struct Listener::Loop {
  std::shared_ptr<Pool::State> pool;
  std::string command;         // LISTEN "channel"
  std::unique_ptr<Conn> conn;  // the reader's, closed by it as it ends
  Chan<Notification> notifications{64};
  std::pair<Context, CancelFunc> stop = with_cancel(background());  // cancelled by close()
  WaitGroup reader;
  std::atomic<std::uint64_t> reconnects{0};

  goro::Mutex mu;
  bool closed = false;  // (mu)

  // A connection listening, or why not.
  static Result<std::unique_ptr<Conn>, Error> listening(Pool::State& pool, const Context& ctx,
                                                        const std::string& command) {
    Result<std::unique_ptr<Conn>, Error> conn = connect_outside(pool, ctx);
    if (!conn) return conn;
    Result<ResultPtr, Error> r = (*conn)->run(ctx, command, {}, false);
    if (!r) return r.error();
    return conn;
  }

  // Delivers what arrives on conn until it breaks or close().
  void deliver() {
    const Context& ctx = stop.first;
    for (;;) {
      while (PGnotify* n = PQnotifies(conn->pg)) {
        Notification note{n->relname, n->extra, n->be_pid};
        PQfreemem(n);
        if (goro::select(goro::send_case(notifications, std::move(note)),
                         goro::recv_case(ctx.done())) != 0)
          return;
      }
      if (conn->watch.wait(net::Interest::read, ctx)) return;
      if (PQconsumeInput(conn->pg) == 0) return;
    }
  }

  // Until close(): deliver, and when the connection breaks, connect and LISTEN again
  // after a pause that grows while the server stays away.
  void read() {
    const Context& ctx = stop.first;
    int failures = 0;
    while (!ctx.err()) {
      deliver();
      conn.reset();
      while (!conn && !ctx.err()) {
        const auto pause = backoff(failures++, options_of(*pool).max_backoff);
        if (goro::select(goro::recv_case(ctx.done()), goro::timeout_case(pause)) == 0) break;
        Result<std::unique_ptr<Conn>, Error> again = listening(*pool, ctx, command);
        if (again) {
          conn = std::move(*again);
          failures = 0;
          reconnects.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    conn.reset();
    notifications.close();
    reader.done();
  }
};

Result<std::unique_ptr<Listener>, Error> Pool::listen(const Context& ctx, std::string channel) {
  // Quoted as an identifier by libpq's rules, which need a connection to ask.
  Result<std::unique_ptr<Conn>, Error> first = connect_outside(*state_, ctx);
  if (!first) return first.error();
  char* quoted = PQescapeIdentifier((*first)->pg, channel.data(), channel.size());
  if (quoted == nullptr) return (*first)->failure("quoting the channel's name");
  auto loop = std::make_shared<Listener::Loop>();
  loop->pool = state_;
  loop->command = "LISTEN " + std::string(quoted);
  PQfreemem(quoted);
  Result<ResultPtr, Error> r = (*first)->run(ctx, loop->command, {}, false);
  if (!r) return r.error();
  loop->conn = std::move(*first);
  loop->reader.add(1);
  goro::go([loop] { loop->read(); });
  return std::unique_ptr<Listener>(new Listener(loop, loop->notifications));
}

Listener::Listener(std::shared_ptr<Loop> loop, Chan<Notification> notifications)
    : loop_(std::move(loop)), notifications_(std::move(notifications)) {}

Listener::~Listener() { close(); }

std::uint64_t Listener::reconnects() const noexcept {
  return loop_->reconnects.load(std::memory_order_relaxed);
}

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
