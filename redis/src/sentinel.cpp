// Redis Sentinel: which server is the master now, asked of the sentinels in order
// (SENTINEL get-master-addr-by-name) at each dial of a client with Options::sentinel,
// and a subscription to their +switch-master announcements that makes the pool drop
// its connections to a master that has just been replaced.
#include <goro/scheduler/runtime.hpp>

#include "pool.hpp"

namespace goro::redis {

namespace {

// A connection to the sentinel at address, authenticated when the options say so, that
// has sent `command` and read its `replies` replies; or why not.
Result<std::unique_ptr<Link>, Error> sentinel_link(const Options& opt, const std::string& address,
                                                   std::initializer_list<std::string_view> command,
                                                   std::size_t replies_wanted,
                                                   std::vector<Reply>& replies,
                                                   const Context& ctx) {
  const auto [network, path] = network_of(address);
  Result<net::Conn> c = net::dial(network, path, opt.dial_timeout, ctx);
  if (!c) return Error(c.error(), c.error().message());
  auto link = std::make_unique<Link>();
  link->conn = std::move(*c);
  std::string wire;
  std::size_t count = replies_wanted;
  if (!opt.sentinel.password.empty()) {
    append_command(wire, {"AUTH", opt.sentinel.password});
    ++count;
  }
  append_command(wire, command);
  std::string why;
  Link& l = *link;
  const std::error_code ec = net::with_context(l.conn, net::IoMode::both, ctx, [&] {
    return l.exchange(opt, wire, count, replies, &why);
  });
  if (ec) return Error(ec, why.empty() ? ec.message() : why);
  for (const Reply& r : replies) {
    if (r.is_error()) return server_error(r.str);
  }
  return link;
}

// The master's "host:port" as one sentinel at address says it, or why not.
Result<std::string, Error> ask(const Options& opt, const std::string& address,
                               const Context& ctx) {
  std::vector<Reply> replies;
  Result<std::unique_ptr<Link>, Error> link = sentinel_link(
      opt, address, {"SENTINEL", "get-master-addr-by-name", opt.sentinel.master}, 1, replies, ctx);
  if (!link) return link.error();
  const Reply& addr = replies.back();
  if (addr.is_nil()) {
    return Error(std::make_error_code(std::errc::connection_refused),
                 "it monitors no master of that name");
  }
  if (!addr.is_array() || addr.elements.size() != 2 || !addr.elements[0].is_string() ||
      !addr.elements[1].is_string())
    return Error(errc::protocol_error, "its answer is not a host and a port");
  const std::string& host = addr.elements[0].str;
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + addr.elements[1].str;
}

}  // namespace

Result<std::string, Error> master_from_sentinels(const Options& opt, const Context& ctx) {
  std::string whys;
  for (const std::string& address : opt.sentinel.addresses) {
    Result<std::string, Error> master = ask(opt, address, ctx);
    if (master) return master;
    if (ctx.err()) return Error(ctx.err(), "redis: asking the sentinels: " + ctx.err().message());
    whys += (whys.empty() ? "" : "; ") + address + ": " + master.error().what();
  }
  if (opt.sentinel.addresses.empty()) whys = "no sentinel addresses given";
  return Error(std::make_error_code(std::errc::connection_refused),
               "redis: no sentinel gave the address of master " + opt.sentinel.master + " (" +
                   whys + ")");
}

// ---------------------------------------------------------------------------------------
// Following switches.

void SwitchFollower::start() {
  std::lock_guard lock(mu_);
  if (started_ || stopped_) return;
  started_ = true;
  done_.add(1);
  goro::go([this] {
    follow();
    done_.done();
  });
}

void SwitchFollower::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    if (conn_ != nullptr) (void)conn_->close();
    if (!started_) return;
  }
  stop_.close();
  done_.wait();
}

void SwitchFollower::follow() {
  const Options& opt = state_.opt;
  const std::string prefix = opt.sentinel.master + " ";  // "<name> <old ip> <old port> ..."
  int failures = 0;
  bool first = true;
  for (;;) {
    std::unique_ptr<Link> link;
    for (const std::string& address : opt.sentinel.addresses) {
      std::vector<Reply> confirmation;
      Result<std::unique_ptr<Link>, Error> l =
          sentinel_link(opt, address, {"SUBSCRIBE", "+switch-master"}, 1, confirmation, Context());
      if (l) {
        link = std::move(*l);
        break;
      }
    }
    if (!link) {
      if (goro::select(goro::recv_case(stop_), goro::timeout_case(backoff(failures++, opt.max_backoff))) == 0)
        return;
      continue;
    }
    failures = 0;
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      conn_ = &link->conn;
    }
    // While no sentinel was followed a switch may have gone by unheard.
    if (!first) state_.generation.fetch_add(1, std::memory_order_acq_rel);
    first = false;
    (void)link->conn.set_read_deadline(net::no_deadline);
    ReplyParser parser(opt.limits);
    for (;;) {
      ReplyParser::Parsed p = parser.parse(std::string_view(link->in).substr(link->pos));
      if (p.status == ReplyParser::Status::bad) break;
      if (p.status == ReplyParser::Status::need_more) {
        if (link->read_more()) break;
        continue;
      }
      link->pos += p.used;
      const auto& e = p.reply.elements;
      if (p.reply.is_array() && e.size() == 3 && e[0].str == "message" &&
          e[2].str.rfind(prefix, 0) == 0)
        state_.generation.fetch_add(1, std::memory_order_acq_rel);
    }
    std::lock_guard lock(mu_);
    conn_ = nullptr;
    if (stopped_) return;
  }
}

}  // namespace goro::redis
