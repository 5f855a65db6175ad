#include <goro/http/file_server.hpp>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
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
#include "files/open_file_cache.hpp"

namespace goro::http {
namespace {

using detail::FoundPath;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kPreconditionFailed = 412;

// Opens rel (no leading '/') beneath the folder dir_fd; the kernel refuses any
// resolution that leaves it (.., absolute symlinks, symlinks pointing out). A blocking
// call: the caller is inside goro::blocking. Returns -errno on failure.
int open_beneath(int dir_fd, const std::string& root, const std::string& rel) {
  open_how how{};
  // O_NONBLOCK: opening a FIFO (or a device) someone left under the root must not wait
  // for a writer; anything but a regular file is refused after the fstat.
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
}

std::int64_t steady_now() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The request fields the file server reads (the first of each, as Request::header
// gives it), found in one pass over the head.
struct FileRequestFields {
  std::string_view accept_encoding, if_match, if_none_match, if_modified_since,
      if_unmodified_since, range, if_range;
};

struct WantedField {
  std::string_view name;
  std::string_view FileRequestFields::*slot;
};
constexpr WantedField kWantedFields[] = {
    {"accept-encoding", &FileRequestFields::accept_encoding},
    {"if-match", &FileRequestFields::if_match},
    {"if-none-match", &FileRequestFields::if_none_match},
    {"if-modified-since", &FileRequestFields::if_modified_since},
    {"if-unmodified-since", &FileRequestFields::if_unmodified_since},
    {"range", &FileRequestFields::range},
    {"if-range", &FileRequestFields::if_range},
};

FileRequestFields read_fields(const Request& req) noexcept {
  FileRequestFields f;
  unsigned seen = 0;
  for (const HeaderField& h : req.headers()) {
    for (unsigned i = 0; i < std::size(kWantedFields); ++i) {
      const WantedField& wanted = kWantedFields[i];
      if (wanted.name.size() != h.name.size() || (seen & (1u << i)) != 0 ||
          !iequals(wanted.name, h.name))
        continue;
      f.*wanted.slot = h.value;
      seen |= 1u << i;
      break;
    }
  }
  return f;
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

// The strong entity tag of a file: what changes whenever the file does, its size, its
// modification time to the nanosecond and its inode (a file replaced by rename has
// another). A precompressed variant's tag adds its coding (variant_tag).
std::string entity_tag(const struct stat& st) {
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
  out.push_back('"');
  return out;
}

// "\"size-mtime-inode-coding\"" from a file's tag and the coding it is sent with.
std::string variant_tag(std::string_view tag, std::string_view coding) {
  std::string out(tag.substr(0, tag.size() - 1));
  out.append("-").append(coding).push_back('"');
  return out;
}

struct FileServer {
  std::string root;  // real path, no trailing '/'
  int dir_fd = -1;
  FileServerOptions options;
  std::vector<std::string> index_names;
  mutable detail::OpenFileCache cache;
  // Cleared when RWF_NOWAIT is refused (read_at): reads then go to goro::blocking at once.
  mutable std::atomic<bool> nowait_reads{true};

  explicit FileServer(const FileServerOptions& o)
      : options(o), cache(o.cache_files, o.cache_valid) {}
  ~FileServer() {
    if (dir_fd >= 0) ::close(dir_fd);
  }

  void serve(Request& req, ResponseWriter& w) const;
  // What path names: the cache's entry when it has a current one, else a lookup made
  // now, kept in the cache when it is a file or a folder, or whatever it is when
  // probe (the server's own lookups: index files, precompressed siblings).
  std::shared_ptr<const FoundPath> find(const std::string& path, bool probe,
                                        std::int64_t now) const;
  // Opens and fstat()s path, in one goro::blocking call.
  std::shared_ptr<const FoundPath> look_up(const std::string& path, std::int64_t now) const;
  // The folder's first index file that is there (rel becomes its path); else a
  // missing lookup with the first error that was not ENOENT.
  std::shared_ptr<const FoundPath> find_index(std::string& rel, std::int64_t now) const;
  // The precompressed sibling of rel the client accepts best that exists (a regular
  // file), into *variant, and its coding; empty when none.
  std::string_view find_precompressed(std::string_view accept_encoding, const std::string& rel,
                                      std::int64_t now,
                                      std::shared_ptr<const FoundPath>* variant) const;
  // Reads up to len bytes at offset (short only at the end of the file); -1 on an error.
  ssize_t read_at(int fd, char* buf, std::size_t len, std::uint64_t offset) const;
};

std::shared_ptr<const FoundPath> FileServer::find(const std::string& path, bool probe,
                                                  std::int64_t now) const {
  if (std::shared_ptr<const FoundPath> cached = cache.get(path, now)) {
    if (cached->kind != FoundPath::Kind::file || cached->still_current()) return cached;
    cache.drop(path, cached.get());
  }
  std::shared_ptr<const FoundPath> found = look_up(path, now);
  if (probe || found->kind == FoundPath::Kind::file || found->kind == FoundPath::Kind::folder)
    cache.put(path, found);
  return found;
}

std::shared_ptr<const FoundPath> FileServer::look_up(const std::string& path,
                                                     std::int64_t now) const {
  auto found = std::make_shared<FoundPath>();
  found->found_at = now;
  const int fd = goro::blocking([&] {
    const int opened = open_beneath(dir_fd, root, path);
    if (opened >= 0 && ::fstat(opened, &found->st) != 0) {
      const int err = errno;
      ::close(opened);
      return -err;
    }
    // Only a file's descriptor is kept: a folder is looked into by path.
    if (opened >= 0 && !S_ISREG(found->st.st_mode)) ::close(opened);
    return opened;
  });
  if (fd < 0) {
    found->error = -fd;
    return found;
  }
  if (S_ISDIR(found->st.st_mode)) {
    found->kind = FoundPath::Kind::folder;
  } else if (!S_ISREG(found->st.st_mode)) {
    found->kind = FoundPath::Kind::other;
  } else {
    found->kind = FoundPath::Kind::file;
    found->fd = fd;
    found->etag = entity_tag(found->st);
    detail::format_http_date(static_cast<long long>(found->st.st_mtime), found->last_modified);
  }
  return found;
}

std::shared_ptr<const FoundPath> FileServer::find_index(std::string& rel, std::int64_t now) const {
  const std::string folder = rel.empty() || rel.back() == '/' ? rel : rel + "/";
  int err = ENOENT;
  for (const std::string& name : index_names) {
    std::string candidate = folder + name;
    std::shared_ptr<const FoundPath> found = find(candidate, true, now);
    if (found->kind == FoundPath::Kind::file) {
      rel = std::move(candidate);
      return found;
    }
    if (found->kind == FoundPath::Kind::missing && err == ENOENT) err = found->error;
  }
  auto none = std::make_shared<FoundPath>();
  none->error = err;
  return none;
}

std::string_view FileServer::find_precompressed(std::string_view accept_encoding,
                                                const std::string& rel, std::int64_t now,
                                                std::shared_ptr<const FoundPath>* variant) const {
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
    std::shared_ptr<const FoundPath> found = find(rel + std::string(order[i]->suffix), true, now);
    if (found->kind != FoundPath::Kind::file) continue;
    *variant = std::move(found);
    return order[i]->coding;
  }
  return {};
}

ssize_t FileServer::read_at(int fd, char* buf, std::size_t len, std::uint64_t offset) const {
  std::size_t done = 0;
  // From the page cache without a system call's hand-off: RWF_NOWAIT fails with EAGAIN
  // rather than wait for the disk, and what it could not read goes to goro::blocking.
  while (done < len && nowait_reads.load(std::memory_order_relaxed)) {
    iovec iov{buf + done, len - done};
    const ssize_t n = ::preadv2(fd, &iov, 1, static_cast<off_t>(offset + done), RWF_NOWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return static_cast<ssize_t>(done);
    const int err = errno;
    if (err == EINTR) continue;
    // EOPNOTSUPP: a file system (or a kernel before 4.14) without RWF_NOWAIT; ENOSYS: a
    // kernel without preadv2.
    const bool unsupported = err == EOPNOTSUPP || err == ENOSYS;
    if (unsupported) nowait_reads.store(false, std::memory_order_relaxed);
    if (err != EAGAIN && !unsupported) return -1;
    break;
  }
  if (done == len) return static_cast<ssize_t>(done);
  return goro::blocking([&]() -> ssize_t {
    while (done < len) {
      const ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(offset + done));
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      done += static_cast<std::size_t>(n);
    }
    return static_cast<ssize_t>(done);
  });
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
  const std::int64_t now = steady_now();
  std::shared_ptr<const FoundPath> found = find(rel, false, now);
  if (found->kind == FoundPath::Kind::folder) {
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
    found = find_index(rel, now);
  }
  if (found->kind == FoundPath::Kind::missing &&
      (found->error == EACCES || found->error == EPERM)) {
    (void)detail::send_builtin_error(req, w, status::forbidden, "403 forbidden\n", "forbidden",
                                     "file_server");
    return;
  }
  if (found->kind != FoundPath::Kind::file) {  // ENOENT, EXDEV (escapes the root), a FIFO...
    (void)detail::send_builtin_error(req, w, status::not_found, "404 page not found\n",
                                     "page not found", "file_server");
    return;
  }

  const FileRequestFields fields = read_fields(req);
  Headers& h = w.header();
  std::string_view coding;
  std::shared_ptr<const FoundPath> variant;
  if (options.precompressed && !fields.accept_encoding.empty()) {
    // The answer depends on Accept-Encoding whichever variant goes out.
    detail::add_vary(h, "Accept-Encoding");
    coding = find_precompressed(fields.accept_encoding, rel, now, &variant);
  }
  const FoundPath& file = variant != nullptr ? *variant : *found;
  const std::string coded_tag = coding.empty() ? std::string() : variant_tag(file.etag, coding);
  const std::string_view etag = coding.empty() ? std::string_view(file.etag) : coded_tag;
  h.set("ETag", etag);
  h.set("Last-Modified", std::string_view(file.last_modified, detail::kHttpDateSize));
  const detail::Validators validators{etag, static_cast<long long>(file.st.st_mtime)};
  const detail::Conditions conditions{fields.if_match, fields.if_none_match,
                                      fields.if_modified_since, fields.if_unmodified_since};
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

  auto size = static_cast<std::uint64_t>(file.st.st_size);
  std::uint64_t first = 0, last = size == 0 ? 0 : size - 1;
  if (!fields.range.empty() && detail::if_range_allows(fields.if_range, validators)) {
    int r = parse_range(fields.range, size, first, last);
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
    const ssize_t n = read_at(file.fd, buf.get(), want, offset);
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

Handler file_server(std::string root, FileServerOptions options) {
  auto server = std::make_shared<FileServer>(options);
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
