// The opening handshake (RFC 6455 4): accept() on a server handler, dial() for a client.
#include "websocket_handshake.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/server.hpp>
#include <goro/http/websocket.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/tls.hpp>

#include "access.hpp"
#include "h1/message_parser.hpp"
#include "websocket_connection.hpp"

namespace goro::http::websocket {
namespace detail {

// A refused dial keeps at most this much of the server's answer body.
constexpr std::size_t kMaxRefusalBody = 64 * 1024;

namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

std::string base64(const unsigned char* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data,
                                      static_cast<int>(n));
  out.resize(static_cast<std::size_t>(std::max(written, 0)));
  return out;
}

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '+' || c == '/';
}

// Whether any field called name holds token in its comma-separated list.
bool any_field_has_token(std::span<const HeaderField> fields, std::string_view name,
                         std::string_view token) {
  for (const HeaderField& f : fields)
    if (iequals(f.name, name) && has_token(f.value, token)) return true;
  return false;
}

// Calls f with each comma-separated item of every field called name, trimmed.
template <class F>
void for_each_item(std::span<const HeaderField> fields, std::string_view name, F f) {
  for (const HeaderField& field : fields) {
    if (!iequals(field.name, name)) continue;
    std::string_view value = field.value;
    while (!value.empty()) {
      const std::size_t comma = value.find(',');
      std::string_view item = value.substr(0, comma);
      value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (!item.empty()) f(item);
    }
  }
}

// "host:port" without the port when it is the scheme's default.
std::string_view without_default_port(std::string_view authority, bool secure) {
  const std::string_view port = secure ? ":443" : ":80";
  if (authority.size() > port.size() && authority.ends_with(port))
    authority.remove_suffix(port.size());
  return authority;
}

}  // namespace

std::string accept_key(std::string_view key) {
  std::string input(key);
  input.append(kGuid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(input.data(), input.size(), digest, &size, EVP_sha1(), nullptr);
  return base64(digest, size);
}

bool valid_key(std::string_view key) noexcept {
  if (key.size() != 24 || !key.ends_with("==")) return false;
  return std::all_of(key.begin(), key.end() - 2, is_base64_char);
}

bool same_origin(std::string_view origin, std::string_view host) noexcept {
  if (origin.empty()) return true;
  const std::size_t scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;  // "null", or garbage
  const std::string_view scheme = origin.substr(0, scheme_end);
  const bool secure = iequals(scheme, "https") || iequals(scheme, "wss");
  std::string_view authority = origin.substr(scheme_end + 3);
  if (authority.empty() || authority.find_first_of("/?#@") != std::string_view::npos) return false;
  return iequals(without_default_port(authority, secure), without_default_port(host, secure));
}

}  // namespace detail

namespace {

std::error_code refuse(Request& req, ResponseWriter& w, int status, std::string_view why) {
  (void)http::detail::send_builtin_error(
      req, w, status, std::to_string(status) + " " + std::string(why) + "\n", why, "websocket");
  return errc::bad_handshake;
}

// The header fields a handler may not send with the 101: the handshake's own, and those
// that describe a body.
bool handshake_field(std::string_view name) {
  return iequals(name, "upgrade") || iequals(name, "connection") ||
         iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
         (name.size() > 14 && iequals(name.substr(0, 14), "sec-websocket-"));
}

std::optional<std::string> choose_subprotocol(std::span<const HeaderField> fields,
                                              const std::vector<std::string>& ours) {
  std::vector<std::string_view> offered;
  detail::for_each_item(fields, "sec-websocket-protocol",
                        [&](std::string_view item) { offered.push_back(item); });
  for (const std::string& candidate : ours)
    for (std::string_view o : offered)
      if (o == candidate) return candidate;
  return std::nullopt;
}

}  // namespace

Result<WebSocket> accept(Request& req, ResponseWriter& w, const AcceptOptions& options) {
  const std::span<const HeaderField> fields = req.headers();
  if (req.method() != "GET") {
    w.header().set("Allow", "GET");
    return refuse(req, w, 405, "a WebSocket handshake is a GET request");
  }
  if (!detail::any_field_has_token(fields, "upgrade", "websocket")) {
    w.header().set("Upgrade", "websocket");
    w.header().set("Sec-WebSocket-Version", "13");
    return refuse(req, w, 426,
                  "this URL speaks WebSocket: send a handshake with Upgrade: websocket");
  }
  if (!detail::any_field_has_token(fields, "connection", "upgrade"))
    return refuse(req, w, 400, "the Connection header lacks the upgrade token");
  if (req.version_major() != 1 || req.version_minor() < 1)
    return refuse(req, w, 400, "a WebSocket handshake needs HTTP/1.1");
  int versions = 0;
  bool version_13 = false;
  detail::for_each_item(fields, "sec-websocket-version", [&](std::string_view v) {
    ++versions;
    version_13 = v == "13";
  });
  if (versions != 1 || !version_13) {
    w.header().set("Sec-WebSocket-Version", "13");
    return refuse(req, w, 426, "unsupported Sec-WebSocket-Version: this server speaks version 13");
  }
  std::string_view key;
  int keys = 0;
  for (const HeaderField& f : fields) {
    if (iequals(f.name, "sec-websocket-key")) {
      key = f.value;
      ++keys;
    }
  }
  if (keys != 1 || !detail::valid_key(key))
    return refuse(req, w, 400, "a missing or malformed Sec-WebSocket-Key (16 bytes in base64)");
  const bool origin_ok = options.check_origin
                             ? options.check_origin(req)
                             : detail::same_origin(req.header("origin"), req.host());
  if (!origin_ok) return refuse(req, w, 403, "a cross-origin WebSocket request");

  std::optional<detail::ServerAgreement> deflate;
  if (options.compression.enabled) {
    std::vector<detail::Extension> offers;
    for (const HeaderField& f : fields) {
      if (iequals(f.name, "sec-websocket-extensions") && !detail::parse_extensions(f.value, offers))
        return refuse(req, w, 400, "a malformed Sec-WebSocket-Extensions header");
    }
    deflate = detail::negotiate_deflate(offers, options.compression);
  }
  std::optional<std::string> subprotocol = choose_subprotocol(fields, options.subprotocols);

  Result<http::TakenConnection> taken = http::ResponseController(w).take_over();
  if (!taken) {
    (void)http::detail::send_builtin_error(
        req, w, 500, "500 this connection cannot be upgraded to a WebSocket\n",
        "this connection cannot be upgraded to a WebSocket", "websocket");
    return errc::cannot_upgrade;
  }
  net::Stream* stream = taken->stream;

  std::string head =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: ";
  head += detail::accept_key(key);
  head += "\r\n";
  if (subprotocol) head += "Sec-WebSocket-Protocol: " + *subprotocol + "\r\n";
  if (deflate) head += "Sec-WebSocket-Extensions: " + deflate->response + "\r\n";
  for (HeaderField f : w.header()) {
    if (handshake_field(f.name) || f.name.find_first_of("\r\n:") != std::string_view::npos ||
        f.value.find_first_of("\r\n") != std::string_view::npos)
      continue;
    head.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  head += "\r\n";
  // What access logs and metrics see: a 101 with no body (the writer, taken over, sends
  // nothing more).
  w.set_status(101);
  if (options.handshake_timeout.count() > 0)
    stream->set_write_deadline(net::deadline_after(options.handshake_timeout));
  Result<std::size_t> written = stream->write(head.data(), head.size(), req.context());
  stream->set_write_deadline(net::no_deadline);
  if (!written) return written.error();

  detail::Setup setup;
  setup.server = true;
  setup.stream = stream;
  setup.kept = std::move(taken->owner);
  setup.shutdown = http::shutdown_context(req);
  setup.early = std::move(taken->early);
  setup.subprotocol = subprotocol.value_or("");
  if (deflate) setup.deflate = deflate->params;
  setup.compression_level = options.compression.level;
  setup.compression_min_size = options.compression.min_size;
  setup.max_message_size = options.max_message_size;
  setup.close_timeout = options.close_timeout;
  return WebSocket(std::make_unique<detail::Connection>(std::move(setup)));
}

namespace {

// Reads the head of the server's answer (and, for a refusal, some of its body).
Result<ClientResponse> read_answer(net::Stream& stream, http::detail::MessageParser& parser,
                                   const Context& ctx) {
  using http::detail::ParseStatus;
  for (;;) {
    ParseStatus parsed = parser.parse_head();
    if (parsed == ParseStatus::complete) break;
    if (parsed == ParseStatus::error) return http::errc::malformed_response;
    std::span<char> space = parser.read_space();
    Result<std::size_t> n = stream.read(space.data(), space.size(), ctx);
    if (!n) return n.error();
    if (*n == 0) return http::errc::unexpected_eof;
    parser.commit(*n);
  }
  ClientResponse r;
  r.status = parser.status_code();
  r.reason = std::string(parser.status_text());
  r.version_minor = parser.version_minor();
  for (const HeaderField& f : parser.headers()) r.headers.add(f.name, f.value);
  if (r.status == 101) return r;
  // A refusal's body says why; read what comes of it, within the same limits.
  char buf[4096];
  while (r.body.size() < detail::kMaxRefusalBody) {
    if (parser.available() > 0) {
      const std::size_t n = parser.take(buf, sizeof buf);
      r.body.append(buf, n);
      continue;
    }
    if (parser.message_complete()) break;
    ParseStatus parsed = parser.parse_body();
    if (parsed == ParseStatus::error) break;
    if (parsed == ParseStatus::complete || parser.available() > 0) continue;
    std::span<char> space = parser.read_space();
    Result<std::size_t> n = stream.read(space.data(), space.size(), ctx);
    if (!n || *n == 0) {
      if (n && *n == 0) (void)parser.finish_on_eof();
      if (parser.available() == 0) break;
      continue;
    }
    parser.commit(*n);
  }
  r.body.resize(std::min(r.body.size(), detail::kMaxRefusalBody));
  return r;
}

// Checks a 101 answer; the reason it is not a valid handshake, or nullptr.
const char* check_answer(const ClientResponse& r, std::string_view key, const DialOptions& options,
                         std::string& subprotocol,
                         std::optional<detail::DeflateParams>& deflate) {
  std::vector<HeaderField> fields(r.headers.begin(), r.headers.end());
  if (!detail::any_field_has_token(fields, "upgrade", "websocket"))
    return "the answer lacks Upgrade: websocket";
  if (!detail::any_field_has_token(fields, "connection", "upgrade"))
    return "the answer lacks Connection: upgrade";
  if (r.header("sec-websocket-accept") != detail::accept_key(key))
    return "a wrong Sec-WebSocket-Accept";
  std::vector<std::string_view> protocols;
  detail::for_each_item(fields, "sec-websocket-protocol",
                        [&](std::string_view p) { protocols.push_back(p); });
  if (protocols.size() > 1) return "more than one Sec-WebSocket-Protocol in the answer";
  if (protocols.size() == 1) {
    if (std::find(options.subprotocols.begin(), options.subprotocols.end(), protocols[0]) ==
        options.subprotocols.end())
      return "a subprotocol that was not offered";
    subprotocol = std::string(protocols[0]);
  }
  std::vector<detail::Extension> extensions;
  for (const HeaderField& f : fields) {
    if (iequals(f.name, "sec-websocket-extensions") &&
        !detail::parse_extensions(f.value, extensions))
      return "a malformed Sec-WebSocket-Extensions in the answer";
  }
  if (!extensions.empty()) {
    if (!options.compression.enabled) return "an extension that was not offered";
    detail::DeflateParams params;
    if (const char* why = detail::accept_deflate_answer(extensions, options.compression, params))
      return why;
    deflate = params;
  }
  return nullptr;
}

bool header_text(std::string_view s) {
  return s.find_first_of("\r\n") == std::string_view::npos;
}

}  // namespace

Result<WebSocket> dial(std::string_view url, const DialOptions& options,
                       ClientResponse* response) {
  std::string mapped(url);
  if (mapped.size() >= 5 && iequals(std::string_view(mapped).substr(0, 5), "ws://")) {
    mapped.replace(0, 2, "http");
  } else if (mapped.size() >= 6 && iequals(std::string_view(mapped).substr(0, 6), "wss://")) {
    mapped.replace(0, 3, "https");
  }
  Result<Url> parsed = parse_url(mapped);
  if (!parsed) return parsed.error();
  const Url& u = *parsed;
  const bool secure = u.scheme == "https";

  auto [ctx, cancel] = options.handshake_timeout.count() > 0
                           ? goro::with_timeout(options.context, options.handshake_timeout)
                           : goro::with_cancel(options.context);
  Result<net::Conn> conn = net::dial("tcp", net::join_host_port(u.host, u.port), ctx);
  if (!conn) return conn.error();
  std::unique_ptr<net::Stream> stream;
  if (secure) {
    net::TlsConfig config;
    config.ca_file = options.ca_file;
    config.verify = options.verify;
    config.alpn = {"http/1.1"};
    Result<std::shared_ptr<net::TlsContext>> tls = net::TlsContext::client(config);
    if (!tls) return tls.error();
    Result<net::TlsConn> secured =
        net::TlsConn::client(std::make_unique<net::Conn>(std::move(*conn)), *tls, u.host);
    if (!secured) return secured.error();
    if (std::error_code ec = secured->handshake(ctx)) return ec;
    stream = std::make_unique<net::TlsConn>(std::move(*secured));
  } else {
    stream = std::make_unique<net::Conn>(std::move(*conn));
  }

  unsigned char nonce[16];
  if (RAND_bytes(nonce, sizeof nonce) != 1) return std::make_error_code(std::errc::io_error);
  const std::string key = detail::base64(nonce, sizeof nonce);
  std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
  if (u.port != (secure ? 443 : 80)) host += ":" + std::to_string(u.port);
  std::string request = "GET " + u.target + " HTTP/1.1\r\nHost: " + host +
                        "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " +
                        key + "\r\nSec-WebSocket-Version: 13\r\n";
  if (!options.subprotocols.empty()) {
    request += "Sec-WebSocket-Protocol: ";
    for (std::size_t i = 0; i < options.subprotocols.size(); ++i) {
      const std::string& p = options.subprotocols[i];
      if (!http::detail::is_token(p)) return http::errc::invalid_request;
      if (i > 0) request += ", ";
      request += p;
    }
    request += "\r\n";
  }
  if (options.compression.enabled)
    request += "Sec-WebSocket-Extensions: " + detail::deflate_offer(options.compression) + "\r\n";
  for (HeaderField f : options.headers) {
    if (!http::detail::is_token(f.name) || !header_text(f.value)) return http::errc::invalid_request;
    if (handshake_field(f.name) || iequals(f.name, "host")) continue;
    request.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  request += "\r\n";
  Result<std::size_t> written = stream->write(request.data(), request.size(), ctx);
  if (!written) return written.error();

  http::detail::ParserLimits limits;
  limits.max_body_bytes = detail::kMaxRefusalBody;
  http::detail::MessageParser parser(http::detail::MessageParser::Mode::response, limits);
  Result<ClientResponse> answer = read_answer(*stream, parser, ctx);
  if (!answer) return answer.error();
  if (response != nullptr) *response = *answer;
  if (answer->status != 101) return errc::bad_handshake;
  std::string subprotocol;
  std::optional<detail::DeflateParams> deflate;
  if (check_answer(*answer, key, options, subprotocol, deflate) != nullptr)
    return errc::bad_handshake;

  detail::Setup setup;
  setup.server = false;
  setup.stream = stream.get();
  setup.owned = std::move(stream);
  setup.early = std::string(parser.unparsed());
  setup.subprotocol = std::move(subprotocol);
  setup.deflate = deflate;
  setup.compression_level = options.compression.level;
  setup.compression_min_size = options.compression.min_size;
  setup.max_message_size = options.max_message_size;
  setup.close_timeout = options.close_timeout;
  return WebSocket(std::make_unique<detail::Connection>(std::move(setup)));
}

}  // namespace goro::http::websocket
