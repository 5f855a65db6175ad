// HTTP compression as middleware: response bodies compressed with the coding the
// client's Accept-Encoding prefers (zstd, br, gzip), and request bodies sent with a
// Content-Encoding decoded for the handler.
//
//   Handler app = chain(router, {recover(), access_log(), compress(), decompress_requests()});
//
// compress() wraps the ResponseWriter: the handler writes plain bytes and the client gets
// them coded. It decides at the first write or flush that must reach the client,
// when the status and headers are known, and leaves the body alone when:
//  - the request has a Range, or the client accepts none of the codings;
//  - the status is 1xx, 204, 206 or 304, or the response has Content-Encoding or
//    Content-Range already;
//  - the Content-Type is not in CompressOptions::types (none set counts as not);
//  - the body is shorter than min_size: the first min_size bytes are held back to know
//    it, unless the handler set a Content-Length, which tells at once. A flush() before
//    min_size bytes decides with what there is: a streamed response (server-sent events)
//    is compressed from its first event.
// A compressed response has Content-Encoding, no Content-Length, and its strong ETag made
// weak (W/"..."): the bytes differ from the ones the tag named. Every response of a
// compressible type gets "Vary: Accept-Encoding", compressed or not, so that a cache
// keeps the two apart. A flush() sends what the handler wrote so far decodable at once
// (zlib's Z_SYNC_FLUSH, brotli's and zstd's flush), at a cost of a few bytes of ratio.
// A HEAD is answered as the GET would be, without the body, as Go's gzip handlers do:
// the same decision, so the same Vary, Content-Encoding and weak ETag, and no
// Content-Length where the GET's body would be coded (its coded length is not known
// without coding it, which a HEAD does not do).
//
// decompress_requests() decodes a request body whose Content-Encoding is gzip, deflate,
// br or zstd as the handler reads it, a piece at a time: memory stays bounded however
// far the body expands. The handler sees the body decoded, and no Content-Encoding or
// Content-Length among the headers (content_length() is -1: the length is unknown).
// Replies it makes itself, through send_error (ServerOptions::shape_reply):
//  - 415 with "Accept-Encoding: gzip, deflate, br, zstd" for a coding it does not know
//    (RFC 9110 §15.5.16), before the handler runs;
//  - 413 naming the limit when the decoded body outgrows max_decoded_size, and 400 for
//    corrupt or truncated data: the read fails (errc::body_too_large,
//    errc::malformed_body) and, if the handler has not started its response, the client
//    has the error reply at once and later writes fail with errc::response_finished.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <goro/http/middleware.hpp>

namespace goro::http {

struct CompressOptions {
  // The codings offered, most preferred first: the one the client weighs highest wins,
  // and among equal weights ("gzip, deflate, br, zstd" weighs all 1) the earlier here.
  // zstd first: at level 3 it compresses text about as well as brotli 4 and gzip 6
  // (better than gzip) in a fraction of their time; brotli next, for clients without
  // zstd (most browsers have br); gzip, which every client has, last. Names: "zstd",
  // "br", "gzip", "deflate".
  std::vector<std::string> encodings = {"zstd", "br", "gzip"};
  // Bodies shorter than this go out as they are: compressing them saves less than the
  // coding's overhead and a CPU's time.
  std::size_t min_size = 1024;
  // Content types compressed: "text/*" for a whole type, "+json" / "+xml" for a
  // structured-syntax suffix, otherwise a full media type. Parameters (charset) are
  // ignored, case is not significant.
  std::vector<std::string> types = {
      "text/*",          "application/json",       "application/javascript",
      "application/xml", "application/wasm",       "application/x-javascript",
      "+json",           "+xml",                   "image/svg+xml",
      "image/x-icon",    "application/manifest+json", "application/graphql-response+json",
      "font/ttf",        "font/otf",               "application/vnd.ms-fontobject"};
  // Levels, in each library's scale. Chosen for dynamic content, where every response
  // pays: gzip 5 (nginx's common setting; 6 is zlib's default and costs ~15% more for
  // ~1% of size), brotli 4 (5 and up cost twice as much), zstd 3 (its default).
  int gzip_level = 5;
  int brotli_level = 4;
  int zstd_level = 3;
  // Encoders (zlib's and zstd's state, ~256 KiB to ~1.3 MiB each) kept for the next
  // response, per coding. brotli's cannot be reset and is made per response.
  std::size_t pool_size = 64;
};

// Compresses response bodies (see the top of this file).
Middleware compress(CompressOptions options = {});

struct DecompressOptions {
  // The most bytes a request body may decode to; more is answered 413. The decoded
  // body is streamed to the handler, so this bounds what the handler reads, not memory.
  std::size_t max_decoded_size = 8 * 1024 * 1024;
};

// Decodes request bodies sent with a Content-Encoding (see the top of this file).
Middleware decompress_requests(DecompressOptions options = {});

}  // namespace goro::http
