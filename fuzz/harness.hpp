// goro's fuzz targets, as plain functions of one input.
//
// Each returns an empty string when the code under test handled the input and every
// property the target checks held, else a sentence saying what broke. A crash, a
// sanitizer report or a hang is a failure too. fuzz/driver.cpp makes one of them a
// libFuzzer executable (<name>_fuzz); tests/fuzz replays fuzz/corpus/<name>/ through
// them in every build.
//
// Several targets read their first input byte as settings (how the input is split
// into reads, which limits apply) and the rest as the bytes under test; the seeds in
// fuzz/corpus/ start with that byte. What each byte means is said at each target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace goro::fuzz {

// Bytes in → responses out through http::Server::serve_conn on an in-memory stream,
// with a router, pipelining and (small) limits.
std::string http_server(std::string_view input);
// A chunked request body through the server's MessageParser, checked against a plain
// decoder written from RFC 9112 7.1 and against itself fed in other pieces.
std::string http_chunked(std::string_view input);
// A request head through MessageParser's own reader of plain heads and through llhttp
// alone: the two must agree on everything a caller sees, message after message.
std::string http_head_paths(std::string_view input);
// The client's response parsing: MessageParser in response mode, as http::Client
// drives it (interim responses, HEAD, a body delimited by the close).
std::string http_response(std::string_view input);
// Bytes in as an HTTP/2 client's after the preface → the server's HTTP/2 path (h2c),
// whose output must be a well-formed frame sequence (RFC 9113) answering the requests.
std::string http2_server(std::string_view input);
// Router patterns from the input registered, then requests dispatched to them.
std::string http_router(std::string_view input);
// parse_url, percent-decoding, the request target's path and query.
std::string http_url(std::string_view input);
// Bytes in as a TLS client's → the TLS server side and the HTTP server behind it.
std::string tls_server(std::string_view input);
// WebSocket frames through the frame decoder, whole and in pieces (both roles, with and
// without permessage-deflate).
std::string websocket_frame(std::string_view input);

// A gRPC call's request body (length-prefixed messages) through the framing decoder,
// decompression and protobuf parsing: each malformed input ends in the status the
// protocol names, whole or in pieces.
std::string grpc_message(std::string_view input);

// Bytes as a Redis server's reply through goro::redis::ReplyParser: whole and in
// pieces alike, and a parsed reply written back out parses the same.
std::string redis_reply(std::string_view input);

// Bytes as a PostgreSQL column's value through goro::pg::Row::get's parsers, each
// checked against a reading written differently and against its own output read back.
std::string pg_value(std::string_view input);

// An X-Forwarded-For value through forwarded_address (the rate_limit key parser),
// checked against a plain reading of the field.
std::string rate_limit_key(std::string_view input);

// A W3C traceparent value (against a reading written differently) and tracestate
// header lines (the kept list within the spec's limits, made of the input's members).
std::string trace_context(std::string_view input);

// An Accept-Encoding value through negotiate_encoding (http/content_coding.hpp): the
// coding chosen is the offered one weighed highest, the earliest among equals.
std::string accept_encoding(std::string_view input);
// An urlencoded form through parse_urlencoded, and back through Values::encode.
std::string form_urlencoded(std::string_view input);
// A multipart body through MultipartReader, whole and in pieces.
std::string multipart(std::string_view input);
// A Cookie header through parse_cookie_header; Set-Cookie from the input's bytes.
std::string cookie(std::string_view input);
// Bytes through each content-coding decoder with a small limit, whole and in pieces,
// and through decompress_requests(); and through each encoder and back.
std::string content_decoding(std::string_view input);

// Entity-tag lists, HTTP dates and If-Range through the file server's conditional
// request evaluation (http/src/files/conditional.hpp).
std::string http_conditional(std::string_view input);

// /proc/self/cgroup, /proc/self/mountinfo and CPU limit files, split on NUL bytes,
// through the readers that size the runtime (scheduler/detail/cgroup.hpp).
std::string cgroup(std::string_view input);

struct Target {
  const char* name;  // also the corpus folder, fuzz/corpus/<name>/
  std::string (*run)(std::string_view input);
};
inline constexpr Target targets[] = {
    {"http_server", http_server},
    {"http2_server", http2_server},
    {"http_chunked", http_chunked},
    {"http_head_paths", http_head_paths},
    {"http_response", http_response},
    {"http_router", http_router},
    {"http_url", http_url},
    {"tls_server", tls_server},
    {"websocket_frame", websocket_frame},
    {"redis_reply", redis_reply},
    {"trace_context", trace_context},
    {"rate_limit_key", rate_limit_key},
    {"accept_encoding", accept_encoding},
    {"form_urlencoded", form_urlencoded},
    {"multipart", multipart},
    {"cookie", cookie},
    {"content_decoding", content_decoding},
    {"http_conditional", http_conditional},
    {"cgroup", cgroup},
#ifdef GORO_FUZZ_GRPC  // goro::grpc is built (protobuf is installed)
    {"grpc_message", grpc_message},
#endif
#ifdef GORO_FUZZ_PG  // goro::pg is built (libpq is installed)
    {"pg_value", pg_value},
#endif
};

// How a target splits its input into reads, chosen by a settings byte: mode 0 gives
// everything in one read; the others pieces of 1 byte, of 7 bytes, or of sizes
// (1..256) drawn from a generator seeded by the byte, so that every input is also
// tried across read boundaries.
std::vector<std::size_t> read_steps(std::uint8_t settings);

// Runs fn on a goroutine and returns when it has returned. The goroutine belongs to
// a runtime (one P) that is started on first use and lives until the process exits,
// so an input costs no runtime start-up. Not reentrant: one call at a time.
void on_goroutine(const std::function<void()>& fn);

}  // namespace goro::fuzz
