// goro::http::file_server — serving a folder of static files.
//
//   router.handle("GET /static/{path...}", file_server("/srv/www"));
//
// GET and HEAD only. Content-Type from the file extension; Last-Modified and
// If-Modified-Since (304); one "Range: bytes=" range (206, or 416 when it lies past the
// end; several ranges get the whole file, 200). A folder is served by its index file;
// there are no listings. Nothing above the root can be reached: ".." segments (also
// as %2e%2e) are refused (400), and files are opened with openat2(RESOLVE_BENEATH): the
// kernel follows a symbolic link only if it is relative and stays beneath the root, so
// links pointing out — and absolute links — get 404. All file I/O
// runs in goro::blocking, so a slow disk holds a thread, not the scheduler.
#pragma once

#include <string>
#include <string_view>

#include <goro/http/server.hpp>

namespace goro::http {

struct FileServerOptions {
  // The router wildcard holding the file's path, as in "GET /static/{path...}"; empty:
  // the whole request path is the file's path under the root.
  std::string wildcard = "path";
  // The file served for a folder.
  std::string index = "index.html";
};

// A handler serving the files under root. Throws std::system_error when root is not a
// readable folder.
Handler file_server(std::string root, FileServerOptions options = {});

// The Content-Type goro uses for a file name ("a.css" -> "text/css; charset=utf-8");
// application/octet-stream when the extension is unknown.
std::string_view content_type_for(std::string_view file_name) noexcept;

}  // namespace goro::http
