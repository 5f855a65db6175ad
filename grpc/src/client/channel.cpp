// Channel (one http::Client speaking HTTP/2 to one server) and ClientContext (the
// settings and results of one call). The calls themselves are in call.cpp.
#include <goro/grpc/client.hpp>

#include <limits>
#include <utility>

#include "client/client_impl.hpp"

namespace goro::grpc {

namespace {

// "dns:///host:port", "host:port", "http://host:port" or "https://host:port" -> the
// origin URL and host:port. A target without a port gets gRPC's usual 443 (TLS) or 80.
std::pair<std::string, std::string> parse_target(std::string_view target, bool& tls) {
  constexpr std::string_view kDns = "dns:///";
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  if (target.starts_with(kDns)) {
    target.remove_prefix(kDns.size());
  } else if (target.starts_with(kHttps)) {
    target.remove_prefix(kHttps.size());
    tls = true;
  } else if (target.starts_with(kHttp)) {
    target.remove_prefix(kHttp.size());
  }
  if (std::size_t slash = target.find('/'); slash != std::string_view::npos) {
    target = target.substr(0, slash);
  }
  std::string authority(target);
  const std::size_t bracket = authority.rfind(']');
  const std::size_t colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos &&
                        (bracket == std::string::npos || colon > bracket) &&
                        // a bare IPv6 address has colons but no brackets: no port
                        (authority.find(':') == colon || bracket != std::string::npos);
  if (!has_port) {
    if (authority.find(':') != std::string::npos && bracket == std::string::npos) {
      authority = "[" + authority + "]";
    }
    authority += tls ? ":443" : ":80";
  }
  return {(tls ? "https://" : "http://") + authority, authority};
}

}  // namespace

std::shared_ptr<Channel> Channel::create(std::string_view target, ChannelOptions options) {
  bool tls = options.tls;
  auto [origin, authority] = parse_target(target, tls);
  options.tls = tls;
  http::ClientOptions http_options;
  http_options.http2 = true;
  http_options.h2c = !tls;
  http_options.ca_file = options.ca_file;
  http_options.client_certificate = options.client_certificate;
  http_options.tls_server_name = options.server_name_override;
  http_options.connect_timeout = options.connect_timeout;
  // A call's only time limit is its deadline (the context): a stream may stay quiet
  // for as long as its application wants.
  http_options.timeout = std::chrono::nanoseconds(0);
  http_options.read_timeout = std::chrono::nanoseconds(0);
  http_options.write_timeout = std::chrono::nanoseconds(0);
  http_options.max_body_bytes = std::numeric_limits<std::uint64_t>::max();
  http_options.user_agent = options.user_agent;
  http_options.ping_interval = options.keepalive_time;
  http_options.ping_timeout = options.keepalive_timeout;
  auto impl = std::make_unique<Impl>(std::move(options), std::move(origin), std::move(authority),
                                     http_options);
  return std::shared_ptr<Channel>(new Channel(std::move(impl)));
}

Channel::Channel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Channel::~Channel() = default;

const ChannelOptions& Channel::options() const { return impl_->options; }

Status intercept(Channel::Impl& channel, ClientContext& ctx, const MethodInfo& method,
                 const std::function<Status()>& innermost) {
  const std::vector<ClientInterceptor>& chain = channel.options.interceptors;
  if (chain.empty()) return innermost();
  // next for interceptor i runs interceptor i + 1, the last one innermost.
  std::function<Status(std::size_t)> run = [&](std::size_t i) -> Status {
    if (i == chain.size()) return innermost();
    return chain[i](ctx, method, [&run, i] { return run(i + 1); });
  };
  return run(0);
}

ClientContext::ClientContext(Context parent) : impl_(std::make_unique<Impl>()) {
  auto [ctx, cancel] = with_cancel(parent);
  impl_->cancellable = ctx;
  impl_->cancel = cancel;
  impl_->call_context = std::move(ctx);
}

ClientContext::~ClientContext() {
  impl_->call_cancel();
  impl_->cancel();
}

void ClientContext::set_deadline(std::chrono::steady_clock::time_point deadline) {
  impl_->deadline = deadline;
}

void ClientContext::set_timeout(std::chrono::nanoseconds timeout) {
  impl_->deadline = std::chrono::steady_clock::now() + timeout;
}

std::optional<std::chrono::steady_clock::time_point> ClientContext::deadline() const {
  return impl_->effective_deadline();
}

void ClientContext::add_metadata(std::string_view key, std::string_view value) {
  impl_->metadata.add(key, value);
}

const Metadata& ClientContext::metadata() const { return impl_->metadata; }

void ClientContext::set_compression(Compression algorithm) { impl_->compression = algorithm; }

void ClientContext::cancel() { impl_->cancel(); }

const Metadata& ClientContext::initial_metadata() const { return impl_->initial_metadata; }

const Metadata& ClientContext::trailing_metadata() const { return impl_->trailing_metadata; }

const Context& ClientContext::context() const { return impl_->call_context; }

void ClientContext::on_finish(std::function<void(const Status&)> fn) {
  impl_->on_finish = std::move(fn);
}

std::string_view ClientContext::peer() const { return impl_->peer; }

}  // namespace goro::grpc
