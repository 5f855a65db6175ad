// file_server's open-file cache (FileServerOptions::cache_files): a file written in
// place, deleted, replaced by a rename or given new permissions is seen by the next
// request; what the path leads to is trusted for cache_valid and no longer; the cache
// holds at most cache_files descriptors and lets go of them; and under concurrent
// replacement on 1 to 8 Ps a response never mixes two versions of a file.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <goro/http/file_server.hpp>
#include <goro/http/router.hpp>

#include "test_util.hpp"

namespace goro::http::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

void put(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
}

// Writes content next to p and renames it over p: readers see the old file or the new
// one, never a mixture (how deploy tools and editors replace files).
void replace(const fs::path& p, const std::string& content) {
  const fs::path tmp = p.string() + ".tmp";
  put(tmp, content);
  fs::rename(tmp, p);
}

// The descriptors this process holds on files under dir.
int open_files_under(const fs::path& dir) {
  int n = 0;
  const std::string prefix = fs::canonical(dir).string() + "/";
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(entry.path(), ec);
    if (!ec && target.string().starts_with(prefix)) ++n;
  }
  return n;
}

class FileCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/goro-http-file-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(root_);
  }

  void serve(FileServerOptions options, int procs = 2) {
    Router r;
    r.handle("GET /f/{path...}", file_server(root_.string(), std::move(options)));
    server_ = std::make_unique<TestServer>(std::move(r), ServerOptions{}, procs);
  }

  std::optional<RawResponse> get(const std::string& path, const std::string& extra = "") {
    return round_trip(server_->port(), "GET /f/" + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n");
  }

  fs::path root_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(FileCache, WrittenInPlaceIsSeenAtOnce) {
  serve({});
  put(root_ / "a.txt", "one");
  auto first = get("a.txt");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->body, "one");
  // Same inode, another size: the cached length and tag must not go out with it.
  put(root_ / "a.txt", "version two");
  auto second = get("a.txt");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, "version two");
  EXPECT_EQ(second->header("content-length"), "11");
  EXPECT_NE(second->header("etag"), first->header("etag"));
  // Same size, a modification time one nanosecond on: still a new version.
  struct stat st = {};
  ASSERT_EQ(::stat((root_ / "a.txt").c_str(), &st), 0);
  put(root_ / "a.txt", "version 2.0");
  timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_nsec = (st.st_mtim.tv_nsec + 1) % 1000000000;
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ / "a.txt").c_str(), times, 0), 0);
  auto third = get("a.txt", "If-None-Match: " + second->header("etag") + "\r\n");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 200);
  EXPECT_EQ(third->body, "version 2.0");
}

TEST_F(FileCache, DeletedAndReplacedAreSeenAtOnce) {
  serve({.cache_valid = std::chrono::hours(1)});
  put(root_ / "gone.txt", "here");
  put(root_ / "swap.txt", "old bytes");
  ASSERT_EQ(get("gone.txt")->status, 200);
  auto before = get("swap.txt");
  ASSERT_TRUE(before);
  ASSERT_EQ(before->body, "old bytes");
  // The cache still trusts both paths for an hour; the descriptors say what happened.
  fs::remove(root_ / "gone.txt");
  EXPECT_EQ(get("gone.txt")->status, 404);
  replace(root_ / "swap.txt", "new bytes");
  auto after = get("swap.txt", "If-None-Match: " + before->header("etag") + "\r\n");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(after->body, "new bytes");
  // Renamed away: the old path is gone, the new one serves the file.
  fs::rename(root_ / "swap.txt", root_ / "moved.txt");
  EXPECT_EQ(get("swap.txt")->status, 404);
  EXPECT_EQ(get("moved.txt")->body, "new bytes");
  // A file where there was none is found by the first request that asks.
  put(root_ / "gone.txt", "back");
  EXPECT_EQ(get("gone.txt")->body, "back");
}

// What the path leads to (here a folder's permissions) is trusted for cache_valid, then
// looked at again. Run as a user that permissions bind: root reads anything, so a root
// test process drops to nobody in the child first.
void permission_child() {
  if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(2);
  char tmpl[] = "/tmp/goro-http-file-cache-perm-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) std::_Exit(3);
  const fs::path root = tmpl;
  put(root / "open.txt", "readable");
  put(root / "sub" / "inner.txt", "inside");
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "failed: %s\n", what);
      ++failures;
    }
  };
  {
    Router r;
    r.handle("GET /f/{path...}", file_server(root.string(), {.cache_valid = 300ms}));
    TestServer server(std::move(r));
    auto get = [&](const std::string& path) {
      auto res = round_trip(server.port(), "GET /f/" + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
      return res ? res->status : 0;
    };
    expect(get("open.txt") == 200, "open.txt readable");
    expect(get("sub/inner.txt") == 200, "sub/inner.txt readable");
    // The file's own mode is in its change time: the next request sees it.
    fs::permissions(root / "open.txt", fs::perms::none);
    expect(get("open.txt") == 403, "open.txt is 403 at once after chmod 000");
    fs::permissions(root / "open.txt", fs::perms::owner_read);
    expect(get("open.txt") == 200, "open.txt is 200 again after chmod 400");
    // A folder on the way: seen once cache_valid has passed.
    fs::permissions(root / "sub", fs::perms::none);
    std::this_thread::sleep_for(400ms);
    expect(get("sub/inner.txt") == 403, "sub/inner.txt is 403 after cache_valid");
    fs::permissions(root / "sub", fs::perms::owner_all);
  }
  fs::remove_all(root);
  std::_Exit(failures == 0 ? 0 : 1);
}

TEST(FileCachePermissions, FileAtOnceFolderAfterValid) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(permission_child(), ::testing::ExitedWithCode(0), "");
}

TEST_F(FileCache, SiblingAndIndexThatAppearAreFoundAfterValid) {
  serve({.index = "index.html index.htm", .cache_valid = 300ms});
  put(root_ / "app.css", "body{}");
  put(root_ / "site" / "index.htm", "old index");
  EXPECT_EQ(get("app.css", "Accept-Encoding: gzip\r\n")->header("content-encoding"), "");
  EXPECT_EQ(get("site/")->body, "old index");
  put(root_ / "app.css.gz", "GZIP");
  put(root_ / "site" / "index.html", "new index");
  std::this_thread::sleep_for(400ms);
  auto css = get("app.css", "Accept-Encoding: gzip\r\n");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->header("content-encoding"), "gzip");
  EXPECT_EQ(css->body, "GZIP");
  EXPECT_EQ(get("site/")->body, "new index");
}

TEST_F(FileCache, HoldsAtMostCacheFilesDescriptors) {
  constexpr int kFiles = 40;
  serve({.cache_files = 10, .cache_valid = std::chrono::hours(1)});
  for (int i = 0; i < kFiles; ++i) put(root_ / ("f" + std::to_string(i)), "file " + std::to_string(i));
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kFiles; ++i) {
      auto res = get("f" + std::to_string(i));
      ASSERT_TRUE(res);
      EXPECT_EQ(res->body, "file " + std::to_string(i));
    }
  }
  EXPECT_GT(open_files_under(root_), 0);
  EXPECT_LE(open_files_under(root_), 10);
  // The file server's end closes them all.
  server_.reset();
  EXPECT_EQ(open_files_under(root_), 0);
}

TEST_F(FileCache, DeletedFilesAreClosedWhileOthersAreServed) {
  serve({.cache_files = 64, .cache_valid = 200ms});
  for (int i = 0; i < 16; ++i) put(root_ / ("d" + std::to_string(i)), "doomed");
  for (int i = 0; i < 16; ++i) put(root_ / ("k" + std::to_string(i)), "kept");
  for (int i = 0; i < 16; ++i) ASSERT_EQ(get("d" + std::to_string(i))->status, 200);
  for (int i = 0; i < 16; ++i) fs::remove(root_ / ("d" + std::to_string(i)));
  // Nobody asks for the deleted ones again; requests for other files, past cache_valid,
  // close their descriptors (the disk space of a deleted file is freed with its last).
  std::this_thread::sleep_for(300ms);
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 16; ++i) ASSERT_EQ(get("k" + std::to_string(i))->status, 200);
  }
  int deleted_open = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(entry.path(), ec).string();
    if (!ec && target.find("(deleted)") != std::string::npos &&
        target.starts_with(fs::canonical(root_).string()))
      ++deleted_open;
  }
  EXPECT_EQ(deleted_open, 0);
}

TEST_F(FileCache, OffOpensEveryRequestsFileAndClosesIt) {
  serve({.cache_files = 0});
  put(root_ / "a.txt", "plain");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(get("a.txt")->body, "plain");
  EXPECT_EQ(open_files_under(root_), 0);
  put(root_ / "a.txt", "changed");
  EXPECT_EQ(get("a.txt")->body, "changed");
}

// Readers on every P while a writer replaces the files again and again: every 200 is
// one whole version of the file it names, with its length, and one entity tag never
// names two bodies. After the last replacement, the next request has the last version.
class FileCacheConcurrency : public FileCache, public ::testing::WithParamInterface<int> {};

std::string version_of(int file, int version) {
  // Sizes differ between versions, so a stale length would cut or pad a body.
  std::string s = "file " + std::to_string(file) + " version " + std::to_string(version) + "\n";
  s.append(static_cast<std::size_t>(100 + (version * 37) % 3000), static_cast<char>('a' + version % 26));
  return s;
}

bool is_whole_version(const std::string& body, int file) {
  const std::string head = "file " + std::to_string(file) + " version ";
  if (!body.starts_with(head)) return false;
  const int version = std::atoi(body.c_str() + head.size());
  return body == version_of(file, version);
}

TEST_P(FileCacheConcurrency, ReplacedUnderLoadNeverMixesVersions) {
  constexpr int kFiles = 4;
  constexpr int kReaders = 4;
  const auto kFor = 1500ms;
  serve({.cache_files = 16}, GetParam());
  for (int f = 0; f < kFiles; ++f) put(root_ / ("v" + std::to_string(f)), version_of(f, 0));
  std::atomic<bool> stop{false};
  std::atomic<int> last_version{0};
  std::mutex mu;
  std::map<std::string, std::string> body_of_tag;  // guarded by mu
  std::atomic<int> bad{0}, served{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      RawConn c(server_->port());
      for (int i = 0; !stop.load(); ++i) {
        const int f = (t + i) % kFiles;
        c.send("GET /f/v" + std::to_string(f) + " HTTP/1.1\r\nHost: x\r\n\r\n");
        auto res = c.read_response();
        if (!res || res->status != 200 || !is_whole_version(res->body, f)) {
          bad.fetch_add(1);
          return;
        }
        served.fetch_add(1);
        std::lock_guard lock(mu);
        auto [at, fresh] = body_of_tag.emplace(res->header("etag"), res->body);
        if (!fresh && at->second != res->body) bad.fetch_add(1);
      }
    });
  }
  const auto until = std::chrono::steady_clock::now() + kFor;
  for (int v = 1; std::chrono::steady_clock::now() < until; ++v) {
    for (int f = 0; f < kFiles; ++f) replace(root_ / ("v" + std::to_string(f)), version_of(f, v));
    last_version.store(v);
    std::this_thread::sleep_for(1ms);
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(served.load(), 0);
  for (int f = 0; f < kFiles; ++f) {
    auto res = get("v" + std::to_string(f));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->body, version_of(f, last_version.load())) << "file " << f;
  }
}

INSTANTIATE_TEST_SUITE_P(Procs, FileCacheConcurrency, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace goro::http::test
