// goro::redis internals: a connection with its read buffer (Link) and the pool of them
// (Client::State), shared by the client's calls (client.cpp), subscriptions
// (subscription.cpp), watched transactions (watch.cpp) and Sentinel (sentinel.cpp).
#pragma once

#include <goro/redis/redis.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <goro/net/dial.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::redis {

using Clock = std::chrono::steady_clock;

// The server closed the connection: no reply will come.
inline const std::error_code kServerClosed = std::make_error_code(std::errc::connection_reset);

inline std::pair<std::string_view, std::string> network_of(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return {"unix", address.substr(5)};
  if (!address.empty() && address[0] == '/') return {"unix", address};
  return {"tcp", address};
}

// A Redis error reply as an Error: the server's words, and their first word as "prefix".
Error server_error(const std::string& words);

// One connection and the bytes read from it but not yet parsed.
struct Link {
  net::Conn conn;
  std::string in;
  std::size_t pos = 0;  // in[pos..] is unparsed
  Clock::time_point last_used{};
  std::uint64_t generation = 0;  // Client::State::generation when it was dialed

  // Reads what the server sent next after the unparsed bytes, first dropping the parsed
  // ones when they are all or most of the buffer. kServerClosed at the end of the stream.
  std::error_code read_more() {
    if (pos == in.size()) {
      in.clear();
      pos = 0;
    } else if (pos > 0 && pos >= in.size() / 2) {
      in.erase(0, pos);
      pos = 0;
    }
    const std::size_t have = in.size();
    in.resize(have + std::max<std::size_t>(16 * 1024, have));
    Result<std::size_t> n = conn.read(in.data() + have, in.size() - have);
    in.resize(have + (n ? *n : 0));
    if (!n) return n.error();
    if (*n == 0) return kServerClosed;
    return {};
  }

  // Writes wire, then reads count replies into out. std::error_code: ctx's, the
  // network's, kServerClosed, or errc::protocol_error with *why set.
  std::error_code exchange(const Options& o, const std::string& wire, std::size_t count,
                           std::vector<Reply>& out, std::string* why) {
    if (std::error_code ec = conn.set_write_deadline(net::deadline_after(o.write_timeout)))
      return ec;
    std::size_t sent = 0;
    while (sent < wire.size()) {
      Result<std::size_t> n = conn.write(wire.data() + sent, wire.size() - sent);
      if (!n) return n.error();
      sent += *n;
    }
    ReplyParser parser(o.limits);
    for (std::size_t i = 0; i < count; ++i) {
      if (std::error_code ec = conn.set_read_deadline(net::deadline_after(o.read_timeout)))
        return ec;
      for (;;) {
        ReplyParser::Parsed p = parser.parse(std::string_view(in).substr(pos));
        if (p.status == ReplyParser::Status::done) {
          pos += p.used;
          out.push_back(std::move(p.reply));
          break;
        }
        if (p.status == ReplyParser::Status::bad) {
          *why = std::move(p.why);
          return errc::protocol_error;
        }
        if (std::error_code ec = read_more()) return ec;
      }
    }
    if (pos == in.size()) {
      in.clear();
      pos = 0;
    }
    return {};
  }
};

// The pause after failures dials that failed in a row: 10 ms, doubling, at most max.
inline std::chrono::milliseconds backoff(int failures, std::chrono::milliseconds max) {
  return std::min(max, std::chrono::milliseconds(10LL << std::min(failures, 16)));
}

// MULTI, p's commands, EXEC, in one write (p.size() + 2 replies); and what they mean:
// EXEC's reply, the refusal of a command to queue, or errc::tx_failed for a nil EXEC
// (a watched key changed). client.cpp.
std::string transaction_wire(const Pipeline& p);
Result<Reply, Error> transaction_reply(std::vector<Reply>& replies);

// The master's address ("host:port") as the first of Options::sentinel's sentinels
// that answers knows it. sentinel.cpp.
Result<std::string, Error> master_from_sentinels(const Options& opt, const Context& ctx);

// Follows the sentinels' +switch-master announcements for the client's master: each
// switch makes every connection dialed before it stale (State::generation), so the pool
// drops them instead of writing to a demoted master until the sentinel gets round to
// closing them (its next look at the old master, up to 10 s later). Runs on a goroutine
// of its own from the first dial until stop(). sentinel.cpp.
class SwitchFollower {
 public:
  explicit SwitchFollower(Client::State& state) : state_(state) {}
  // Starts following, once; on a goroutine.
  void start();
  // Ends it and waits for its goroutine.
  void stop();

 private:
  void follow();
  Client::State& state_;
  goro::Mutex mu_;
  bool started_ = false;       // (mu_)
  bool stopped_ = false;       // (mu_)
  net::Conn* conn_ = nullptr;  // (mu_) the subscription's, closed by stop()
  Chan<char> stop_;            // closed by stop()
  WaitGroup done_;
};

struct Client::State {
  explicit State(Options o)
      : opt(std::move(o)),
        max_idle(opt.max_idle.value_or(opt.pool_size)),
        slots(static_cast<std::size_t>(std::max(1, opt.pool_size))) {}

  const Options opt;
  const int max_idle;
  Chan<char> slots;  // a token per connection in use or being dialed

  // A goro::Mutex, not a std::mutex: a goroutine preempted while holding it must not
  // block the thread of the next goroutine that wants it.
  mutable goro::Mutex mu;
  std::vector<std::unique_ptr<Link>> idle;  // (mu) newest last
  int open = 0;                             // (mu) idle, in use and being dialed
  bool closed = false;                      // (mu)
  int dial_failures = 0;                    // (mu) in a row
  Clock::time_point next_dial{};            // (mu) no dial before this after failures
  Error last_dial_error;                    // (mu)

  std::atomic<std::uint64_t> connects{0}, connect_errors{0}, waits{0}, discarded{0};
  // Bumped at each +switch-master of a Sentinel client's master: a connection of an
  // older generation is closed rather than used again.
  std::atomic<std::uint64_t> generation{0};
  SwitchFollower follower{*this};

  bool superseded(const Link& l) const {
    return l.generation != generation.load(std::memory_order_acquire);
  }

  // Where the client connects, in its errors: the address, or with Sentinel the
  // master's name.
  std::string where() const {
    return opt.sentinel.master.empty() ? opt.address : "master " + opt.sentinel.master;
  }

  // "redis: <step> <where>: <why, or ec's message>".
  Error wrap(std::error_code ec, const char* step, const std::string& why = {}) const {
    std::string words = "redis: " + std::string(step) + " " + where() + ": ";
    words += why.empty() ? ec.message() : why;
    return Error(ec, std::move(words));
  }

  // A new connection, authenticated and on its database. With Sentinel, to the master
  // the sentinels name, and asked (ROLE) whether it is one: a sentinel that has not yet
  // seen a failover through names the old master, which may be a replica by now.
  Result<std::unique_ptr<Link>, Error> dial(const Context& ctx) {
    const bool sentinel = !opt.sentinel.master.empty();
    std::string address = opt.address;
    connects.fetch_add(1, std::memory_order_relaxed);
    // Read before asking: a switch announced meanwhile makes this connection stale.
    const std::uint64_t generation_now = generation.load(std::memory_order_acquire);
    if (sentinel) {
      follower.start();
      Result<std::string, Error> master = master_from_sentinels(opt, ctx);
      if (!master) return master.error();
      address = *master;
    }
    const auto [network, path] = network_of(address);
    Result<net::Conn> c = net::dial(network, path, opt.dial_timeout, ctx);
    if (!c) return wrap(c.error(), "dial", sentinel ? address + ": " + c.error().message() : "");
    auto link = std::make_unique<Link>();
    link->conn = std::move(*c);
    link->generation = generation_now;
    if (network == "tcp") (void)link->conn.set_nodelay(true);
    std::string wire;
    std::size_t count = 0;
    if (!opt.password.empty()) {
      if (opt.username.empty()) {
        append_command(wire, {"AUTH", opt.password});
      } else {
        append_command(wire, {"AUTH", opt.username, opt.password});
      }
      ++count;
    }
    if (opt.db != 0) {
      const std::string db = std::to_string(opt.db);
      append_command(wire, {"SELECT", db});
      ++count;
    }
    if (sentinel) {
      append_command(wire, {"ROLE"});
      ++count;
    }
    if (count > 0) {
      std::vector<Reply> replies;
      std::string why;
      const std::error_code ec = net::with_context(link->conn, net::IoMode::both, ctx, [&] {
        return link->exchange(opt, wire, count, replies, &why);
      });
      if (ec) return wrap(ec, "setting up a connection to", why);
      for (const Reply& r : replies) {
        if (r.is_error()) return server_error(r.str);
      }
      if (sentinel) {
        const Reply& role = replies.back();
        const bool master = role.is_array() && !role.elements.empty() &&
                            role.elements[0].is_string() && role.elements[0].str == "master";
        if (!master)
          return wrap(std::make_error_code(std::errc::connection_refused), "dial",
                      address + " is not the master (yet): a failover is under way");
      }
    }
    return link;
  }

  // A connection for one exchange, and whether it was idle before (reused).
  Result<std::unique_ptr<Link>, Error> checkout(const Context& ctx, bool* reused) {
    if (!slots.try_send('x')) {
      waits.fetch_add(1, std::memory_order_relaxed);
      if (goro::select(goro::send_case(slots, 'x'), goro::recv_case(ctx.done())) != 0)
        return wrap(ctx.err(), "waiting for a connection to");
    }
    std::vector<std::unique_ptr<Link>> stale;
    std::unique_ptr<Link> link;
    {
      std::lock_guard lock(mu);
      if (closed) {
        (void)slots.try_recv();
        return Error(errc::closed, "redis: the client is closed");
      }
      const auto now = Clock::now();
      while (!idle.empty()) {
        std::unique_ptr<Link> l = std::move(idle.back());
        idle.pop_back();
        // Closed by the server (a restart, its idle timeout) or idle too long.
        if (now - l->last_used > opt.idle_timeout || l->conn.peer_closed() || superseded(*l)) {
          stale.push_back(std::move(l));
          --open;
          continue;
        }
        link = std::move(l);
        break;
      }
      if (!link) {
        if (dial_failures > 0 && now < next_dial) {
          (void)slots.try_recv();
          return last_dial_error;
        }
        ++open;
      }
    }
    discarded.fetch_add(stale.size(), std::memory_order_relaxed);
    stale.clear();  // closes them, outside the lock
    *reused = static_cast<bool>(link);
    if (link) return link;
    Result<std::unique_ptr<Link>, Error> fresh = dial(ctx);
    std::lock_guard lock(mu);
    if (!fresh) {
      --open;
      connect_errors.fetch_add(1, std::memory_order_relaxed);
      // A cancelled call says nothing about the server.
      if (!ctx.err()) {
        ++dial_failures;
        next_dial = Clock::now() + backoff(dial_failures - 1, opt.max_backoff);
        last_dial_error = fresh.error();
      }
      (void)slots.try_recv();
      return fresh;
    }
    dial_failures = 0;
    return fresh;
  }

  // Gives link back: to the idle list when its exchange completed, else closed.
  void checkin(std::unique_ptr<Link> link, bool healthy) {
    {
      std::lock_guard lock(mu);
      if (healthy && !closed && !superseded(*link) && static_cast<int>(idle.size()) < max_idle) {
        link->last_used = Clock::now();
        idle.push_back(std::move(link));
      } else {
        --open;
      }
    }
    if (link) {
      if (!healthy) discarded.fetch_add(1, std::memory_order_relaxed);
      link.reset();
    }
    (void)slots.try_recv();
  }

  // wire's count replies, on a pooled connection.
  Result<std::vector<Reply>, Error> run(const Context& ctx, const std::string& wire,
                                        std::size_t count) {
    for (int attempt = 0;; ++attempt) {
      bool reused = false;
      Result<std::unique_ptr<Link>, Error> link = checkout(ctx, &reused);
      if (!link) return link.error();
      std::vector<Reply> replies;
      replies.reserve(count);
      std::string why;
      Link& l = **link;
      const std::error_code ec = net::with_context(l.conn, net::IoMode::both, ctx, [&] {
        return l.exchange(opt, wire, count, replies, &why);
      });
      checkin(std::move(*link), !ec);
      if (!ec) return replies;
      // A connection the server closed while idle (a restart) fails at once: once more,
      // on a new one. Nothing of a reply came, so the server did not see the command.
      const bool server_went = ec == kServerClosed || ec == std::errc::broken_pipe ||
                               ec == std::errc::connection_reset;
      if (reused && server_went && replies.empty() && attempt == 0 && !ctx.err()) continue;
      return wrap(ec, ec == errc::protocol_error ? "reading a reply from" : "talking to", why);
    }
  }
};

}  // namespace goro::redis
