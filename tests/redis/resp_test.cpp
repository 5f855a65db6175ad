// RESP: every reply type parsed whole and in pieces, commands encoded, and malformed or
// oversized replies refused with a sentence naming the fault.
#include <goro/redis/resp.hpp>

#include <gtest/gtest.h>

#include <string>

namespace goro::redis {
namespace {

using Status = ReplyParser::Status;

ReplyParser::Parsed parse(std::string_view in, ReplyLimits limits = {}) {
  ReplyParser p(limits);
  return p.parse(in);
}

TEST(Resp, EachTypeOfReply) {
  EXPECT_EQ(parse("+OK\r\n").reply, Reply::of_status("OK"));
  EXPECT_EQ(parse("-ERR wrong\r\n").reply, Reply::of_error("ERR wrong"));
  EXPECT_EQ(parse(":-42\r\n").reply, Reply::of_integer(-42));
  EXPECT_EQ(parse("$5\r\nhe\r\no\r\n").reply, Reply::of_string("he\r\no"));
  EXPECT_EQ(parse("$0\r\n\r\n").reply, Reply::of_string(""));
  EXPECT_TRUE(parse("$-1\r\n").reply.is_nil());
  EXPECT_TRUE(parse("*-1\r\n").reply.is_nil());
  EXPECT_EQ(parse("*0\r\n").reply, Reply::of_array({}));
  const auto nested = parse("*3\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n+x\r\n");
  ASSERT_EQ(nested.status, Status::done);
  EXPECT_EQ(nested.reply, Reply::of_array({Reply::of_integer(1),
                                           Reply::of_array({Reply::of_string("a"), Reply::nil()}),
                                           Reply::of_status("x")}));
  EXPECT_EQ(parse(":9223372036854775807\r\n").reply.integer, 9223372036854775807LL);
}

TEST(Resp, UsesOnlyTheFirstReply) {
  const auto p = parse(":1\r\n:2\r\n");
  ASSERT_EQ(p.status, Status::done);
  EXPECT_EQ(p.used, 4u);
  EXPECT_EQ(p.reply.integer, 1);
}

// Every prefix of a reply is need_more, and the whole is the same reply: what a reader
// sees when the bytes arrive one at a time.
TEST(Resp, ReplyInPiecesNeedsMoreUntilWhole) {
  const std::string wire = "*4\r\n$3\r\nfoo\r\n:12\r\n*1\r\n-E x\r\n$-1\r\n";
  ReplyParser p;
  for (std::size_t n = 0; n < wire.size(); ++n) {
    const auto r = p.parse(std::string_view(wire).substr(0, n));
    ASSERT_EQ(r.status, Status::need_more) << "after " << n << " bytes";
  }
  const auto r = p.parse(wire);
  ASSERT_EQ(r.status, Status::done);
  EXPECT_EQ(r.used, wire.size());
  EXPECT_EQ(r.reply.elements.size(), 4u);
  EXPECT_EQ(r.reply.elements[2].elements[0], Reply::of_error("E x"));
}

TEST(Resp, MalformedRepliesAreRefusedWithTheFault) {
  struct Case {
    const char* wire;
    const char* why;
  };
  for (const Case& c : {
           Case{"%2\r\n", "unknown type byte"},
           Case{"+OK\n", "bare LF"},
           Case{"+O\rK\r\n", "CR not followed by LF"},
           Case{":12a\r\n", "not a decimal integer"},
           Case{":\r\n", "empty"},
           Case{":+1\r\n", "not a decimal integer"},
           Case{":99999999999999999999\r\n", "not a decimal integer"},
           Case{"$-2\r\n", "negative"},
           Case{"*-5\r\n", "negative"},
           Case{"$3\r\nabcd\r\n", "not followed by CRLF"},
           Case{"$12345678901234567890123\r\n", "longer than its limit"},
       }) {
    const auto r = parse(c.wire);
    EXPECT_EQ(r.status, Status::bad) << c.wire;
    EXPECT_NE(r.why.find(c.why), std::string::npos) << c.wire << ": " << r.why;
  }
}

TEST(Resp, LimitsBoundWhatAReplyMayHold) {
  ReplyLimits small{.max_bytes = 64, .max_elements = 3, .max_depth = 2};
  EXPECT_EQ(parse("$100\r\n", small).status, Status::bad);  // refused before its bytes
  EXPECT_NE(parse("$100\r\n", small).why.find("larger than the reply limit"), std::string::npos);
  EXPECT_EQ(parse("*4\r\n", small).status, Status::bad);
  EXPECT_EQ(parse("*1\r\n*1\r\n*1\r\n:1\r\n", small).status, Status::bad);
  EXPECT_EQ(parse("*1\r\n*1\r\n:1\r\n", small).status, Status::done);
  EXPECT_EQ(parse("+" + std::string(100, 'x') + "\r\n", small).status, Status::bad);
  // A status line that never ends is refused once past the limit, not buffered forever.
  EXPECT_EQ(parse("+" + std::string(70, 'x'), small).status, Status::bad);
  // Many small elements add up past max_bytes.
  std::string many = "*3\r\n";
  for (int i = 0; i < 3; ++i) many += "$20\r\n" + std::string(20, 'y') + "\r\n";
  EXPECT_EQ(parse(many, small).status, Status::bad);
}

TEST(Resp, CommandsAreArraysOfBulkStrings) {
  std::string out;
  append_command(out, {"SET", "k", std::string_view("a\0\r\nb", 5)});
  static constexpr char kWire[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\0\r\nb\r\n";
  EXPECT_EQ(out, std::string(kWire, sizeof kWire - 1));
  // What a server reads back as an array of bulk strings, the same words.
  const auto r = parse(out);
  ASSERT_EQ(r.status, Status::done);
  EXPECT_EQ(r.reply.elements[2].str, std::string("a\0\r\nb", 5));
}

}  // namespace
}  // namespace goro::redis
