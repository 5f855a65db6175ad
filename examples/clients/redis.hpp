// redis.hpp — Redis from goroutines: hiredis' asynchronous context, its event hooks
// served by goroutines that wait on goro::net::FdWatch.
//
//   auto redis = redis::Client::connect_unix("/run/redis/redis.sock");
//   redis::Reply r = redis->command({"BLPOP", "jobs", "0.1"}, ctx);  // parks, 100 ms
//   if (r.is_nil()) ...                                               // timed out
//
// hiredis' async API is the one an event library drives (its adapters/ folder has
// libevent, libuv, ...). This is such an adapter, and a straight-line command() over it:
//  - the context's ev hooks (addRead/delRead/addWrite/delWrite) only record what hiredis
//    wants and wake the goroutine concerned; cleanup, called just before hiredis closes
//    the socket, releases the watch, so a parked wait returns and the socket is
//    unregistered while it is still open;
//  - a reader goroutine waits for readable while hiredis wants to read and calls
//    redisAsyncHandleRead, which runs the reply callbacks; a writer goroutine does the
//    same for writable and redisAsyncHandleWrite, needed only when a command did not
//    fit in the socket at once (command() writes it itself first);
//  - a goro::Mutex is held around every call into hiredis: the context is not
//    thread-safe, and goroutines run on several threads.
// hiredis reads once (16 KiB) per readiness, not until EAGAIN, so the watch is
// level-triggered (FdWatch's default).
//
// command() may be called by many goroutines at once on one Client: their commands are
// pipelined on the connection and each gets its own reply. A context's cancellation ends
// the wait at once; the command still runs on the server and its reply is dropped.
// Header-only: include it and link hiredis and goro::net. Written against hiredis 0.14
// (Debian 12), whose async context has no timers: a connect or a command has no
// timeout of its own, use a context's deadline.
#pragma once

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <goro/net/wait_fd.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/cond.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace redis {

// A reply, copied out of hiredis' (which it frees when the callback returns).
struct Reply {
  int type = 0;           // REDIS_REPLY_STRING, _ARRAY, _INTEGER, _NIL, _STATUS, _ERROR; 0: none
  std::string str;        // STRING, STATUS, ERROR
  long long integer = 0;  // INTEGER
  std::vector<Reply> elements;  // ARRAY
  std::string error;            // no reply (type 0): the connection failed or closed, or ctx

  // A reply that is not a Redis error.
  bool ok() const noexcept { return type != 0 && type != REDIS_REPLY_ERROR; }
  bool is_nil() const noexcept { return type == REDIS_REPLY_NIL; }

  static Reply failed(std::string why) {
    Reply r;
    r.error = std::move(why);
    return r;
  }
  static Reply from(const redisReply* r) {
    Reply out;
    out.type = r->type;
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
      case REDIS_REPLY_ERROR: out.str.assign(r->str, r->len); break;
      case REDIS_REPLY_INTEGER: out.integer = r->integer; break;
      case REDIS_REPLY_ARRAY:
        for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(from(r->element[i]));
        break;
      default: break;
    }
    return out;
  }
};

class Client {
 public:
  // Connects to a Unix socket, or to an IP address and port. Call on a goroutine. The
  // connect completes in the background: a failure shows in the first command's reply.
  static std::unique_ptr<Client> connect_unix(const std::string& path) {
    return attach(redisAsyncConnectUnix(path.c_str()));
  }
  static std::unique_ptr<Client> connect(const std::string& ip, int port) {
    return attach(redisAsyncConnect(ip.c_str(), port));
  }

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Disconnects (commands still waiting get a failed reply) and waits for the reader
  // and writer goroutines to end. Call on a goroutine.
  ~Client() {
    {
      std::lock_guard lock(loop_->mu);
      if (loop_->ac != nullptr) redisAsyncFree(loop_->ac);
    }
    loop_->pumps.wait();
  }

  // Whether the connection is still up (it may have failed or been closed since).
  bool connected() const {
    std::lock_guard lock(loop_->mu);
    return loop_->ac != nullptr;
  }

  // Sends a command (its words, binary-safe) and parks until its reply, or until ctx is
  // cancelled (then a failed Reply with ctx's message).
  Reply command(std::initializer_list<std::string_view> args,
                const goro::Context& ctx = goro::background()) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    goro::Chan<Reply> done(1);
    {
      std::lock_guard lock(loop_->mu);
      if (loop_->ac == nullptr) return Reply::failed(loop_->why_closed);
      // The callback gets its own handle of the channel, and frees it.
      auto* handle = new goro::Chan<Reply>(done);
      if (redisAsyncCommandArgv(loop_->ac, on_reply, handle, static_cast<int>(argv.size()),
                                argv.data(), lens.data()) != REDIS_OK) {
        delete handle;
        return Reply::failed(loop_->ac->errstr[0] != '\0' ? loop_->ac->errstr : "not connected");
      }
      // Write it now rather than wake the writer: usually it all fits in the socket.
      redisAsyncHandleWrite(loop_->ac);
    }
    std::optional<Reply> reply;
    if (goro::select(goro::recv_case(done, reply), goro::recv_case(ctx.done())) != 0) {
      return Reply::failed(ctx.err().message());
    }
    return std::move(*reply);
  }

 private:
  // What the hooks and the goroutines share. mu is held around every hiredis call, so
  // the hooks (which hiredis calls from inside them) run with it held.
  struct Loop {
    goro::Mutex mu;
    redisAsyncContext* ac = nullptr;  // (mu) null once hiredis has freed it
    goro::net::FdWatch watch;         // on ac's socket until the cleanup hook
    bool want_read = false;           // (mu)
    bool want_write = false;          // (mu)
    std::string why_closed;           // (mu)
    goro::Cond changed;               // the wants or ac changed
    goro::WaitGroup pumps;            // the reader and the writer goroutines
  };

  explicit Client(std::shared_ptr<Loop> loop) : loop_(std::move(loop)) {}

  static std::unique_ptr<Client> attach(redisAsyncContext* ac) {
    auto loop = std::make_shared<Loop>();
    if (ac == nullptr) {
      loop->why_closed = "out of memory";
      return std::unique_ptr<Client>(new Client(loop));
    }
    if (ac->err != 0) {
      loop->why_closed = ac->errstr;
      redisAsyncFree(ac);
      return std::unique_ptr<Client>(new Client(loop));
    }
    auto watch = goro::net::FdWatch::open(ac->c.fd);
    if (!watch) {
      loop->why_closed = "watching the socket: " + watch.error().message();
      redisAsyncFree(ac);
      return std::unique_ptr<Client>(new Client(loop));
    }
    loop->watch = std::move(*watch);
    loop->ac = ac;
    ac->ev.data = loop.get();
    ac->ev.addRead = [](void* p) { want(p, &Loop::want_read, true); };
    ac->ev.delRead = [](void* p) { want(p, &Loop::want_read, false); };
    ac->ev.addWrite = [](void* p) { want(p, &Loop::want_write, true); };
    ac->ev.delWrite = [](void* p) { want(p, &Loop::want_write, false); };
    ac->ev.cleanup = [](void* p) {
      auto* l = static_cast<Loop*>(p);
      if (l->why_closed.empty()) {
        l->why_closed = l->ac->errstr[0] != '\0' ? l->ac->errstr : "connection closed";
      }
      l->ac = nullptr;
      l->watch.release();  // before hiredis closes the socket; wakes a parked pump
      l->changed.broadcast();
    };
    loop->pumps.add(2);
    goro::go([loop] { pump(*loop, goro::net::Interest::read); });
    goro::go([loop] { pump(*loop, goro::net::Interest::write); });
    return std::unique_ptr<Client>(new Client(loop));
  }

  static void want(void* p, bool Loop::*flag, bool on) {
    auto* l = static_cast<Loop*>(p);
    if (l->*flag == on) return;
    l->*flag = on;
    if (on) l->changed.broadcast();
  }

  // The reader (interest read) or the writer: waits until hiredis wants that
  // direction, then until the socket is ready, then lets hiredis handle it.
  static void pump(Loop& l, goro::net::Interest interest) {
    const bool read = interest == goro::net::Interest::read;
    std::unique_lock lock(l.mu);
    for (;;) {
      l.changed.wait(lock, [&] { return l.ac == nullptr || (read ? l.want_read : l.want_write); });
      if (l.ac == nullptr) break;
      lock.unlock();
      const std::error_code ec = l.watch.wait(interest);
      lock.lock();
      // Freed meanwhile: the cleanup hook released the watch (the only way a wait on a
      // live watch fails, as neither a deadline nor a context is given).
      if (l.ac == nullptr || ec) break;
      // May run reply callbacks, and free the context (the server closed).
      if (read) {
        redisAsyncHandleRead(l.ac);
      } else {
        redisAsyncHandleWrite(l.ac);
      }
    }
    lock.unlock();
    l.pumps.done();
  }

  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
    std::unique_ptr<goro::Chan<Reply>> done(static_cast<goro::Chan<Reply>*>(privdata));
    if (reply == nullptr) {
      // hiredis is freeing the context with the command unanswered.
      done->send(Reply::failed(ac->errstr[0] != '\0' ? ac->errstr : "connection closed"));
    } else {
      done->send(Reply::from(static_cast<const redisReply*>(reply)));
    }
  }

  std::shared_ptr<Loop> loop_;
};

}  // namespace redis
