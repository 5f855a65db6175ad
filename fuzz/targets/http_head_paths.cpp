// http_head_paths: the server's two readers of a request head against each other.
//
// MessageParser reads a plain request head itself and hands every other input to
// llhttp (message_parser.hpp, parse_head). The input goes through two parsers, the same
// reads for both: one that may read heads itself, one that gives everything to llhttp.
// Message after message (up to 8, pipelined), everything a caller can see must be the
// same: the status of each step, the error's status and text, the method, target,
// version and fields, the framing and the connection's fate, the body, what is left
// unparsed, and what expose_partial_head() shows of a refused head.
//
// Settings byte: bits 0-1 how the input is split into reads (read_steps); bit 2 small
// limits (a 64-byte target, 128 bytes of fields), so heads past a limit are tried; bit 3
// a 64-byte initial buffer, which grows while a head is read.
#include <string>

#include "harness.hpp"
#include "parser_feed.hpp"

namespace goro::fuzz {
namespace {

using http::detail::MessageParser;
using http::detail::ParseStatus;
using http::detail::ParserLimits;

// What a caller sees of the head just parsed (or refused), as one string.
std::string describe(MessageParser& p, ParseStatus st) {
  std::string d = status_name(st);
  if (st == ParseStatus::error) {
    d += " " + std::to_string(p.error().status) + " " + p.error().message;
    if (!p.expose_partial_head()) return d + " | no partial head";
    d += " | partial:";
  } else if (st != ParseStatus::complete) {
    return d + " started=" + std::to_string(p.head_started());
  }
  d += " " + std::string(p.method()) + " " + std::string(p.target());
  // (A refused head has no version to show.)
  if (st == ParseStatus::complete)
    d += " HTTP/" + std::to_string(p.version_major()) + "." + std::to_string(p.version_minor());
  d += " head=" + std::to_string(p.is_head_method());
  for (const http::HeaderField& f : p.headers()) {
    d += " [" + std::string(f.name) + "]=[" + std::string(f.value) + "]";
  }
  if (st != ParseStatus::complete) return d;
  d += " length=" + std::to_string(p.content_length()) + " chunked=" + std::to_string(p.chunked()) +
       " keep=" + std::to_string(p.keep_alive()) + " upgrade=" + std::to_string(p.upgrade()) +
       " continue=" + std::to_string(p.expect_continue()) +
       " complete=" + std::to_string(p.message_complete());
  return d;
}

// Every message of the input through p, described one after another.
std::string run(std::string_view input, std::uint8_t settings, bool plain_heads) {
  ParserLimits limits;
  if (settings & 4) limits = {64, 128, 1 << 16};
  MessageParser p(MessageParser::Mode::request, limits, (settings & 8) ? 64 : 4096);
  p.set_plain_heads(plain_heads);
  ParserFeed feed(p, input, read_steps(settings));
  std::string out;
  for (int message = 0; message < 8; ++message) {
    ParseStatus st = feed.head();
    out += describe(p, st) + "\n";
    if (st != ParseStatus::complete) break;
    std::string body;
    st = feed.body(body);
    out += std::string("body ") + status_name(st) + " " + std::to_string(body.size()) + " [" + body + "]";
    if (st == ParseStatus::error) out += " " + std::to_string(p.error().status);
    out += "\n";
    if (st != ParseStatus::complete || !p.keep_alive() || p.upgrade()) break;
    p.next_message();
  }
  out += "unparsed [" + std::string(p.unparsed()) + std::string(feed.rest()) + "]";
  return out;
}

// s with its bytes outside printable ASCII written as \xNN, so that a report shows all of
// both runs (a NUL would end it).
std::string escaped(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if ((b >= 0x20 && b < 0x7f && b != '\\') || b == '\n') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

}  // namespace

std::string http_head_paths(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input.front());
  input.remove_prefix(1);
  const std::string plain = run(input, settings, true);
  const std::string llhttp = run(input, settings, false);
  if (plain == llhttp) return {};
  return "the plain-head reader and llhttp disagree:\n--- with plain heads\n" + escaped(plain) +
         "\n--- llhttp only\n" + escaped(llhttp);
}

}  // namespace goro::fuzz
