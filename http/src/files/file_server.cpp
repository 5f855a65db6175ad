#include <goro/http/file_server.hpp>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <goro/http/content_coding.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>
#include <goro/scheduler/runtime.hpp>

#include "access.hpp"
#include "files/conditional.hpp"

namespace goro::http {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kPreconditionFailed = 412;

struct Extension {
  std::string_view ext;
  std::string_view type;
};

// clang-format off: a table, two entries a line
constexpr Extension kTypes[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
};
// clang-format on

// A file opened under the root, closed on destruction (in goro::blocking).
struct File {
  int fd = -1;  // or -errno
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd >= 0) goro::blocking([fd = fd] { ::close(fd); });
  }
};

// Opens rel (no leading '/') beneath the folder dir_fd; the kernel refuses any
// resolution that leaves it (.., absolute symlinks, symlinks pointing out). Runs in
// goro::blocking. Returns -errno on failure.
int open_beneath(int dir_fd, const std::string& root, const std::string& rel) {
  return goro::blocking([&]() -> int {
    open_how how{};
    // O_NONBLOCK: opening a FIFO (or a device) someone left under the root must not
    // wait for a writer; anything but a regular file is refused after the fstat.
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = ::syscall(SYS_openat2, dir_fd, rel.empty() ? "." : rel.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != ENOSYS) return -errno;
    // No openat2 (Linux < 5.6): open, then check where the descriptor really points.
    int plain = ::openat(dir_fd, rel.empty() ? "." : rel.c_str(),
                         O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (plain < 0) return -errno;
    char link[64];
    char real[PATH_MAX + 1];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", plain);
    ssize_t n = ::readlink(link, real, PATH_MAX);
    if (n < 0) {
      ::close(plain);
      return -EACCES;
    }
    std::string_view where(real, static_cast<std::size_t>(n));
    if (where != root &&
        !(where.starts_with(root) && where.size() > root.size() && where[root.size()] == '/')) {
      ::close(plain);
      return -EXDEV;
    }
    return plain;
  });
}

// Parses one "bytes=" range against size. Returns 1 for a satisfiable range (first and
// last set), 0 to ignore the header (malformed, several ranges), -1 for unsatisfiable.
int parse_range(std::string_view h, std::uint64_t size, std::uint64_t& first, std::uint64_t& last) {
  if (!h.starts_with("bytes=")) return 0;
  h.remove_prefix(6);
  if (h.find(',') != std::string_view::npos) return 0;
  std::size_t dash = h.find('-');
  if (dash == std::string_view::npos) return 0;
  std::string_view a = h.substr(0, dash), b = h.substr(dash + 1);
  // Digits only; a number too big for 64 bits reads as the largest one (it is past
  // any file's end either way: a last position clamps, a first one is unsatisfiable).
  auto number = [](std::string_view s, std::uint64_t& out) {
    if (s.empty()) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc::result_out_of_range) {
      for (char c : s)
        if (c < '0' || c > '9') return false;
      out = UINT64_MAX;
      return true;
    }
    return ec == std::errc() && end == s.data() + s.size();
  };
  std::uint64_t x = 0, y = 0;
  if (a.empty()) {  // suffix: the last y bytes
    if (!number(b, y)) return 0;
    if (y == 0 || size == 0) return -1;
    first = y >= size ? 0 : size - y;
    last = size - 1;
    return 1;
  }
  if (!number(a, x)) return 0;
  if (b.empty()) {
    y = size == 0 ? 0 : size - 1;
  } else if (!number(b, y) || y < x) {
    return 0;
  }
  if (x >= size) return -1;
  first = x;
  last = y >= size ? size - 1 : y;
  return 1;
}

bool has_dot_dot(std::string_view path) {
  while (!path.empty()) {
    std::size_t slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    if (seg == "..") return true;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return false;
}

// The precompressed siblings looked for, in the server's order of preference.
struct Precompressed {
  std::string_view coding;
  std::string_view suffix;
};
constexpr Precompressed kPrecompressed[] = {{"br", ".br"}, {"zstd", ".zst"}, {"gzip", ".gz"}};

// Below this many bytes a file is read into the response and goes out with its head in
// one write; from it on the bytes go by sendfile(2), where the connection can.
constexpr std::uint64_t kSendFileFrom = 16 * 1024;

// A strong entity tag from what changes whenever the file does: its size, its
// modification time to the nanosecond and its inode (a file replaced by rename has
// another); a precompressed variant's tag also names its coding.
std::string entity_tag(const struct stat& st, std::string_view coding) {
  std::string out;
  out.reserve(64);
  auto hex = [&out](std::uint64_t n) {
    char digits[16];
    out.append(digits, std::to_chars(digits, digits + sizeof digits, n, 16).ptr);
  };
  out.push_back('"');
  hex(static_cast<std::uint64_t>(st.st_size));
  out.push_back('-');
  hex(static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1000000000u +
      static_cast<std::uint64_t>(st.st_mtim.tv_nsec));
  out.push_back('-');
  hex(static_cast<std::uint64_t>(st.st_ino));
  if (!coding.empty()) out.append("-").append(coding);
  out.push_back('"');
  return out;
}

struct FileServer {
  std::string root;  // real path, no trailing '/'
  int dir_fd = -1;
  FileServerOptions options;
  std::vector<std::string> index_names;

  ~FileServer() {
    if (dir_fd >= 0) ::close(dir_fd);
  }

  void serve(Request& req, ResponseWriter& w) const;
  // Opens the folder's first index file that is there; fd < 0 when none is.
  void open_index(std::string& rel, File& file, struct stat& st) const;
  // The precompressed sibling of rel the client accepts best that exists (a regular
  // file): it replaces file and st, and its coding is returned; empty when none.
  std::string_view open_precompressed(std::string_view accept_encoding, const std::string& rel,
                                      File& file, struct stat& st) const;
};

void FileServer::open_index(std::string& rel, File& file, struct stat& st) const {
  const std::string folder = rel.empty() || rel.back() == '/' ? rel : rel + "/";
  int err = -ENOENT;
  for (const std::string& name : index_names) {
    std::string candidate = folder + name;
    int fd = open_beneath(dir_fd, root, candidate);
    if (fd < 0) {
      if (err == -ENOENT) err = fd;
      continue;
    }
    if (goro::blocking([&] { return ::fstat(fd, &st); }) != 0 || !S_ISREG(st.st_mode)) {
      goro::blocking([fd] { ::close(fd); });
      continue;
    }
    file.fd = fd;
    rel = std::move(candidate);
    return;
  }
  file.fd = err;
}

std::string_view FileServer::open_precompressed(std::string_view accept_encoding,
                                                const std::string& rel, File& file,
                                                struct stat& st) const {
  // The accepted codings, best first (a tie keeps the server's order).
  const Precompressed* order[std::size(kPrecompressed)];
  int weight[std::size(kPrecompressed)];
  std::size_t count = 0;
  for (const Precompressed& p : kPrecompressed) {
    const int q = accept_weight(accept_encoding, p.coding);
    if (q <= 0) continue;
    std::size_t at = count++;
    while (at > 0 && weight[at - 1] < q) {
      order[at] = order[at - 1];
      weight[at] = weight[at - 1];
      --at;
    }
    order[at] = &p;
    weight[at] = q;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const int fd = open_beneath(dir_fd, root, rel + std::string(order[i]->suffix));
    if (fd < 0) continue;
    struct stat vst = {};
    if (goro::blocking([&] { return ::fstat(fd, &vst); }) != 0 || !S_ISREG(vst.st_mode)) {
      goro::blocking([fd] { ::close(fd); });
      continue;
    }
    goro::blocking([old = file.fd] { ::close(old); });
    file.fd = fd;
    st = vst;
    return order[i]->coding;
  }
  return {};
}

void FileServer::serve(Request& req, ResponseWriter& w) const {
  if (req.method() != "GET" && req.method() != "HEAD") {
    w.header().set("Allow", "GET, HEAD");
    (void)detail::send_builtin_error(req, w, status::method_not_allowed, "405 method not allowed\n",
                                     "method not allowed", "file_server");
    return;
  }
  std::string rel(options.wildcard.empty() ? req.path() : req.path_value(options.wildcard));
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  if (rel.find('\0') != std::string::npos || has_dot_dot(rel)) {
    (void)detail::send_builtin_error(req, w, status::bad_request, "400 invalid path\n",
                                     "invalid path", "file_server");
    return;
  }
  File file;
  file.fd = open_beneath(dir_fd, root, rel);
  struct stat st = {};
  if (file.fd >= 0 && goro::blocking([&] { return ::fstat(file.fd, &st); }) == 0 &&
      S_ISDIR(st.st_mode)) {
    std::string_view path = req.raw_path();
    if (!path.empty() && path.back() != '/') {
      // A folder named without its trailing slash: send the client to "name/", as Go's
      // FileServer does, so that relative links in its index resolve inside it. The
      // Location is relative: "./" and the last segment as the client wrote it, so it
      // can neither leave the site nor read as a scheme.
      std::string location = "./";
      location.append(path.substr(path.rfind('/') + 1));
      location.push_back('/');
      if (!req.raw_query().empty()) {
        location.push_back('?');
        location.append(req.raw_query());
      }
      w.header().set("Location", location);
      w.text("301 moved permanently\n", status::moved_permanently);
      return;
    }
    goro::blocking([folder = file.fd] { ::close(folder); });
    open_index(rel, file, st);
  }
  if (file.fd < 0) {
    int err = -file.fd;
    if (err == EACCES || err == EPERM) {
      (void)detail::send_builtin_error(req, w, status::forbidden, "403 forbidden\n", "forbidden",
                                       "file_server");
    } else {  // ENOENT, EXDEV (escapes the root), ...
      (void)detail::send_builtin_error(req, w, status::not_found, "404 page not found\n",
                                       "page not found", "file_server");
    }
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    (void)detail::send_builtin_error(req, w, status::not_found, "404 page not found\n",
                                     "page not found", "file_server");
    return;
  }

  Headers& h = w.header();
  std::string_view coding;
  if (options.precompressed) {
    const std::string_view accept = req.header("accept-encoding");
    if (!accept.empty()) {
      // The answer depends on Accept-Encoding whichever variant goes out.
      h.set("Vary", "Accept-Encoding");
      coding = open_precompressed(accept, rel, file, st);
    }
  }
  const std::string etag = entity_tag(st, coding);
  const auto modified = static_cast<long long>(st.st_mtime);
  char date[30];
  detail::format_http_date(modified, date);
  h.set("ETag", etag);
  h.set("Last-Modified", std::string_view(date, 29));
  const detail::Validators validators{etag, modified};
  const detail::Conditions conditions{req.header("if-match"), req.header("if-none-match"),
                                      req.header("if-modified-since"),
                                      req.header("if-unmodified-since")};
  switch (detail::evaluate_preconditions(conditions, validators, true)) {
    case detail::Precondition::proceed: break;
    case detail::Precondition::not_modified:
      // ETag, Last-Modified and Vary stay: the client's cached copy is refreshed by them.
      w.set_status(status::not_modified);
      return;
    case detail::Precondition::failed:
      (void)detail::send_builtin_error(req, w, kPreconditionFailed, "412 precondition failed\n",
                                       "precondition failed", "file_server");
      return;
  }
  h.set("Accept-Ranges", "bytes");
  h.set("Content-Type", content_type_for(rel));
  if (!coding.empty()) h.set("Content-Encoding", coding);

  auto size = static_cast<std::uint64_t>(st.st_size);
  std::uint64_t first = 0, last = size == 0 ? 0 : size - 1;
  std::string_view range = req.header("range");
  if (!range.empty() && detail::if_range_allows(req.header("if-range"), validators)) {
    int r = parse_range(range, size, first, last);
    if (r < 0) {
      h.set("Content-Range", "bytes */" + std::to_string(size));
      (void)detail::send_builtin_error(req, w, status::range_not_satisfiable,
                                       "416 range not satisfiable\n", "range not satisfiable",
                                       "file_server");
      return;
    }
    if (r > 0) {
      w.set_status(status::partial_content);
      h.set("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                                 std::to_string(size));
    } else {
      first = 0;
    }
  }
  std::uint64_t length = size == 0 ? 0 : last - first + 1;
  char digits[24];
  h.set("Content-Length",
        std::string_view(digits, std::to_chars(digits, digits + sizeof digits, length).ptr));
  if (req.method() == "HEAD" || length == 0) return;

  if (length >= kSendFileFrom) {
    std::error_code sent = ResponseController(w).send_file(file.fd, first, length);
    if (sent != errc::not_supported) return;  // sent, or the connection failed
  }
  const std::size_t chunk = length < kReadChunk ? static_cast<std::size_t>(length) : kReadChunk;
  std::unique_ptr<char[]> buf(new char[chunk]);
  std::uint64_t offset = first, left = length;
  while (left > 0) {
    std::size_t want = left < chunk ? static_cast<std::size_t>(left) : chunk;
    ssize_t n = goro::blocking(
        [&] { return ::pread(file.fd, buf.get(), want, static_cast<off_t>(offset)); });
    if (n <= 0) {
      // The file shrank or failed under us: the declared length cannot be met, which
      // makes the server close the connection.
      return;
    }
    if (w.write(buf.get(), static_cast<std::size_t>(n))) return;
    offset += static_cast<std::uint64_t>(n);
    left -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace

std::string_view content_type_for(std::string_view file_name) noexcept {
  std::size_t slash = file_name.rfind('/');
  if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
  std::size_t dot = file_name.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  std::string_view ext = file_name.substr(dot + 1);
  for (const Extension& e : kTypes) {
    if (iequals(e.ext, ext)) return e.type;
  }
  return "application/octet-stream";
}

Handler file_server(std::string root, FileServerOptions options) {
  auto server = std::make_shared<FileServer>();
  server->options = std::move(options);
  std::string_view names = server->options.index;
  while (!names.empty()) {
    const std::size_t space = names.find(' ');
    if (std::string_view name = names.substr(0, space); !name.empty())
      server->index_names.emplace_back(name);
    names = space == std::string_view::npos ? std::string_view() : names.substr(space + 1);
  }
  char real[PATH_MAX + 1];
  if (::realpath(root.c_str(), real) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "goro::http::file_server: " + root);
  }
  server->root = real;
  server->dir_fd = ::open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (server->dir_fd < 0) {
    throw std::system_error(errno, std::generic_category(), "goro::http::file_server: " + root);
  }
  return [server](Request& req, ResponseWriter& w) { server->serve(req, w); };
}

}  // namespace goro::http
