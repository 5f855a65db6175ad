// redis_reply: bytes as a Redis server's reply, through goro::redis::ReplyParser.
//
// Checked three ways: the input given whole and given as growing prefixes (in the steps
// read_steps draws, one parser kept across them, as a connection's reader keeps it) end
// the same way; a reply parsed whole, written back out in RESP, parses to the same reply;
// a refusal says why. Settings byte: bits 0-1 the read steps; bit 2 small limits (64
// bytes, 4 elements, depth 3) instead of the defaults.
#include <goro/redis/resp.hpp>

#include <string>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

using redis::Reply;
using redis::ReplyParser;

void write(std::string& out, const Reply& r) {
  switch (r.type) {
    case Reply::Type::nil: out += "$-1\r\n"; break;
    case Reply::Type::status: out += "+" + r.str + "\r\n"; break;
    case Reply::Type::error: out += "-" + r.str + "\r\n"; break;
    case Reply::Type::integer: out += ":" + std::to_string(r.integer) + "\r\n"; break;
    case Reply::Type::string:
      out += "$" + std::to_string(r.str.size()) + "\r\n" + r.str + "\r\n";
      break;
    case Reply::Type::array:
      out += "*" + std::to_string(r.elements.size()) + "\r\n";
      for (const Reply& e : r.elements) write(out, e);
      break;
  }
}

}  // namespace

std::string redis_reply(std::string_view input) {
  if (input.empty()) return "";
  const auto settings = static_cast<std::uint8_t>(input[0]);
  input.remove_prefix(1);
  redis::ReplyLimits limits;
  if ((settings & 4) != 0) limits = {.max_bytes = 64, .max_elements = 4, .max_depth = 3};

  ReplyParser whole_parser(limits);
  const ReplyParser::Parsed whole = whole_parser.parse(input);
  if (whole.status == ReplyParser::Status::bad && whole.why.empty())
    return "a refused reply without a reason";
  if (whole.status == ReplyParser::Status::done && (whole.used == 0 || whole.used > input.size()))
    return "a reply that used " + std::to_string(whole.used) + " of " +
           std::to_string(input.size()) + " bytes";

  // Growing prefixes through one parser.
  ReplyParser pieces(limits);
  std::size_t have = 0;
  for (std::size_t step : read_steps(settings)) {
    if (have >= input.size()) break;
    have = std::min(input.size(), have + std::max<std::size_t>(step, 1));
    const ReplyParser::Parsed p = pieces.parse(input.substr(0, have));
    if (p.status == ReplyParser::Status::need_more) continue;
    if (p.status != whole.status) return "in pieces the reply ended otherwise than whole";
    if (p.status == ReplyParser::Status::done && (p.used != whole.used || !(p.reply == whole.reply)))
      return "in pieces the reply differs from the whole one";
    break;
  }

  if (whole.status == ReplyParser::Status::done) {
    std::string again;
    write(again, whole.reply);
    ReplyParser round(limits);
    const ReplyParser::Parsed p = round.parse(again);
    // Written back canonically it may be longer (a "*-1" nil becomes "$-1", leading
    // zeros go): only a larger limit could refuse it.
    if (p.status == ReplyParser::Status::done && !(p.reply == whole.reply))
      return "a reply written back out parses to another";
    if (p.status == ReplyParser::Status::need_more) return "a reply written back out is incomplete";
  }
  return "";
}

}  // namespace goro::fuzz
