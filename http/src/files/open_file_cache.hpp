// The file server's open-file cache (FileServerOptions::cache_files): what a path named
// when the server last looked it up, so that the next request for a file served a moment
// ago costs one statx(2) on a descriptor held open instead of openat2, fstat and close,
// and its validators are not formatted again. nginx's open_file_cache, checked harder.
//
// What is trusted, and for how long (docs/http.md, "File server"):
//  - A file entry is checked on every use: the server statx()es the descriptor and
//    drops the entry when the file is not the one cached: its link count is 0 (deleted,
//    or replaced by a rename over it), or its size, modification or change time differ
//    (written in place, truncated, chmod/chown, renamed). So changes to the file itself
//    are seen at once, to the file system's timestamp granularity.
//  - What the path leads to is trusted for `valid` after the lookup: a folder renamed or
//    made unreadable, a symbolic link on the way pointed elsewhere, a new file where a
//    sibling or an index file was absent. Past `valid` the entry is not used; the next
//    request looks the path up again.
// Only the server's own probes (precompressed siblings, index files) cache an absence;
// a client's path that does not exist is looked up every time, so a scan of random
// paths cannot fill the cache.
//
// Concurrency: any goroutine, on any P. The entries are spread over shards, each a
// std::mutex around a map and an LRU list; no system call and no goro call is made
// with a shard's lock held (a descriptor is closed after the unlock, by the last
// request holding it).
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace goro::http::detail {

// What a path named when it was looked up. Immutable once made; shared by the requests
// serving it. A file's descriptor is closed (in goro::blocking) when the last holder
// lets go.
struct FoundPath {
  enum class Kind : std::uint8_t { file, folder, other, missing };
  Kind kind = Kind::missing;
  int error = 0;  // missing: the lookup's errno (ENOENT, EACCES, EXDEV, ...)
  int fd = -1;    // file: open, read-only
  struct stat st = {};  // file, folder: as fstat(2) gave it at the lookup
  // file: the strong entity tag ("\"size-mtime-inode\""; a precompressed variant puts its
  // coding before the closing quote), and Last-Modified.
  std::string etag;
  char last_modified[30] = {};
  std::int64_t found_at = 0;  // steady clock, ns: when the lookup was made

  FoundPath() = default;
  FoundPath(const FoundPath&) = delete;
  FoundPath& operator=(const FoundPath&) = delete;
  ~FoundPath();

  // Whether fd still is the file cached (one statx(2), made directly; see
  // open_file_cache.cpp and the top).
  bool still_current() const;
};

class OpenFileCache {
 public:
  // Holds at most max_entries lookups (0: none are kept), each used for valid.
  OpenFileCache(std::size_t max_entries, std::chrono::nanoseconds valid);
  OpenFileCache(const OpenFileCache&) = delete;
  OpenFileCache& operator=(const OpenFileCache&) = delete;

  bool enabled() const noexcept { return !shards_.empty(); }
  // path's entry when it was made less than valid before now (steady clock, ns); null
  // otherwise. A file entry still has to pass still_current().
  std::shared_ptr<const FoundPath> get(std::string_view path, std::int64_t now);
  // Keeps found as path's entry, in place of any older one; the least recently used
  // entry of its shard goes when the shard is full.
  void put(std::string_view path, std::shared_ptr<const FoundPath> found);
  // Forgets path's entry if it still is found (a request saw the file change).
  void drop(std::string_view path, const FoundPath* found);

 private:
  struct Item {
    std::string path;
    std::shared_ptr<const FoundPath> found;
  };
  struct Shard {
    std::mutex mu;
    std::list<Item> lru;  // most recently used first
    std::unordered_map<std::string_view, std::list<Item>::iterator> index;  // keys: lru's paths
    std::size_t capacity = 0;
  };
  Shard& shard_of(std::string_view path) noexcept;
  // Once per valid period, the first request past it takes the expired entries out of
  // every shard, so that descriptors nobody asks for any more (deleted files among
  // them, whose disk space waits for the last one) are closed while the server has
  // requests. An idle server keeps them until its next.
  void sweep_if_due(std::int64_t now);
  // Takes the item out; its entry goes to *doomed, to be let go after the unlock.
  static void erase(Shard& s, std::list<Item>::iterator it, std::shared_ptr<const FoundPath>* doomed);

  const std::int64_t valid_ns_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<std::int64_t> next_sweep_{0};  // steady clock, ns
};

}  // namespace goro::http::detail
