#include <goro/http/client.hpp>

#include <poll.h>

#include <charconv>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/net/addr.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/errors.hpp>
#include <goro/net/tls.hpp>
#include <goro/scheduler/mutex.hpp>

#include "message_parser.hpp"

namespace goro::http {

Result<Url> parse_url(std::string_view url) {
  Url u;
  std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) return errc::bad_url;
  std::string_view scheme = url.substr(0, colon);
  if (iequals(scheme, "http")) {
    u.scheme = "http";
    u.port = 80;
  } else if (iequals(scheme, "https")) {
    u.scheme = "https";
    u.port = 443;
  } else {
    return errc::bad_url;
  }
  std::string_view rest = url.substr(colon + 3);
  std::size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view target = path_start == std::string_view::npos ? std::string_view{} : rest.substr(path_start);
  if (std::size_t hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  if (authority.find('@') != std::string_view::npos || authority.empty()) return errc::bad_url;
  std::string_view host = authority, port;
  if (authority.front() == '[') {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return errc::bad_url;
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return errc::bad_url;
      port = after.substr(1);
    }
  } else if (std::size_t c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
  }
  if (host.empty()) return errc::bad_url;
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return errc::bad_url;
    }
    u.port = static_cast<std::uint16_t>(value);
  }
  u.host = std::string(host);
  u.target = std::string(target);
  if (u.target.empty() || u.target.front() == '?') u.target.insert(u.target.begin(), '/');
  return u;
}

namespace {

struct PooledConn {
  std::unique_ptr<net::Stream> stream;
  std::unique_ptr<detail::MessageParser> parser;
  int fd = -1;
  std::chrono::steady_clock::time_point idle_since;
};

bool idempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "PUT" ||
         method == "DELETE" || method == "TRACE";
}

net::Deadline deadline_in(std::chrono::nanoseconds d) {
  return d.count() > 0 ? net::deadline_after(d) : net::no_deadline;
}

// A pooled connection whose server has closed it (or sent something unasked) is not
// worth a request.
bool looks_dead(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && p.revents != 0;
}

}  // namespace

struct Client::Impl {
  ClientOptions options;
  goro::Mutex mu;  // guards idle and tls
  std::unordered_map<std::string, std::vector<PooledConn>> idle;
  std::shared_ptr<net::TlsContext> tls;

  Result<PooledConn> connect(const Url& url);
  std::optional<PooledConn> take_idle(const std::string& key);
  void put_idle(const std::string& key, PooledConn conn);
  Result<ClientResponse> round_trip(const ClientRequest& request, const Url& url);
  // One attempt on conn. wrote_anything / got_anything tell whether a retry is safe.
  Result<ClientResponse> exchange(PooledConn& conn, const ClientRequest& request, const Url& url,
                                  bool& reusable, bool& got_anything);
};

Result<PooledConn> Client::Impl::connect(const Url& url) {
  std::string address = net::join_host_port(url.host, url.port);
  Result<net::Conn> conn = net::dial("tcp", address, options.connect_timeout);
  if (!conn) return conn.error();
  PooledConn pooled;
  pooled.fd = conn->fd();
  if (url.scheme == "https") {
    std::shared_ptr<net::TlsContext> ctx;
    {
      std::lock_guard lock(mu);
      if (!tls) {
        net::TlsConfig config;
        config.ca_file = options.ca_file;
        config.verify = options.verify;
        config.alpn = {"http/1.1"};
        Result<std::shared_ptr<net::TlsContext>> made = net::TlsContext::client(config);
        if (!made) return made.error();
        tls = *made;
      }
      ctx = tls;
    }
    conn->set_deadline(deadline_in(options.connect_timeout));
    Result<net::TlsConn> secure =
        net::TlsConn::client(std::make_unique<net::Conn>(std::move(*conn)), ctx, url.host);
    if (!secure) return secure.error();
    if (std::error_code ec = secure->handshake()) return ec;
    secure->set_deadline(net::no_deadline);
    pooled.stream = std::make_unique<net::TlsConn>(std::move(*secure));
  } else {
    pooled.stream = std::make_unique<net::Conn>(std::move(*conn));
  }
  detail::ParserLimits limits;
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_body_bytes = options.max_body_bytes;
  pooled.parser = std::make_unique<detail::MessageParser>(detail::MessageParser::Mode::response, limits);
  return pooled;
}

std::optional<PooledConn> Client::Impl::take_idle(const std::string& key) {
  std::vector<PooledConn> stale;
  std::optional<PooledConn> found;
  {
    std::lock_guard lock(mu);
    auto it = idle.find(key);
    if (it == idle.end()) return std::nullopt;
    auto now = std::chrono::steady_clock::now();
    while (!it->second.empty()) {
      PooledConn c = std::move(it->second.back());
      it->second.pop_back();
      if (now - c.idle_since > options.idle_timeout || looks_dead(c.fd)) {
        stale.push_back(std::move(c));
        continue;
      }
      found = std::move(c);
      break;
    }
  }
  for (PooledConn& c : stale) c.stream->close();
  return found;
}

void Client::Impl::put_idle(const std::string& key, PooledConn conn) {
  conn.idle_since = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu);
    std::vector<PooledConn>& list = idle[key];
    if (list.size() < options.max_idle_per_host) {
      list.push_back(std::move(conn));
      return;
    }
  }
  conn.stream->close();
}

Result<ClientResponse> Client::Impl::exchange(PooledConn& conn, const ClientRequest& request, const Url& url,
                                              bool& reusable, bool& got_anything) {
  reusable = false;
  got_anything = false;
  std::string head;
  head.reserve(256);
  head.append(request.method).append(" ").append(url.target).append(" HTTP/1.1\r\n");
  if (!request.headers.has("host")) {
    head.append("Host: ");
    bool default_port = (url.scheme == "http" && url.port == 80) || (url.scheme == "https" && url.port == 443);
    head.append(default_port ? (url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host)
                             : net::join_host_port(url.host, url.port));
    head.append("\r\n");
  }
  if (!request.headers.has("user-agent") && !options.user_agent.empty()) {
    head.append("User-Agent: ").append(options.user_agent).append("\r\n");
  }
  for (HeaderField f : request.headers) {
    if (iequals(f.name, "content-length") || iequals(f.name, "transfer-encoding")) continue;
    head.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  bool send_length = !request.body.empty() ||
                     !(request.method == "GET" || request.method == "HEAD" || request.method == "DELETE" ||
                       request.method == "OPTIONS" || request.method == "TRACE");
  if (send_length) head.append("Content-Length: ").append(std::to_string(request.body.size())).append("\r\n");
  head.append("\r\n");

  conn.stream->set_write_deadline(deadline_in(options.write_timeout));
  iovec iov[2] = {{head.data(), head.size()}, {const_cast<char*>(request.body.data()), request.body.size()}};
  if (Result<std::size_t> n = conn.stream->writev(iov, request.body.empty() ? 1 : 2); !n) return n.error();

  detail::MessageParser& parser = *conn.parser;
  parser.set_response_to_head(request.method == "HEAD");
  auto read_more = [&]() -> Result<std::size_t> {
    conn.stream->set_read_deadline(deadline_in(options.read_timeout));
    std::span<char> space = parser.read_space();
    Result<std::size_t> n = conn.stream->read(space.data(), space.size());
    if (n && *n > 0) {
      parser.commit(*n);
      got_anything = true;
    }
    return n;
  };
  auto parse_failure = [&]() -> std::error_code {
    return parser.error().status == 413 ? make_error_code(errc::body_too_large)
                                        : make_error_code(errc::malformed_response);
  };

  // The head; interim 1xx responses (100 Continue, 103 Early Hints) are skipped.
  for (;;) {
    detail::ParseStatus st = parser.parse_head();
    if (st == detail::ParseStatus::error) return parse_failure();
    if (st == detail::ParseStatus::complete) {
      if (parser.status_code() >= 100 && parser.status_code() < 200 && parser.status_code() != 101) {
        parser.next_message();
        continue;
      }
      break;
    }
    Result<std::size_t> n = read_more();
    if (!n) return n.error();
    if (*n == 0) return errc::unexpected_eof;
  }

  ClientResponse response;
  response.status = parser.status_code();
  response.reason = std::string(parser.status_text());
  response.version_minor = parser.version_minor();
  for (const HeaderField& f : parser.headers()) response.headers.add(f.name, f.value);
  if (parser.content_length() > 0) response.body.reserve(static_cast<std::size_t>(parser.content_length()));
  for (;;) {
    response.body.append(parser.peek_body());
    parser.skip(parser.available());
    if (parser.message_complete()) break;
    detail::ParseStatus st = parser.parse_body();
    if (st == detail::ParseStatus::error) return parse_failure();
    if (st == detail::ParseStatus::complete || parser.available() > 0) continue;
    Result<std::size_t> n = read_more();
    if (!n) return n.error();
    if (*n == 0) {
      if (parser.finish_on_eof() != detail::ParseStatus::complete) return errc::unexpected_eof;
      response.body.append(parser.peek_body());
      parser.skip(parser.available());
      break;
    }
  }
  reusable = parser.keep_alive() && !parser.upgrade() && parser.buffered() == 0 &&
             !has_token(response.header("connection"), "close");
  if (reusable) parser.next_message();
  return response;
}

Result<ClientResponse> Client::Impl::round_trip(const ClientRequest& request, const Url& url) {
  std::string key = url.scheme + "://" + net::join_host_port(url.host, url.port);
  for (int attempt = 0;; ++attempt) {
    std::optional<PooledConn> pooled = attempt == 0 ? take_idle(key) : std::nullopt;
    bool reused = pooled.has_value();
    if (!pooled) {
      Result<PooledConn> fresh = connect(url);
      if (!fresh) return fresh.error();
      pooled = std::move(*fresh);
    }
    bool reusable = false, got_anything = false;
    Result<ClientResponse> r = exchange(*pooled, request, url, reusable, got_anything);
    if (r && reusable) {
      put_idle(key, std::move(*pooled));
    } else {
      pooled->stream->close();
    }
    if (!r && reused && !got_anything && idempotent(request.method) && !net::is_timeout(r.error())) {
      continue;  // the server had dropped the idle connection
    }
    return r;
  }
}

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

Client::~Client() { close_idle(); }

Result<ClientResponse> Client::send(const ClientRequest& request) {
  Result<Url> url = parse_url(request.url);
  if (!url) return url.error();
  Result<ClientResponse> response = impl_->round_trip(request, *url);
  int redirects = 0;
  ClientRequest next;
  while (response && impl_->options.max_redirects > 0) {
    int s = response->status;
    std::string_view location = response->header("location");
    if (!(s == 301 || s == 302 || s == 303 || s == 307 || s == 308) || location.empty()) break;
    if (++redirects > impl_->options.max_redirects) return errc::too_many_redirects;
    const ClientRequest& previous = redirects == 1 ? request : next;
    ClientRequest follow;
    follow.headers = previous.headers;
    follow.headers.remove("host");
    if (s == 303 || ((s == 301 || s == 302) && previous.method == "POST")) {
      follow.method = previous.method == "HEAD" ? "HEAD" : "GET";
      follow.headers.remove("content-type");
    } else {
      follow.method = previous.method;
      follow.body = previous.body;
    }
    if (location.find("://") != std::string_view::npos) {
      follow.url = std::string(location);
    } else {
      std::string base = url->scheme + "://" + net::join_host_port(url->host, url->port);
      if (location.front() == '/') {
        follow.url = base + std::string(location);
      } else {
        std::string dir = url->target.substr(0, url->target.find('?'));
        dir = dir.substr(0, dir.rfind('/') + 1);
        follow.url = base + dir + std::string(location);
      }
    }
    next = std::move(follow);
    url = parse_url(next.url);
    if (!url) return url.error();
    response = impl_->round_trip(next, *url);
  }
  return response;
}

Result<ClientResponse> Client::get(std::string_view url) {
  ClientRequest r;
  r.url = std::string(url);
  return send(r);
}

Result<ClientResponse> Client::post(std::string_view url, std::string_view content_type, std::string body) {
  ClientRequest r;
  r.method = "POST";
  r.url = std::string(url);
  r.headers.set("Content-Type", content_type);
  r.body = std::move(body);
  return send(r);
}

void Client::close_idle() {
  std::unordered_map<std::string, std::vector<PooledConn>> idle;
  {
    std::lock_guard lock(impl_->mu);
    idle.swap(impl_->idle);
  }
  for (auto& [key, list] : idle) {
    for (PooledConn& c : list) c.stream->close();
  }
}

}  // namespace goro::http
