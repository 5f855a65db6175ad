// goro::redis::Subscription: SUBSCRIBE and PSUBSCRIBE on a connection of its own, and
// a goroutine that reads it, hands each message to the channel, and dials again (and
// subscribes again) when the connection fails.
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "pool.hpp"

namespace goro::redis {

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
