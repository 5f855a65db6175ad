// goro::redis::Client's calls: each a write of whole commands and a read of their
// replies on a connection of the pool (pool.hpp), under the call's Context and the
// client's timeouts. See <goro/redis/redis.hpp> for what a caller sees.
#include <openssl/evp.h>

#include <cstdio>

#include "pool.hpp"

namespace goro::redis {

namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.redis"; }
  std::string message(int c) const override {
    switch (static_cast<errc>(c)) {
      case errc::server_error: return "the Redis server answered with an error";
      case errc::protocol_error: return "malformed Redis reply";
      case errc::closed: return "Redis client closed";
      case errc::tx_failed: return "a watched key changed: the transaction did not run";
    }
    return "unknown goro.redis error";
  }
};

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

Error server_error(const std::string& words) {
  const std::string prefix = words.substr(0, words.find(' '));
  return Error(errc::server_error, words, {{"prefix", prefix}});
}

// ---------------------------------------------------------------------------------------
// Client.

Client::Client(Options options) : state_(std::make_shared<State>(std::move(options))) {}

Client::~Client() {
  state_->follower.stop();
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

std::string transaction_wire(const Pipeline& p) {
  std::string wire;
  append_command(wire, {"MULTI"});
  wire += p.wire_;
  append_command(wire, {"EXEC"});
  return wire;
}

Result<Reply, Error> transaction_reply(std::vector<Reply>& replies) {
  // MULTI's +OK, a +QUEUED or an error per command, then EXEC's reply.
  for (std::size_t i = 0; i + 1 < replies.size(); ++i) {
    if (replies[i].is_error()) return server_error(replies[i].str);
  }
  Reply& exec_reply = replies.back();
  if (exec_reply.is_error()) return server_error(exec_reply.str);
  if (exec_reply.is_nil())
    return Error(errc::tx_failed, "redis: a watched key changed: the transaction did not run");
  return std::move(exec_reply);
}

Result<Reply, Error> Client::transaction(const Context& ctx, const Pipeline& p) {
  Result<std::vector<Reply>, Error> r = state_->run(ctx, transaction_wire(p), p.count_ + 2);
  if (!r) return r.error();
  return transaction_reply(*r);
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
  s.connects = state_->connects.load(std::memory_order_relaxed);
  s.connect_errors = state_->connect_errors.load(std::memory_order_relaxed);
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

}  // namespace goro::redis
