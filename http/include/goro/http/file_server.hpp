// goro::http::file_server — serving a folder of static files.
//
//   router.handle("GET /static/{path...}", file_server("/srv/www"));
//
// GET and HEAD only. Content-Type from the file extension. Validators: Last-Modified
// and a strong ETag (size, modification time in nanoseconds, inode), with the
// conditional requests of RFC 9110 §13 in its order: If-Match and If-Unmodified-Since
// (412), If-None-Match and If-Modified-Since (304, which keeps ETag, Last-Modified and
// Vary). One "Range: bytes=" range (206, or 416 when it lies past the end; several
// ranges get the whole file, 200), honoured under If-Range only when its validator
// matches strongly. Precompressed siblings (foo.css.br, .zst, .gz) go to clients whose
// Accept-Encoding takes them. Large bodies go by sendfile(2) on plain HTTP/1.1
// connections (FileSender, response_controller.hpp); TLS and HTTP/2 copy. A folder
// named without its trailing slash is redirected (301) to it, the query kept; a folder
// is served by its first index file; there are no listings (404). Nothing above the
// root can be reached: ".." segments (also as %2e%2e) are refused (400), and files are
// opened with openat2(RESOLVE_BENEATH): the kernel follows a symbolic link only if it
// is relative and stays beneath the root, so links pointing out — and absolute links —
// get 404. Files served lately stay open (FileServerOptions::cache_files), checked
// with one statx(2) on the descriptor per request. File I/O runs in goro::blocking, so a
// slow disk holds a thread, not the scheduler; three calls excepted (docs/http.md, "File
// server"): that statx (AT_STATX_DONT_SYNC: the inode in memory), reads that the page
// cache answers (preadv2 with RWF_NOWAIT, which fails rather than wait for the disk),
// and sendfile(2) (nginx's way).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <goro/http/server.hpp>

namespace goro::http {

struct FileServerOptions {
  // The router wildcard holding the file's path, as in "GET /static/{path...}"; empty:
  // the whole request path is the file's path under the root.
  std::string wildcard = "path";
  // The file(s) served for a folder, separated by spaces and tried in order, as in
  // nginx's index directive: "index.html index.htm".
  std::string index = "index.html";
  // Serve foo.css.br / foo.css.zst / foo.css.gz, when one is next to foo.css and the
  // client's Accept-Encoding takes its coding (the best-weighted one that exists; br,
  // zstd, gzip on a tie), with Content-Encoding, foo.css's Content-Type and an ETag of
  // its own; a Range then counts the compressed bytes (as nginx's gzip_static). Every
  // response to a request with Accept-Encoding carries "Vary: Accept-Encoding". The
  // siblings are files you make (brotli -k, zstd -k, gzip -k); none is made here.
  bool precompressed = true;
  // Files kept open between requests, as nginx's open_file_cache: the descriptor, stat
  // and validators of up to this many lookups, so that serving a file again costs one
  // statx(2) instead of openat2, fstat and close. The statx checks the file on every
  // use: one written, truncated, deleted, renamed or replaced (a rename over it), or
  // with new permissions, is seen at once. What a path leads to is trusted for
  // cache_valid: a folder renamed or made unreadable, a symbolic link on the way
  // pointed elsewhere, a precompressed sibling or index file that appeared. Each file
  // held costs a descriptor. 0: off, every request opens its file.
  std::size_t cache_files = 128;
  // How long a lookup in that cache is trusted; then the path is looked up again.
  std::chrono::milliseconds cache_valid = std::chrono::seconds(1);
};

// A handler serving the files under root. Throws std::system_error when root is not a
// readable folder.
Handler file_server(std::string root, FileServerOptions options = {});

// The Content-Type goro uses for a file name ("a.css" -> "text/css; charset=utf-8");
// application/octet-stream when the extension is unknown.
std::string_view content_type_for(std::string_view file_name) noexcept;

}  // namespace goro::http
