// http_url: URL parsing, percent-decoding, and a request target's path and query.
//
// The whole input is tried as each of: a URL for the client (parse_url), which must
// give a request line and Host header that goro's own server parser accepts unchanged;
// a %-encoded string, whose decoding must agree with the escapes it holds; a request
// target, whose path, raw path and query must be the parts of the target and whose
// query parameters must each be found.
#include <string>

#include <goro/http/client.hpp>
#include <goro/net/addr.hpp>

#include "access.hpp"
#include "harness.hpp"
#include "parser_feed.hpp"

namespace goro::fuzz {
namespace {

using http::detail::MessageParser;
using http::detail::ParseStatus;

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string check_url(std::string_view input) {
  Result<http::Url> url = http::parse_url(input);
  if (!url) return {};
  if (url->scheme != "http" && url->scheme != "https") return "parse_url: scheme " + url->scheme;
  if (url->host.empty() || url->port == 0) return "parse_url: no host or port";
  // What http::Client sends for it (client.cpp, Client::Impl::exchange).
  const bool default_port =
      (url->scheme == "http" && url->port == 80) || (url->scheme == "https" && url->port == 443);
  std::string host =
      default_port ? (url->host.find(':') != std::string::npos ? "[" + url->host + "]" : url->host)
                   : net::join_host_port(url->host, url->port);
  std::string request = "GET " + url->target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
  MessageParser p(MessageParser::Mode::request, {64 * 1024, 64 * 1024, 0});
  ParserFeed feed(p, request, read_steps(0));
  if (feed.head() != ParseStatus::complete) {
    return "parse_url: the request the client would send is refused (" +
           std::string(p.error().message) + "): " + request;
  }
  if (p.target() != url->target || p.header("host") != host)
    return "parse_url: the server reads another target or Host than the client sent";
  return {};
}

std::string check_percent(std::string_view input) {
  for (bool plus : {false, true}) {
    std::string out;
    const bool ok = http::detail::percent_decode(input, out, plus);
    std::size_t escapes = 0;
    bool valid = true;
    for (std::size_t i = 0; i < input.size(); ++i) {
      if (input[i] != '%') continue;
      if (i + 2 >= input.size()) {
        valid = false;
        break;
      }
      if (hex(input[i + 1]) < 0 || hex(input[i + 2]) < 0) {
        valid = false;
        break;
      }
      ++escapes;
      i += 2;
    }
    if (ok != valid)
      return ok ? "percent_decode accepted a bad escape" : "percent_decode refused valid escapes";
    if (!ok) continue;
    if (out.size() != input.size() - 2 * escapes) return "percent_decode: wrong length";
    // Escaping every byte of the result and decoding it again gives the result back.
    std::string escaped, again;
    for (unsigned char c : out) {
      escaped.push_back('%');
      escaped.push_back("0123456789ABCDEF"[c >> 4]);
      escaped.push_back("0123456789abcdef"[c & 15]);
    }
    if (!http::detail::percent_decode(escaped, again, plus) || again != out)
      return "percent_decode does not undo escaping";
  }
  return {};
}

std::string check_target(std::string_view target) {
  static const http::HeaderField host[] = {{"Host", "x"}};
  http::Request req;
  const bool ok = http::detail::RequestAccess::prepare(req, "GET", target, host, nullptr);
  std::string_view raw_path = req.raw_path(), raw_query = req.raw_query();
  if (!target.empty() && target.front() == '/') {
    if (!target.starts_with(raw_path)) return "target: the raw path is not where the target starts";
    std::string_view after = target.substr(raw_path.size());
    if (!after.empty() && after.front() != '?' && after.front() != '#')
      return "target: the raw path stops before the query";
  }
  if (!raw_query.empty()) {
    std::size_t q = target.find('?');
    if (q == std::string_view::npos || target.substr(q + 1, raw_query.size()) != raw_query)
      return "target: the raw query is not what follows '?'";
    if (raw_query.find('#') != std::string_view::npos)
      return "target: the fragment is in the query";
  }
  std::string decoded;
  const bool decodes = http::detail::percent_decode(raw_path, decoded, false);
  if (ok != decodes) return "target: prepare and percent_decode disagree on the path";
  if (ok && req.path() != decoded) return "target: path() is not the decoded raw path";
  // Every parameter whose name decodes is found by that name.
  std::string_view rest = raw_query;
  for (int n = 0; n < 16 && !rest.empty(); ++n) {
    std::size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    std::string key, value;
    if (pair.empty()) continue;
    std::size_t eq = pair.find('=');
    if (!http::detail::percent_decode(pair.substr(0, eq), key, true)) continue;
    std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    if (!http::detail::percent_decode(raw_value, value, true)) continue;
    if (!req.query(key)) return "target: query parameter \"" + key + "\" not found";
  }
  return {};
}

}  // namespace

std::string http_url(std::string_view input) {
  if (std::string failure = check_url(input); !failure.empty()) return failure;
  if (std::string failure = check_percent(input); !failure.empty()) return failure;
  return check_target(input);
}

}  // namespace goro::fuzz
