// goro::redis::Client::watch: an optimistic transaction on one connection of the pool —
// WATCH, the caller's reads and MULTI/EXEC through Watch, then UNWATCH (unless EXEC
// ended the watch) before the connection goes back.
#include "pool.hpp"

namespace goro::redis {

// The connection a watch holds, given back (unwatched) when it ends, even by an
// exception out of fn.
struct Watch::Held {
  Client::State& state;
  std::unique_ptr<Link> link;
  bool healthy = true;
  bool watching = false;  // WATCH sent and neither EXEC nor UNWATCH since

  ~Held() {
    if (healthy && watching) {
      // Bounded by the client's own timeouts alone: the caller's Context may be over.
      const std::string unwatch = [] {
        std::string wire;
        append_command(wire, {"UNWATCH"});
        return wire;
      }();
      (void)run(Context(), unwatch, 1);
    }
    state.checkin(std::move(link), healthy);
  }

  // wire's count replies on the held connection; a failure makes it unfit.
  Result<std::vector<Reply>, Error> run(const Context& ctx, const std::string& wire,
                                        std::size_t count) {
    if (!healthy) return Error(errc::closed, "redis: the watched connection failed already");
    std::vector<Reply> replies;
    std::string why;
    Link& l = *link;
    const std::error_code ec = net::with_context(l.conn, net::IoMode::both, ctx, [&] {
      return l.exchange(state.opt, wire, count, replies, &why);
    });
    if (ec) {
      healthy = false;
      return state.wrap(ec, ec == errc::protocol_error ? "reading a reply from" : "talking to", why);
    }
    return replies;
  }
};

Result<Reply, Error> Watch::command(const Context& ctx, std::span<const std::string_view> words) {
  std::string wire;
  append_command(wire, words);
  Result<std::vector<Reply>, Error> r = held_.run(ctx, wire, 1);
  if (!r) return r.error();
  Reply& reply = r->front();
  if (reply.is_error()) return server_error(reply.str);
  return std::move(reply);
}

Result<Reply, Error> Watch::command(const Context& ctx,
                                    std::initializer_list<std::string_view> words) {
  return command(ctx, std::span<const std::string_view>(words.begin(), words.size()));
}

Result<Reply, Error> Watch::transaction(const Context& ctx, const Pipeline& p) {
  Result<std::vector<Reply>, Error> r = held_.run(ctx, transaction_wire(p), p.size() + 2);
  if (!r) return r.error();
  held_.watching = false;  // EXEC (or DISCARD after a refused command) unwatches
  return transaction_reply(*r);
}

Error Client::watch(const Context& ctx, std::span<const std::string_view> keys,
                    const std::function<Error(Watch&)>& fn) {
  if (keys.empty())
    return Error(std::make_error_code(std::errc::invalid_argument), "redis: watch needs a key");
  std::vector<std::string_view> words{"WATCH"};
  words.insert(words.end(), keys.begin(), keys.end());
  std::string wire;
  append_command(wire, std::span<const std::string_view>(words));
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    Result<std::unique_ptr<Link>, Error> link = state_->checkout(ctx, &reused);
    if (!link) return link.error();
    Watch::Held held{*state_, std::move(*link)};
    Result<std::vector<Reply>, Error> watched = held.run(ctx, wire, 1);
    if (!watched) {
      // As State::run: a reused connection the server had closed, once more on a new one.
      const Error e = watched.error();
      const bool server_went = e == kServerClosed || e == std::errc::broken_pipe;
      if (reused && server_went && attempt == 0 && !ctx.err()) continue;
      return e;
    }
    if (watched->front().is_error()) return server_error(watched->front().str);
    held.watching = true;
    Watch w(held);
    return fn(w);
  }
}

Error Client::watch(const Context& ctx, std::initializer_list<std::string_view> keys,
                    const std::function<Error(Watch&)>& fn) {
  return watch(ctx, std::span<const std::string_view>(keys.begin(), keys.size()), fn);
}

}  // namespace goro::redis
