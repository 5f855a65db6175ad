// Drives a MessageParser over an input given in pieces, the way the server and the
// client drive it over a connection (read_space, commit, parse).
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "h1/message_parser.hpp"

namespace goro::fuzz {

class ParserFeed {
 public:
  ParserFeed(http::detail::MessageParser& parser, std::string_view input,
             std::vector<std::size_t> steps)
      : parser_(parser), input_(input), steps_(std::move(steps)) {}

  // Moves the next piece of input into the parser; false once the input is used up.
  bool feed() {
    if (input_.empty()) return false;
    std::span<char> space = parser_.read_space();
    std::size_t step = std::max<std::size_t>(1, steps_[next_step_++ % steps_.size()]);
    std::size_t n = std::min({space.size(), step, input_.size()});
    std::memcpy(space.data(), input_.data(), n);
    parser_.commit(n);
    input_.remove_prefix(n);
    return true;
  }

  // Parses the head; need_more when the input ends first.
  http::detail::ParseStatus head() {
    for (;;) {
      http::detail::ParseStatus st = parser_.parse_head();
      if (st != http::detail::ParseStatus::need_more || !feed()) return st;
    }
  }

  // Reads the body into out, as http::Client does; need_more when the input ends
  // first (the caller decides what the end of the input means).
  http::detail::ParseStatus body(std::string& out) {
    for (;;) {
      out.append(parser_.peek_body());
      parser_.skip(parser_.available());
      if (parser_.message_complete()) return http::detail::ParseStatus::complete;
      http::detail::ParseStatus st = parser_.parse_body();
      if (st == http::detail::ParseStatus::error) return st;
      if (st == http::detail::ParseStatus::complete || parser_.available() > 0) continue;
      if (!feed()) return http::detail::ParseStatus::need_more;
    }
  }

  // Input not yet given to the parser.
  std::string_view rest() const noexcept { return input_; }

 private:
  http::detail::MessageParser& parser_;
  std::string_view input_;
  std::vector<std::size_t> steps_;
  std::size_t next_step_ = 0;
};

// A parse step's status, for a property's report.
inline const char* status_name(http::detail::ParseStatus s) {
  switch (s) {
    case http::detail::ParseStatus::complete: return "complete";
    case http::detail::ParseStatus::error: return "error";
    case http::detail::ParseStatus::need_more: return "need_more";
  }
  return "?";
}

}  // namespace goro::fuzz
