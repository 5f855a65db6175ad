// goro::redis::Client: a pool of net::Conn, each exchange a write of whole commands and
// a read of their replies through ReplyParser, under the call's Context and the
// client's timeouts. See <goro/redis/redis.hpp> for what a caller sees.
#include <goro/redis/redis.hpp>

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <goro/net/dial.hpp>
#include <goro/net/stream.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::redis {

namespace {

using Clock = std::chrono::steady_clock;

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.redis"; }
  std::string message(int c) const override {
    switch (static_cast<errc>(c)) {
      case errc::server_error: return "the Redis server answered with an error";
      case errc::protocol_error: return "malformed Redis reply";
      case errc::closed: return "Redis client closed";
    }
    return "unknown goro.redis error";
  }
};

// The server closed the connection: no reply will come.
const std::error_code kServerClosed = std::make_error_code(std::errc::connection_reset);

std::pair<std::string_view, std::string> network_of(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return {"unix", address.substr(5)};
  if (!address.empty() && address[0] == '/') return {"unix", address};
  return {"tcp", address};
}

// A Redis error reply as an Error: the server's words, and their first word as "prefix".
Error server_error(const std::string& words) {
  const std::string prefix = words.substr(0, words.find(' '));
  return Error(errc::server_error, words, {{"prefix", prefix}});
}

// One connection and the bytes read from it but not yet parsed.
struct Link {
  net::Conn conn;
  std::string in;
  std::size_t pos = 0;  // in[pos..] is unparsed
  Clock::time_point last_used{};

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
std::chrono::milliseconds backoff(int failures, std::chrono::milliseconds max) {
  return std::min(max, std::chrono::milliseconds(10LL << std::min(failures, 16)));
}

std::string sha1_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha1(), nullptr);
  std::string hex;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < len; ++i) {
    hex += kDigits[md[i] >> 4];
    hex += kDigits[md[i] & 15];
  }
  return hex;
}

}  // namespace

const std::error_category& category() noexcept {
  static const Category c;
  return c;
}

// ---------------------------------------------------------------------------------------
// The pool.

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
  // (mu) calls that wait for a slot, or have one and have not yet looked at the idle
  // list: a connection given back while any does is kept for them whatever max_idle
  // says, else a burst of check-ins closes connections that the waiters, woken but not
  // yet run, would have to dial again.
  int waiting = 0;
  bool closed = false;                      // (mu)
  int dial_failures = 0;                    // (mu) in a row
  Clock::time_point next_dial{};            // (mu) no dial before this after failures
  Error last_dial_error;                    // (mu)

  std::atomic<std::uint64_t> dials{0}, dial_errors{0}, waits{0}, discarded{0};

  Error wrap(std::error_code ec, const char* step, const std::string& why = {}) const {
    std::string words = "redis: " + std::string(step) + " " + opt.address + ": ";
    words += why.empty() ? ec.message() : why;
    return Error(ec, std::move(words));
  }

  // A new connection, authenticated and on its database.
  Result<std::unique_ptr<Link>, Error> dial(const Context& ctx) {
    const auto [network, path] = network_of(opt.address);
    Result<net::Conn> c = net::dial(network, path, opt.dial_timeout, ctx);
    dials.fetch_add(1, std::memory_order_relaxed);
    if (!c) return wrap(c.error(), "dial");
    auto link = std::make_unique<Link>();
    link->conn = std::move(*c);
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
    }
    return link;
  }

  // A connection for one exchange, and whether it was idle before (reused).
  Result<std::unique_ptr<Link>, Error> checkout(const Context& ctx, bool* reused) {
    const bool waited = !slots.try_send('x');
    if (waited) {
      waits.fetch_add(1, std::memory_order_relaxed);
      {
        std::lock_guard lock(mu);
        ++waiting;
      }
      if (goro::select(goro::send_case(slots, 'x'), goro::recv_case(ctx.done())) != 0) {
        std::lock_guard lock(mu);
        --waiting;
        return wrap(ctx.err(), "waiting for a connection to");
      }
    }
    std::vector<std::unique_ptr<Link>> stale;
    std::unique_ptr<Link> link;
    {
      std::lock_guard lock(mu);
      if (waited) --waiting;
      if (closed) {
        (void)slots.try_recv();
        return Error(errc::closed, "redis: the client is closed");
      }
      const auto now = Clock::now();
      while (!idle.empty()) {
        std::unique_ptr<Link> l = std::move(idle.back());
        idle.pop_back();
        // Closed by the server (a restart, its idle timeout) or idle too long.
        if (now - l->last_used > opt.idle_timeout || l->conn.peer_closed()) {
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
      dial_errors.fetch_add(1, std::memory_order_relaxed);
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
      const int kept = static_cast<int>(idle.size());
      if (healthy && !closed && (kept < max_idle || kept < waiting)) {
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

Client::Client(Options options) : state_(std::make_shared<State>(std::move(options))) {}

Client::~Client() {
  std::vector<std::unique_ptr<Link>> idle;
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    idle.swap(state_->idle);
    state_->open -= static_cast<int>(idle.size());
  }
}

Result<Reply, Error> Client::command(const Context& ctx, std::span<const std::string_view> words) {
  std::string wire;
  append_command(wire, words);
  Result<std::vector<Reply>, Error> r = state_->run(ctx, wire, 1);
  if (!r) return r.error();
  Reply& reply = r->front();
  if (reply.is_error()) return server_error(reply.str);
  return std::move(reply);
}

Result<Reply, Error> Client::command(const Context& ctx,
                                     std::initializer_list<std::string_view> words) {
  return command(ctx, std::span<const std::string_view>(words.begin(), words.size()));
}

Result<Reply, Error> Client::command(const Context& ctx, const std::vector<std::string>& words) {
  std::vector<std::string_view> views(words.begin(), words.end());
  return command(ctx, std::span<const std::string_view>(views));
}

Result<std::vector<Reply>, Error> Client::exec(const Context& ctx, const Pipeline& p) {
  if (p.empty()) return std::vector<Reply>{};
  return state_->run(ctx, p.wire_, p.count_);
}

Result<Reply, Error> Client::transaction(const Context& ctx, const Pipeline& p) {
  std::string wire;
  append_command(wire, {"MULTI"});
  wire += p.wire_;
  append_command(wire, {"EXEC"});
  Result<std::vector<Reply>, Error> r = state_->run(ctx, wire, p.count_ + 2);
  if (!r) return r.error();
  // MULTI's +OK, a +QUEUED or an error per command, then EXEC's reply.
  for (std::size_t i = 0; i + 1 < r->size(); ++i) {
    if ((*r)[i].is_error()) return server_error((*r)[i].str);
  }
  Reply& exec_reply = r->back();
  if (exec_reply.is_error()) return server_error(exec_reply.str);
  return std::move(exec_reply);
}

Result<Reply, Error> Client::eval(const Context& ctx, const Script& script,
                                  std::span<const std::string_view> keys,
                                  std::span<const std::string_view> args) {
  const std::string numkeys = std::to_string(keys.size());
  std::vector<std::string_view> words{"EVALSHA", script.sha1(), numkeys};
  words.insert(words.end(), keys.begin(), keys.end());
  words.insert(words.end(), args.begin(), args.end());
  Result<Reply, Error> r = command(ctx, std::span<const std::string_view>(words));
  if (r || r.error().field("prefix") != "NOSCRIPT") return r;
  words[0] = "EVAL";
  words[1] = script.source();
  return command(ctx, std::span<const std::string_view>(words));
}

Result<std::optional<std::string>, Error> Client::get(const Context& ctx, std::string_view key) {
  Result<Reply, Error> r = command(ctx, {"GET", key});
  if (!r) return r.error();
  if (r->is_nil()) return std::optional<std::string>();
  if (!r->is_string()) return Error(errc::protocol_error, "redis: GET answered with no string");
  return std::optional<std::string>(std::move(r->str));
}

std::error_code Client::set(const Context& ctx, std::string_view key, std::string_view value,
                            std::chrono::milliseconds ttl) {
  Result<Reply, Error> r = [&] {
    if (ttl.count() <= 0) return command(ctx, {"SET", key, value});
    const bool whole = ttl.count() % 1000 == 0;
    const std::string n = std::to_string(whole ? ttl.count() / 1000 : ttl.count());
    return command(ctx, {"SET", key, value, whole ? "EX" : "PX", n});
  }();
  return r ? std::error_code() : r.error().code();
}

namespace {

Result<long long, Error> integer_of(Result<Reply, Error> r, const char* what) {
  if (!r) return r.error();
  if (!r->is_integer())
    return Error(errc::protocol_error, std::string("redis: ") + what + " answered with no integer");
  return r->integer;
}

}  // namespace

Result<long long, Error> Client::incr(const Context& ctx, std::string_view key) {
  return integer_of(command(ctx, {"INCR", key}), "INCR");
}

Result<long long, Error> Client::del(const Context& ctx,
                                     std::initializer_list<std::string_view> keys) {
  std::vector<std::string_view> words{"DEL"};
  words.insert(words.end(), keys.begin(), keys.end());
  return integer_of(command(ctx, std::span<const std::string_view>(words)), "DEL");
}

Result<long long, Error> Client::publish(const Context& ctx, std::string_view channel,
                                         std::string_view message) {
  return integer_of(command(ctx, {"PUBLISH", channel, message}), "PUBLISH");
}

PoolStats Client::stats() const {
  PoolStats s;
  {
    std::lock_guard lock(state_->mu);
    s.open = state_->open;
    s.idle = static_cast<int>(state_->idle.size());
  }
  s.dials = state_->dials.load(std::memory_order_relaxed);
  s.dial_errors = state_->dial_errors.load(std::memory_order_relaxed);
  s.waits = state_->waits.load(std::memory_order_relaxed);
  s.discarded = state_->discarded.load(std::memory_order_relaxed);
  return s;
}

// ---------------------------------------------------------------------------------------
// Pipelines and scripts.

Pipeline& Pipeline::add(std::span<const std::string_view> words) {
  append_command(wire_, words);
  ++count_;
  return *this;
}

Pipeline& Pipeline::add(std::initializer_list<std::string_view> words) {
  return add(std::span<const std::string_view>(words.begin(), words.size()));
}

Pipeline& Pipeline::add(const std::vector<std::string>& words) {
  std::vector<std::string_view> views(words.begin(), words.end());
  return add(std::span<const std::string_view>(views));
}

Script::Script(std::string source) : source_(std::move(source)), sha1_(sha1_hex(source_)) {}

// ---------------------------------------------------------------------------------------
// Subscriptions.

struct Subscription::Loop {
  std::shared_ptr<Client::State> client;
  std::vector<std::string> channels, patterns;
  Chan<Message> messages;
  Chan<char> stop;  // closed by close()
  WaitGroup reader;
  std::atomic<std::uint64_t> reconnects{0};

  goro::Mutex mu;
  bool closed = false;         // (mu)
  net::Conn* conn = nullptr;   // (mu) the reader's connection, closed by close()

  std::string subscribe_wire() const {
    std::string wire;
    auto add = [&](const char* verb, const std::vector<std::string>& names) {
      if (names.empty()) return;
      std::vector<std::string_view> words{verb};
      words.insert(words.end(), names.begin(), names.end());
      append_command(wire, std::span<const std::string_view>(words));
    };
    add("SUBSCRIBE", channels);
    add("PSUBSCRIBE", patterns);
    return wire;
  }

  // A connection subscribed to everything, its confirmations read.
  Result<std::unique_ptr<Link>, Error> connect(const Context& ctx) {
    Result<std::unique_ptr<Link>, Error> link = client->dial(ctx);
    if (!link) return link;
    std::vector<Reply> confirmations;
    std::string why;
    Link& l = **link;
    const std::error_code ec = net::with_context(l.conn, net::IoMode::both, ctx, [&] {
      return l.exchange(client->opt, subscribe_wire(), channels.size() + patterns.size(),
                        confirmations, &why);
    });
    if (ec) return client->wrap(ec, "subscribing at", why);
    for (const Reply& r : confirmations) {
      if (r.is_error()) return server_error(r.str);
    }
    return link;
  }

  // Delivers what arrives on link until it fails or close(); then connects again.
  void read_loop(std::unique_ptr<Link> link) {
    int failures = 0;
    while (link) {
      {
        std::lock_guard lock(mu);
        if (closed) break;
        conn = &link->conn;
      }
      (void)link->conn.set_read_deadline(net::no_deadline);
      ReplyParser parser(client->opt.limits);
      bool stopped = false;
      for (;;) {
        ReplyParser::Parsed p = parser.parse(std::string_view(link->in).substr(link->pos));
        if (p.status == ReplyParser::Status::bad) break;
        if (p.status == ReplyParser::Status::need_more) {
          if (link->read_more()) break;
          continue;
        }
        link->pos += p.used;
        failures = 0;
        std::optional<Message> m = message_of(p.reply);
        if (m && goro::select(goro::send_case(messages, std::move(*m)),
                              goro::recv_case(stop)) != 0) {
          stopped = true;
          break;
        }
      }
      {
        std::lock_guard lock(mu);
        conn = nullptr;
        if (closed) stopped = true;
      }
      link.reset();
      if (stopped) break;
      // Again, after a pause that grows while the server stays away.
      while (!link) {
        const auto pause = backoff(failures, client->opt.max_backoff);
        ++failures;
        if (goro::select(goro::recv_case(stop), goro::timeout_case(pause)) == 0) break;
        auto [ctx, cancel] = goro::with_cancel(goro::background());
        Result<std::unique_ptr<Link>, Error> again = connect(ctx);
        cancel();
        if (again) {
          link = std::move(*again);
          reconnects.fetch_add(1, std::memory_order_relaxed);
        }
        std::lock_guard lock(mu);
        if (closed) {
          link.reset();
          break;
        }
      }
    }
    messages.close();
    reader.done();
  }

  static std::optional<Message> message_of(const Reply& r) {
    if (!r.is_array() || r.elements.empty() || !r.elements[0].is_string()) return std::nullopt;
    const std::string& kind = r.elements[0].str;
    const auto& e = r.elements;
    if (kind == "message" && e.size() == 3) return Message{e[1].str, {}, e[2].str};
    if (kind == "pmessage" && e.size() == 4) return Message{e[2].str, e[1].str, e[3].str};
    return std::nullopt;  // a confirmation of (un)subscribing
  }
};

Result<std::unique_ptr<Subscription>, Error> Client::subscribe(const Context& ctx,
                                                               std::vector<std::string> channels,
                                                               std::vector<std::string> patterns) {
  if (channels.empty() && patterns.empty())
    return Error(std::make_error_code(std::errc::invalid_argument),
                 "redis: subscribe needs a channel or a pattern");
  auto loop = std::make_shared<Subscription::Loop>();
  loop->client = state_;
  loop->channels = std::move(channels);
  loop->patterns = std::move(patterns);
  loop->messages = Chan<Message>(64);
  Result<std::unique_ptr<Link>, Error> link = loop->connect(ctx);
  if (!link) return link.error();
  loop->reader.add(1);
  goro::go([loop, l = std::shared_ptr<Link>(std::move(*link))]() mutable {
    auto owned = std::make_unique<Link>(std::move(*l));
    loop->read_loop(std::move(owned));
  });
  return std::unique_ptr<Subscription>(new Subscription(loop, loop->messages));
}

Subscription::Subscription(std::shared_ptr<Loop> loop, Chan<Message> messages)
    : loop_(std::move(loop)), messages_(std::move(messages)) {}

Subscription::~Subscription() { close(); }

std::uint64_t Subscription::reconnects() const noexcept {
  return loop_->reconnects.load(std::memory_order_relaxed);
}

void Subscription::close() {
  {
    std::lock_guard lock(loop_->mu);
    if (loop_->closed) return;
    loop_->closed = true;
    if (loop_->conn != nullptr) (void)loop_->conn->close();
  }
  loop_->stop.close();
  loop_->reader.wait();
}

}  // namespace goro::redis
