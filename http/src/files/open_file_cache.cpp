#include "files/open_file_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

#include <goro/scheduler/runtime.hpp>

namespace goro::http::detail {
namespace {

// Enough shards that requests on eight Ps seldom meet at one lock, few enough that
// a small cache still evicts in an order close to LRU.
constexpr std::size_t kMaxShards = 8;

bool same_time(const statx_timestamp& now, const timespec& then) noexcept {
  return now.tv_sec == then.tv_sec && static_cast<long>(now.tv_nsec) == then.tv_nsec;
}

}  // namespace

FoundPath::~FoundPath() {
  if (fd >= 0) goro::blocking([fd = fd] { ::close(fd); });
}

bool FoundPath::still_current() const {
  // Made directly, not in goro::blocking: with AT_STATX_DONT_SYNC it reads the inode
  // the descriptor holds, in memory, also on network file systems (their cached
  // attributes, never a round trip to the server), so a cache hit enters no blocking
  // call at all. A file system that blocks anyway is the runtime's to notice: sysmon
  // hands the P off from a thread asleep in the kernel (docs/design.md, "Preemption").
  struct statx now = {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &now) != 0)
    return false;
  return now.stx_nlink > 0 && now.stx_ino == st.st_ino &&
         makedev(now.stx_dev_major, now.stx_dev_minor) == st.st_dev &&
         static_cast<off_t>(now.stx_size) == st.st_size && same_time(now.stx_mtime, st.st_mtim) &&
         same_time(now.stx_ctime, st.st_ctim);
}

OpenFileCache::OpenFileCache(std::size_t max_entries, std::chrono::nanoseconds valid)
    : valid_ns_(valid.count()) {
  if (max_entries == 0 || valid.count() <= 0) return;
  const std::size_t n = std::min(kMaxShards, max_entries);
  for (std::size_t i = 0; i < n; ++i) {
    auto s = std::make_unique<Shard>();
    // max_entries spread over the shards, the first ones taking the remainder.
    s->capacity = max_entries / n + (i < max_entries % n ? 1 : 0);
    s->index.reserve(s->capacity);
    shards_.push_back(std::move(s));
  }
}

OpenFileCache::Shard& OpenFileCache::shard_of(std::string_view path) noexcept {
  return *shards_[std::hash<std::string_view>{}(path) % shards_.size()];
}

void OpenFileCache::erase(Shard& s, std::list<Item>::iterator it,
                          std::shared_ptr<const FoundPath>* doomed) {
  *doomed = std::move(it->found);
  s.index.erase(it->path);
  s.lru.erase(it);
}

std::shared_ptr<const FoundPath> OpenFileCache::get(std::string_view path, std::int64_t now) {
  if (!enabled()) return nullptr;
  sweep_if_due(now);
  Shard& s = shard_of(path);
  std::shared_ptr<const FoundPath> found, stale;
  {
    std::lock_guard lock(s.mu);
    auto at = s.index.find(path);
    if (at == s.index.end()) return nullptr;
    if (now - at->second->found->found_at >= valid_ns_) {
      erase(s, at->second, &stale);
      return nullptr;
    }
    s.lru.splice(s.lru.begin(), s.lru, at->second);
    found = at->second->found;
  }
  return found;
}

void OpenFileCache::sweep_if_due(std::int64_t now) {
  std::int64_t due = next_sweep_.load(std::memory_order_relaxed);
  // One request in a valid period sweeps; the others go on (relaxed: the time is all
  // that is shared, and a second sweep would only find nothing to do).
  if (now < due || !next_sweep_.compare_exchange_strong(due, now + valid_ns_,
                                                        std::memory_order_relaxed))
    return;
  for (const std::unique_ptr<Shard>& shard : shards_) {
    Shard& s = *shard;
    std::vector<std::shared_ptr<const FoundPath>> expired;
    {
      std::lock_guard lock(s.mu);
      while (!s.lru.empty() && now - s.lru.back().found->found_at >= valid_ns_) {
        expired.emplace_back();
        erase(s, std::prev(s.lru.end()), &expired.back());
      }
    }
  }
}

void OpenFileCache::put(std::string_view path, std::shared_ptr<const FoundPath> found) {
  if (!enabled()) return;
  Shard& s = shard_of(path);
  std::shared_ptr<const FoundPath> replaced, evicted;
  std::lock_guard lock(s.mu);
  if (auto at = s.index.find(path); at != s.index.end()) erase(s, at->second, &replaced);
  if (s.lru.size() >= s.capacity) erase(s, std::prev(s.lru.end()), &evicted);
  s.lru.push_front(Item{std::string(path), std::move(found)});
  s.index.emplace(s.lru.front().path, s.lru.begin());
}

void OpenFileCache::drop(std::string_view path, const FoundPath* found) {
  if (!enabled()) return;
  Shard& s = shard_of(path);
  std::shared_ptr<const FoundPath> dropped;
  std::lock_guard lock(s.mu);
  auto at = s.index.find(path);
  if (at != s.index.end() && at->second->found.get() == found) erase(s, at->second, &dropped);
}

}  // namespace goro::http::detail
