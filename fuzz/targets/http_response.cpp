// http_response: what http::Client makes of the bytes a server sends. MessageParser in
// response mode is driven as the client drives it: interim 1xx responses skipped (at
// most 5), a response to HEAD without a body, a body delimited by the close, and up to
// three responses on one connection. The result, given the input in pieces, must equal
// the result given it in one piece, and a body that completes must have the length its
// Content-Length announced.
//
// Settings byte: bits 0-1 how the input is split into reads (read_steps); bit 2 the
// request was HEAD.
#include <string>

#include "harness.hpp"
#include "parser_feed.hpp"

namespace goro::fuzz {
namespace {

using http::detail::MessageParser;
using http::detail::ParseStatus;

struct Response {
  int status = 0;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool operator==(const Response&) const = default;
};

struct Outcome {
  std::vector<Response> responses;
  int error_status = 0;  // the parser's, or -1: the input ended inside a head
  bool operator==(const Outcome&) const = default;
};

Outcome read_responses(std::string_view input, std::vector<std::size_t> steps, bool head,
                       std::string& failure) {
  MessageParser p(MessageParser::Mode::response, {8 * 1024, 4 * 1024, 64 * 1024}, 128);
  ParserFeed feed(p, input, std::move(steps));
  Outcome out;
  for (int n = 0; n < 3; ++n) {
    if (n > 0 && p.buffered() == 0 && feed.rest().empty()) break;
    p.set_response_to_head(head);
    ParseStatus st = ParseStatus::need_more;
    for (int interim = 0; interim <= 5; ++interim) {
      st = feed.head();
      if (st != ParseStatus::complete || p.status_code() < 100 || p.status_code() >= 200 ||
          p.status_code() == 101)
        break;
      p.next_message();
      p.set_response_to_head(head);
    }
    if (st == ParseStatus::error) {
      out.error_status = p.error().status;
      return out;
    }
    if (st == ParseStatus::need_more) {
      out.error_status = -1;
      return out;
    }
    Response r;
    r.status = p.status_code();
    r.reason = std::string(p.status_text());
    for (const http::HeaderField& f : p.headers()) r.headers.emplace_back(f.name, f.value);
    st = feed.body(r.body);
    if (st == ParseStatus::need_more) {
      st = p.finish_on_eof();
      r.body.append(p.peek_body());
      p.skip(p.available());
    }
    if (st == ParseStatus::error) {
      out.error_status = p.error().status;
      return out;
    }
    const bool bodiless = head || r.status == 204 || r.status == 304 || r.status < 200;
    if (!bodiless && !p.chunked() && p.content_length() >= 0 &&
        r.body.size() != static_cast<std::uint64_t>(p.content_length())) {
      failure = "a body of " + std::to_string(r.body.size()) +
                " bytes completed a Content-Length of " + std::to_string(p.content_length());
    }
    out.responses.push_back(std::move(r));
    if (!p.keep_alive() || p.upgrade()) break;
    p.next_message();
  }
  return out;
}

}  // namespace

std::string http_response(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  input.remove_prefix(1);
  const bool head = (settings & 0x04) != 0;
  std::string failure;
  Outcome split = read_responses(input, read_steps(settings), head, failure);
  if (!failure.empty()) return failure;
  Outcome whole = read_responses(input, read_steps(0), head, failure);
  if (!failure.empty()) return failure;
  if (!(split == whole)) return "other responses in pieces than in one piece";
  return {};
}

}  // namespace goro::fuzz
