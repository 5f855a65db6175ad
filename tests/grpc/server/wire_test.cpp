// The gRPC wire pieces (grpc/src/wire): the message decoder on whole, split, truncated,
// oversized and malformed input; grpc-timeout; grpc-message's percent-encoding; base64
// of -bin metadata; gzip.
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <string>

#include "wire/wire.hpp"

namespace goro::grpc::wire {
namespace {

using namespace std::chrono_literals;

std::string frame(std::string_view payload, bool compressed = false) {
  std::string out(kMessageHeaderSize, '\0');
  write_message_header(out.data(), compressed, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

TEST(MessageDecoder, SplitsMessagesArrivingByteByByte) {
  const std::string stream = frame("hello") + frame("") + frame(std::string(70000, 'x'), true);
  MessageDecoder d(1 << 20);
  std::vector<std::pair<bool, std::string>> got;
  for (char c : stream) {
    d.append(std::string_view(&c, 1));
    MessageDecoder::Message m;
    while (d.next(m) == MessageDecoder::Result::message)
      got.emplace_back(m.compressed, std::string(m.payload));
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], std::make_pair(false, std::string("hello")));
  EXPECT_EQ(got[1], std::make_pair(false, std::string()));
  EXPECT_EQ(got[2], std::make_pair(true, std::string(70000, 'x')));
  EXPECT_TRUE(d.finish().ok());
}

TEST(MessageDecoder, TruncatedStreamIsInternal) {
  for (std::size_t cut : {1u, 4u, 5u, 8u}) {
    MessageDecoder d;
    d.append(frame("hello").substr(0, cut));
    MessageDecoder::Message m;
    EXPECT_EQ(d.next(m), MessageDecoder::Result::need_more);
    EXPECT_EQ(d.finish().code(), StatusCode::internal) << "cut at " << cut;
  }
}

TEST(MessageDecoder, OversizedLengthIsResourceExhaustedBeforeThePayloadArrives) {
  MessageDecoder d(100);
  std::string header(kMessageHeaderSize, '\0');
  write_message_header(header.data(), false, 101);
  d.append(header);  // no payload: the prefix alone decides
  MessageDecoder::Message m;
  EXPECT_EQ(d.next(m), MessageDecoder::Result::error);
  EXPECT_EQ(d.error().code(), StatusCode::resource_exhausted);
  EXPECT_EQ(d.next(m), MessageDecoder::Result::error);  // and stays so

  MessageDecoder huge;  // 4 GiB - 1 against the default 4 MiB
  huge.append(std::string("\0\xff\xff\xff\xff", 5));
  EXPECT_EQ(huge.next(m), MessageDecoder::Result::error);
  EXPECT_EQ(huge.error().code(), StatusCode::resource_exhausted);

  MessageDecoder exact(5);
  exact.append(frame("12345"));
  EXPECT_EQ(exact.next(m), MessageDecoder::Result::message);
}

TEST(MessageDecoder, FlagsOtherThanZeroOrOneAreInternal) {
  for (unsigned char flag : {2, 0x80, 0xff}) {
    MessageDecoder d;
    std::string f = frame("x");
    f[0] = static_cast<char>(flag);
    d.append(f);
    MessageDecoder::Message m;
    EXPECT_EQ(d.next(m), MessageDecoder::Result::error);
    EXPECT_EQ(d.error().code(), StatusCode::internal);
  }
}

TEST(Timeout, ParsesEveryUnit) {
  EXPECT_EQ(parse_timeout("1H"), std::chrono::nanoseconds(1h));
  EXPECT_EQ(parse_timeout("2M"), std::chrono::nanoseconds(2min));
  EXPECT_EQ(parse_timeout("3S"), std::chrono::nanoseconds(3s));
  EXPECT_EQ(parse_timeout("40m"), std::chrono::nanoseconds(40ms));
  EXPECT_EQ(parse_timeout("500u"), std::chrono::nanoseconds(500us));
  EXPECT_EQ(parse_timeout("99999999n"), std::chrono::nanoseconds(99999999));
  EXPECT_EQ(parse_timeout("0n"), std::chrono::nanoseconds(0));
}

TEST(Timeout, TheLongestValuesAreCappedNotOverflowed) {
  // 99999999 hours does not fit in nanoseconds; a century stands in for it.
  constexpr std::chrono::nanoseconds century = std::chrono::hours(24 * 365 * 100);
  EXPECT_EQ(parse_timeout("99999999H"), century);
  EXPECT_EQ(parse_timeout("99999999M"), century);
  EXPECT_EQ(parse_timeout("99999999S"), std::chrono::nanoseconds(99999999s));
  EXPECT_GT(*parse_timeout("99999999S"), std::chrono::nanoseconds(0));
}

TEST(Timeout, RejectsMalformedValues) {
  for (std::string_view bad :
       {"", "S", "10", "123456789S", "1s", "-1S", "1.5S", " 1S", "1 S", "1x"})
    EXPECT_FALSE(parse_timeout(bad).has_value()) << bad;
}

TEST(Timeout, FormatsWithAtMostEightDigitsNeverShorter) {
  EXPECT_EQ(format_timeout(1500us), "1500000n");
  EXPECT_EQ(format_timeout(250ms), "250000u");
  EXPECT_EQ(format_timeout(100s), "100000m");
  EXPECT_EQ(format_timeout(std::chrono::nanoseconds(100000001)), "100001u");  // rounded up
  EXPECT_EQ(format_timeout(std::chrono::nanoseconds(-5)), "1n");
  for (std::chrono::nanoseconds d :
       {std::chrono::nanoseconds(1ns), std::chrono::nanoseconds(999ms),
        std::chrono::nanoseconds(3s), std::chrono::nanoseconds(5min), std::chrono::nanoseconds(20h),
        std::chrono::nanoseconds(123456789123)}) {
    const std::string text = format_timeout(d);
    EXPECT_LE(text.size(), 9u) << text;
    auto back = parse_timeout(text);
    ASSERT_TRUE(back) << text;
    EXPECT_GE(*back, d) << text;
  }
}

TEST(PercentEncoding, EncodesWhatTheSpecSaysAndRoundTrips) {
  EXPECT_EQ(percent_encode("plain text ok"), "plain text ok");
  EXPECT_EQ(percent_encode("100%"), "100%25");
  EXPECT_EQ(percent_encode("a\nb"), "a%0Ab");
  EXPECT_EQ(percent_encode("\xe2\x82\xac"), "%E2%82%AC");  // UTF-8 bytes
  const std::string all = [] {
    std::string s;
    for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
    return s;
  }();
  EXPECT_EQ(percent_decode(percent_encode(all)), all);
}

TEST(PercentEncoding, DecodingIsLenientWithBadEscapes) {
  EXPECT_EQ(percent_decode("%41%zz%4"), "A%zz%4");
  EXPECT_EQ(percent_decode("%"), "%");
  EXPECT_EQ(percent_decode("%e2%82%ac"), "\xe2\x82\xac");
}

TEST(Base64, EncodesUnpaddedAndDecodesBoth) {
  EXPECT_EQ(base64_encode("f"), "Zg");
  EXPECT_EQ(base64_encode("fo"), "Zm8");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("fo", true), "Zm8=");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
  EXPECT_EQ(base64_decode("Zm8"), "fo");
  EXPECT_EQ(base64_decode(""), "");
  const std::string bytes("\x00\xff\xfe\x01\x80", 5);
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
}

TEST(Base64, RejectsMalformedText) {
  for (std::string_view bad : {"Z", "Zm9v!", "Zm 9v", "Zm9vZ"})
    EXPECT_FALSE(base64_decode(bad)) << bad;
}

TEST(Gzip, RoundTripsAndEnforcesTheLimitWhileInflating) {
  const std::string text(100000, 'a');
  std::string packed;
  compress(Compression::gzip, text, packed);
  EXPECT_LT(packed.size(), 1000u);
  std::string out;
  ASSERT_TRUE(decompress(Compression::gzip, packed, out, text.size()).ok());
  EXPECT_EQ(out, text);
  EXPECT_EQ(decompress(Compression::gzip, packed, out, text.size() - 1).code(),
            StatusCode::resource_exhausted);
}

TEST(Gzip, CorruptOrTruncatedInputIsInternal) {
  std::string packed;
  compress(Compression::gzip, "hello hello hello", packed);
  std::string out;
  EXPECT_EQ(decompress(Compression::gzip, packed.substr(0, packed.size() - 3), out, 1000).code(),
            StatusCode::internal);
  EXPECT_EQ(decompress(Compression::gzip, "not gzip at all", out, 1000).code(),
            StatusCode::internal);
  EXPECT_EQ(decompress(Compression::gzip, "", out, 1000).code(), StatusCode::internal);
  EXPECT_EQ(decompress(Compression::gzip, packed + "junk", out, 1000).code(), StatusCode::internal);
}

TEST(ParseMessage, EachMalformedMessageGetsTheStatusTheSpecNames) {
  google::protobuf::Struct original;
  (*original.mutable_fields())["k"].set_string_value(std::string(3000, 'v'));
  const std::string bytes = original.SerializeAsString();
  std::string packed;
  compress(Compression::gzip, bytes, packed);
  std::string scratch;
  google::protobuf::Struct got;
  const auto parse = [&](std::string_view payload, bool compressed, std::string_view encoding,
                         std::size_t max = 1 << 20) {
    return parse_message({compressed, payload}, encoding, max, scratch, got);
  };
  EXPECT_TRUE(parse(bytes, false, "").ok());
  EXPECT_TRUE(parse(packed, true, "gzip").ok());
  EXPECT_EQ(got.fields().at("k").string_value().size(), 3000u);
  EXPECT_TRUE(parse(bytes, false, "snappy").ok()) << "an uncompressed message needs no codec";
  EXPECT_EQ(parse(packed, true, "").code(), StatusCode::internal);
  EXPECT_EQ(parse(packed, true, "identity").code(), StatusCode::internal);
  EXPECT_EQ(parse(packed, true, "snappy").code(), StatusCode::unimplemented);
  EXPECT_EQ(parse(packed, true, "gzip", 1000).code(), StatusCode::resource_exhausted);
  EXPECT_EQ(parse("\x0a\x64"
                  "a",
                  false, "")
                .code(),
            StatusCode::internal);  // 100 bytes declared, 1 sent
  EXPECT_EQ(parse(bytes, true, "gzip").code(), StatusCode::internal) << "not gzip";
}

TEST(Encodings, NamesAndAcceptLists) {
  EXPECT_EQ(parse_encoding("gzip"), Compression::gzip);
  EXPECT_EQ(parse_encoding("identity"), Compression::identity);
  EXPECT_FALSE(parse_encoding("snappy"));
  EXPECT_TRUE(accepts_encoding("identity, deflate, gzip", Compression::gzip));
  EXPECT_FALSE(accepts_encoding("identity,deflate", Compression::gzip));
}

TEST(Mapping, HttpStatusToGrpcAndContentTypes) {
  EXPECT_EQ(status_from_http(404), StatusCode::unimplemented);
  EXPECT_EQ(status_from_http(503), StatusCode::unavailable);
  EXPECT_EQ(status_from_http(401), StatusCode::unauthenticated);
  EXPECT_EQ(status_from_http(418), StatusCode::unknown);
  EXPECT_TRUE(is_grpc_content_type("application/grpc"));
  EXPECT_TRUE(is_grpc_content_type("application/grpc+proto"));
  EXPECT_TRUE(is_grpc_content_type("Application/GRPC;charset=x"));
  EXPECT_FALSE(is_grpc_content_type("application/grpcx"));
  EXPECT_FALSE(is_grpc_content_type("application/json"));
  EXPECT_EQ(parse_status_code("14"), StatusCode::unavailable);
  EXPECT_FALSE(parse_status_code("x"));
  EXPECT_FALSE(parse_status_code(""));
}

}  // namespace
}  // namespace goro::grpc::wire
