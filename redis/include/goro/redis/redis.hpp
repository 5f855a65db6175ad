// goro::redis — a Redis client for goroutines, as go-redis is to Go: straight-line
// blocking calls that park the calling goroutine, on a pool of connections that
// reconnects by itself.
//
//   goro::redis::Client redis({.address = "127.0.0.1:6379", .pool_size = 16});
//   auto set = redis.command(ctx, {"SET", "greeting", "hello", "EX", "60"});
//   auto got = redis.get(ctx, "greeting");           // Result<optional<string>, Error>
//   if (!got) return log(got.error().what());        // "redis: dial ...: Connection refused"
//   if (!*got) ...                                   // no such key
//
// Every call takes a Context: its cancellation or deadline ends a wait for a connection,
// a dial, a write or a read at once, with ctx.err(). Each call is also bounded by the
// client's own timeouts (Options). A connection whose exchange was cut short (a timeout,
// a cancellation, a reply refused) is closed, never reused with a reply still coming.
//
// A Redis error reply ("-ERR ...", "-WRONGTYPE ...") makes command() fail with
// errc::server_error and the server's words in Error::what(); the first word, the
// error's kind, is the field "prefix". In a pipeline each command's reply is kept as is:
// an error there is a Reply with is_error().
//
// Connections: at most Options::pool_size open at once, kept idle up to max_idle for
// idle_timeout; a call waits (under its Context) for one to come free. A connection
// taken from the idle list is checked first (has the server closed it?), and a call
// that fails on a reused connection because the server closed it (a restart) is tried
// once more on a new one. Dials that fail back off: after a failure the next dial waits
// (10 ms, doubling to Options::max_backoff), and calls meanwhile fail at once with the
// last dial error.
//
// Subscriptions (subscribe) hold a connection of their own and reconnect with the same
// back-off, subscribing again, until closed. Scripts (Script) run by EVALSHA and fall
// back to EVAL when the server does not have them. watch() runs an optimistic
// transaction (WATCH ... MULTI/EXEC) on one held connection. With Options::sentinel the
// client finds the master through Redis Sentinel and follows its failovers.
// Thread-safe: share one Client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <goro/base/error.hpp>
#include <goro/base/result.hpp>
#include <goro/redis/resp.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::redis {

// Errors of goro::redis itself ("goro.redis"); network errors pass through as they are
// (goro::net::errc::timeout, std::errc::connection_refused, ...), with what() saying
// which step failed.
enum class errc {
  server_error = 1,  // the server answered with an error reply
  protocol_error,    // what came back is not RESP, or is past ReplyLimits
  closed,            // the client (or the subscription) was closed
  tx_failed,         // a key watch() watched changed: the transaction did not run
};
const std::error_category& category() noexcept;
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

// Redis Sentinel: the master of a replicated set, found by asking its sentinels.
struct SentinelOptions {
  std::string master{};                  // the name the sentinels monitor it by
  std::vector<std::string> addresses{};  // the sentinels' "host:port", asked in order
  std::string password{};                // AUTH for the sentinels, when not empty
};

struct Options {
  // "host:port" (an IP address or a name), or a Unix socket: "unix:/path" or "/path".
  // Unused with sentinel.master set.
  std::string address = "127.0.0.1:6379";
  std::string username{};  // AUTH username password when password is set (ACL users)
  std::string password{};  // AUTH password when not empty
  int db = 0;            // SELECT db when not 0
  int pool_size = 10;    // connections open at once, at most
  // Idle connections kept, at most; unset: pool_size. Fewer than pool_size closes
  // connections whenever the load dips and dials them again when it comes back.
  std::optional<int> max_idle{};
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds dial_timeout{std::chrono::seconds(5)};
  std::chrono::milliseconds read_timeout{std::chrono::seconds(3)};   // per reply
  std::chrono::milliseconds write_timeout{std::chrono::seconds(3)};  // per request
  std::chrono::milliseconds max_backoff{std::chrono::milliseconds(500)};
  ReplyLimits limits{};
  // With master set, each dial asks the sentinels for the master's address (SENTINEL
  // get-master-addr-by-name) and checks it is one (ROLE). After a failover the
  // sentinels close the old master's connections; calls on them fail, and the pool
  // dials the new master.
  SentinelOptions sentinel{};
};

// Commands sent together on one connection, in one write, their replies read in order.
class Pipeline {
 public:
  Pipeline& add(std::initializer_list<std::string_view> words);
  Pipeline& add(std::span<const std::string_view> words);
  Pipeline& add(const std::vector<std::string>& words);
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }

 private:
  friend class Client;
  friend std::string transaction_wire(const Pipeline& p);
  std::string wire_;
  std::size_t count_ = 0;
};

// A Lua script run by its SHA-1 (EVALSHA), loaded by EVAL when the server lacks it.
class Script {
 public:
  explicit Script(std::string source);
  const std::string& source() const noexcept { return source_; }
  const std::string& sha1() const noexcept { return sha1_; }

 private:
  std::string source_, sha1_;
};

// A message of a subscription: the channel it was published on, the pattern that
// matched it (psubscribe; empty for subscribe) and what was published.
struct Message {
  std::string channel, pattern, payload;
};

// As goro::pg::PoolStats, so that one exporter serves both (http::metrics::export_pool).
struct PoolStats {
  int open = 0;                      // connections open now (idle and in use)
  int idle = 0;                      // of them, idle
  std::uint64_t connects = 0;        // dials made, ever (subscriptions' too)
  std::uint64_t connect_errors = 0;  // of them, failed
  std::uint64_t waits = 0;           // calls that waited for a connection to come free
  std::uint64_t discarded = 0;       // connections closed after a failed exchange
};

class Subscription;
class Watch;

class Client {
 public:
  explicit Client(Options options);
  // Closes the idle connections. No call may be running on it; subscriptions may outlive it.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // One command, its words binary-safe.
  Result<Reply, Error> command(const Context& ctx, std::initializer_list<std::string_view> words);
  Result<Reply, Error> command(const Context& ctx, std::span<const std::string_view> words);
  Result<Reply, Error> command(const Context& ctx, const std::vector<std::string>& words);

  // The commands of p in one exchange, a reply each (a Redis error is one of them).
  Result<std::vector<Reply>, Error> exec(const Context& ctx, const Pipeline& p);
  // p's commands as a transaction: MULTI, the commands, EXEC. The reply is EXEC's: an
  // array of the commands' replies. A command the server refuses to queue fails it all
  // (errc::server_error with the server's words), as EXEC would.
  Result<Reply, Error> transaction(const Context& ctx, const Pipeline& p);

  // EVALSHA script's SHA-1, or EVAL when the server does not have it (NOSCRIPT).
  Result<Reply, Error> eval(const Context& ctx, const Script& script,
                            std::span<const std::string_view> keys,
                            std::span<const std::string_view> args = {});

  // Typed shorthands.
  Result<std::optional<std::string>, Error> get(const Context& ctx, std::string_view key);
  // SET key value, with EX (whole seconds, or PX when not whole) when ttl is not zero.
  std::error_code set(const Context& ctx, std::string_view key, std::string_view value,
                      std::chrono::milliseconds ttl = {});
  Result<long long, Error> incr(const Context& ctx, std::string_view key);
  Result<long long, Error> del(const Context& ctx, std::initializer_list<std::string_view> keys);
  Result<long long, Error> publish(const Context& ctx, std::string_view channel,
                                   std::string_view message);

  // An optimistic transaction (go-redis' Watch): WATCH keys on a connection of the
  // pool, then fn, which reads through the Watch and ends with its transaction(); the
  // connection is unwatched and given back after. Returns fn's error: errc::tx_failed
  // when a watched key changed between WATCH and EXEC, and nothing ran (run it again).
  Error watch(const Context& ctx, std::initializer_list<std::string_view> keys,
              const std::function<Error(Watch&)>& fn);
  Error watch(const Context& ctx, std::span<const std::string_view> keys,
              const std::function<Error(Watch&)>& fn);

  // Subscribes to channels and patterns (PSUBSCRIBE) on a connection of its own;
  // returns once the server has confirmed them all.
  Result<std::unique_ptr<Subscription>, Error> subscribe(const Context& ctx,
                                                         std::vector<std::string> channels,
                                                         std::vector<std::string> patterns = {});

  PoolStats stats() const;

  struct State;  // redis/src/client.cpp

 private:
  std::shared_ptr<State> state_;
};

// The connection Client::watch holds for fn, its keys watched.
class Watch {
 public:
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // A command on the watched connection (the reads the transaction depends on).
  Result<Reply, Error> command(const Context& ctx, std::initializer_list<std::string_view> words);
  Result<Reply, Error> command(const Context& ctx, std::span<const std::string_view> words);
  // MULTI, p's commands, EXEC: EXEC's array of replies, errc::tx_failed when a watched
  // key changed (nothing ran), or the error of a command the server refused to queue.
  Result<Reply, Error> transaction(const Context& ctx, const Pipeline& p);

  struct Held;  // redis/src/watch.cpp

 private:
  friend class Client;
  explicit Watch(Held& held) noexcept : held_(held) {}
  Held& held_;
};

// Messages arrive on messages() until close() (or the Client's end); the connection
// reconnects and subscribes again when it fails, so messages published meanwhile are
// lost, as with any Redis subscription.
class Subscription {
 public:
  ~Subscription();  // close()
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  const Chan<Message>& messages() const noexcept { return messages_; }
  // How many times the connection was made again after failing.
  std::uint64_t reconnects() const noexcept;
  // Ends the subscription: the connection is closed and messages() closed after what
  // was received. Waits for the reading goroutine to end.
  void close();

  struct Loop;  // redis/src/client.cpp

 private:
  friend class Client;
  Subscription(std::shared_ptr<Loop> loop, Chan<Message> messages);
  std::shared_ptr<Loop> loop_;
  Chan<Message> messages_;
};

}  // namespace goro::redis

template <>
struct std::is_error_code_enum<goro::redis::errc> : std::true_type {};
