// RESP, the Redis serialization protocol (version 2): replies parsed from bytes as they
// arrive, and commands encoded as arrays of bulk strings. What goro::redis::Client
// speaks; public for tests, fuzzing and anyone driving a connection by hand.
//
//   std::string out;
//   goro::redis::append_command(out, {"SET", "k", "v"});   // *3\r\n$3\r\nSET\r\n...
//   goro::redis::ReplyParser p;
//   auto r = p.parse(bytes);   // need_more (read more and call again), done or bad
//
// A reply is one of: a simple string ("+OK"), an error ("-ERR ..."), an integer
// (":42"), a bulk string ("$5\r\nhello", or "$-1" for nil) and an array ("*2 ...", or
// "*-1" for nil) whose elements are replies. Lines end in CRLF. Anything else — another
// type byte, a bare LF, a length or integer that is not a decimal number, a bulk string
// not followed by CRLF — is refused with a sentence naming the fault. Limits bound what
// a server (or whatever answers in its place) can make the client hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace goro::redis {

struct Reply {
  enum class Type : std::uint8_t { nil, status, error, integer, string, array };

  Type type = Type::nil;
  std::string str;              // status, error and string: the text (binary-safe)
  long long integer = 0;        // integer
  std::vector<Reply> elements;  // array

  bool is_nil() const noexcept { return type == Type::nil; }
  bool is_error() const noexcept { return type == Type::error; }
  bool is_status() const noexcept { return type == Type::status; }
  bool is_string() const noexcept { return type == Type::string; }
  bool is_integer() const noexcept { return type == Type::integer; }
  bool is_array() const noexcept { return type == Type::array; }

  static Reply nil() { return {}; }
  static Reply of_status(std::string s) { return {Type::status, std::move(s), 0, {}}; }
  static Reply of_error(std::string s) { return {Type::error, std::move(s), 0, {}}; }
  static Reply of_integer(long long n) { return {Type::integer, {}, n, {}}; }
  static Reply of_string(std::string s) { return {Type::string, std::move(s), 0, {}}; }
  static Reply of_array(std::vector<Reply> e) { return {Type::array, {}, 0, std::move(e)}; }

  friend bool operator==(const Reply&, const Reply&) = default;
};

// How much one reply may hold; a reply past a limit is refused (ReplyParser::Status::bad).
struct ReplyLimits {
  std::size_t max_bytes = 512u << 20;    // the whole reply as sent (Redis' own bulk limit)
  std::size_t max_elements = 1u << 24;   // elements of one array
  std::size_t max_depth = 64;            // arrays within arrays
};

class ReplyParser {
 public:
  enum class Status : std::uint8_t { done, need_more, bad };
  struct Parsed {
    Status status = Status::need_more;
    std::size_t used = 0;  // done: bytes of the input the reply took
    Reply reply;           // done: the reply
    std::string why;       // bad: what is wrong
  };

  explicit ReplyParser(ReplyLimits limits = {}) noexcept : limits_(limits) {}

  // Parses the reply at the start of in. need_more when in holds only part of one (call
  // again with the same bytes and more after them); the parser remembers how many bytes
  // it must see before looking again, so a large reply arriving in pieces is scanned a
  // bounded number of times.
  Parsed parse(std::string_view in);

 private:
  ReplyLimits limits_;
  std::size_t wait_for_ = 0;  // need_more: parse again once in holds this many bytes
};

// Appends a command — its words as bulk strings, binary-safe — in RESP.
void append_command(std::string& out, std::span<const std::string_view> words);
void append_command(std::string& out, std::initializer_list<std::string_view> words);

}  // namespace goro::redis
