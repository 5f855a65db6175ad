// file_server over the wire: types, validators and conditional requests, ranges,
// precompressed siblings, folders, and escapes from the root that must fail.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <goro/http/cors.hpp>
#include <goro/http/file_server.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>

#include "test_util.hpp"

namespace goro::http::test {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

// s in the gzip format, as `gzip -k` would leave it next to the original.
std::string gzipped(const std::string& s) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, s.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string pattern(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('A' + i % 26));
  return s;
}

class FileServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/goro-http-files-XXXXXX";
    base_ = mkdtemp(tmpl);
    fs::path root = base_ / "root";
    put(root / "index.html", "<p>home</p>");
    put(root / "a.css", "body{}");
    put(root / "data.bin", pattern(1000));
    put(root / "big.txt", pattern(1 << 20));
    put(root / "sub" / "index.html", "<p>sub</p>");
    put(root / "empty.txt", "");
    put(root / "app.js", kScript);
    put(root / "app.js.gz", gzipped(kScript));
    put(root / "both.css", "body{color:red}");
    put(root / "both.css.gz", "GZIP-BYTES");
    put(root / "both.css.br", "BROTLI-BYTES");
    put(root / "both.css.zst", "ZSTD-BYTES");
    put(root / "alt" / "index.htm", "<p>alt</p>");
    put(root / "bare" / "readme.txt", "no index here");
    put(base_ / "secret.txt", "top secret");
    fs::create_symlink("a.css", root / "link-in.css");
    fs::create_symlink(root / "a.css", root / "absolute-in.css");
    fs::create_symlink(base_ / "secret.txt", root / "link-out.txt");
    fs::create_symlink("../secret.txt", root / "relative-out.txt");
    fs::create_symlink(base_, root / "dir-out");
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }

  static constexpr const char* kScript = "console.log('precompressed'); // padding padding";

  static Handler app() {
    Router r;
    r.handle("GET /static/{path...}",
             file_server((base_ / "root").string(), {.index = "index.html index.htm"}));
    r.handle("GET /plain/{path...}",
             file_server((base_ / "root").string(), {.precompressed = false}));
    r.handle("GET /cors/{path...}",
             chain(file_server((base_ / "root").string()), {cors({.allowed_origins = {"*"}})}));
    return r;
  }

  std::optional<RawResponse> get(const std::string& target, const std::string& extra = "",
                                 const std::string& method = "GET") {
    return round_trip(server.port(),
                      method + " " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n");
  }

  static fs::path base_;
  TestServer server{app()};
};

fs::path FileServer::base_;

TEST_F(FileServer, ServesFilesWithTypes) {
  auto css = get("/static/a.css");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->status, 200);
  EXPECT_EQ(css->body, "body{}");
  EXPECT_EQ(css->header("content-type"), "text/css; charset=utf-8");
  EXPECT_EQ(css->header("accept-ranges"), "bytes");
  EXPECT_EQ(css->header("last-modified").size(), 29u);
  auto bin = get("/static/data.bin");
  ASSERT_TRUE(bin);
  EXPECT_EQ(bin->header("content-type"), "application/octet-stream");
  EXPECT_EQ(bin->body, pattern(1000));
  auto big = get("/static/big.txt");
  ASSERT_TRUE(big);
  EXPECT_FALSE(big->chunked);
  EXPECT_EQ(big->body, pattern(1 << 20));
  auto empty = get("/static/empty.txt");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_EQ(empty->header("content-length"), "0");
}

TEST_F(FileServer, FolderIndexAndMissing) {
  auto home = get("/static/");
  ASSERT_TRUE(home);
  EXPECT_EQ(home->body, "<p>home</p>");
  EXPECT_EQ(home->header("content-type"), "text/html; charset=utf-8");
  auto sub = get("/static/sub/");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->body, "<p>sub</p>");
  // Without the slash, relative links in the index would resolve one level up: the
  // client is sent to the folder's own URL first, as Go's FileServer does.
  auto bare = get("/static/sub?x=1");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 301);
  EXPECT_EQ(bare->header("location"), "./sub/?x=1");
  auto missing = get("/static/nope.txt");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(FileServer, HeadAndMethods) {
  RawConn c(server.port());
  c.send(
      "HEAD /static/data.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /static/a.css HTTP/1.1\r\nHost: "
      "x\r\n\r\n");
  auto h = c.read_response(true);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->header("content-length"), "1000");
  auto g = c.read_response();
  ASSERT_TRUE(g);
  EXPECT_EQ(g->body, "body{}");
  auto post = get("/static/a.css", "Content-Length: 0\r\n", "POST");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
}

TEST_F(FileServer, IfModifiedSince) {
  auto first = get("/static/a.css");
  ASSERT_TRUE(first);
  std::string lm = first->header("last-modified");
  auto again = get("/static/a.css", "If-Modified-Since: " + lm + "\r\n");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto old = get("/static/a.css", "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, 200);
  // The two obsolete forms every recipient must still read (RFC 9110 5.6.7).
  struct stat st = {};
  ASSERT_EQ(::stat((base_ / "root" / "a.css").c_str(), &st), 0);
  std::tm tm{};
  gmtime_r(&st.st_mtime, &tm);
  char rfc850[64], asctime_form[64];
  std::strftime(rfc850, sizeof rfc850, "%A, %d-%b-%y %H:%M:%S GMT", &tm);
  std::strftime(asctime_form, sizeof asctime_form, "%a %b %e %H:%M:%S %Y", &tm);
  for (const char* form : {rfc850, asctime_form}) {
    auto same = get("/static/a.css", std::string("If-Modified-Since: ") + form + "\r\n");
    ASSERT_TRUE(same);
    EXPECT_EQ(same->status, 304) << form;
  }
  auto old850 = get("/static/a.css", "If-Modified-Since: Saturday, 01-Jan-00 00:00:00 GMT\r\n");
  ASSERT_TRUE(old850);
  EXPECT_EQ(old850->status, 200);
  auto junk = get("/static/a.css", "If-Modified-Since: yesterday\r\n");
  ASSERT_TRUE(junk);
  EXPECT_EQ(junk->status, 200);
}

TEST_F(FileServer, Ranges) {
  const std::string all = pattern(1000);
  auto mid = get("/static/data.bin", "Range: bytes=10-19\r\n");
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->status, 206);
  EXPECT_EQ(mid->header("content-range"), "bytes 10-19/1000");
  EXPECT_EQ(mid->body, all.substr(10, 10));
  auto suffix = get("/static/data.bin", "Range: bytes=-5\r\n");
  ASSERT_TRUE(suffix);
  EXPECT_EQ(suffix->status, 206);
  EXPECT_EQ(suffix->body, all.substr(995));
  auto open_end = get("/static/data.bin", "Range: bytes=990-\r\n");
  ASSERT_TRUE(open_end);
  EXPECT_EQ(open_end->header("content-range"), "bytes 990-999/1000");
  EXPECT_EQ(open_end->body, all.substr(990));
  auto past = get("/static/data.bin", "Range: bytes=995-5000\r\n");
  ASSERT_TRUE(past);
  EXPECT_EQ(past->body, all.substr(995));
  auto beyond = get("/static/data.bin", "Range: bytes=1000-\r\n");
  ASSERT_TRUE(beyond);
  EXPECT_EQ(beyond->status, 416);
  EXPECT_EQ(beyond->header("content-range"), "bytes */1000");
  auto several = get("/static/data.bin", "Range: bytes=0-1,5-6\r\n");
  ASSERT_TRUE(several);
  EXPECT_EQ(several->status, 200);
  EXPECT_EQ(several->body, all);
  auto backwards = get("/static/data.bin", "Range: bytes=9-2\r\n");
  ASSERT_TRUE(backwards);
  EXPECT_EQ(backwards->status, 200);
  // Positions too big for 64 bits are still past the end: a last one clamps, a suffix
  // means the whole file, a first one cannot be satisfied.
  auto huge_last = get("/static/data.bin", "Range: bytes=0-18446744073709551616\r\n");
  ASSERT_TRUE(huge_last);
  EXPECT_EQ(huge_last->status, 206);
  EXPECT_EQ(huge_last->header("content-range"), "bytes 0-999/1000");
  auto huge_suffix = get("/static/data.bin", "Range: bytes=-99999999999999999999999\r\n");
  ASSERT_TRUE(huge_suffix);
  EXPECT_EQ(huge_suffix->status, 206);
  EXPECT_EQ(huge_suffix->body, all);
  auto huge_first = get("/static/data.bin", "Range: bytes=99999999999999999999999-\r\n");
  ASSERT_TRUE(huge_first);
  EXPECT_EQ(huge_first->status, 416);
}

// A FIFO under the root would block open() until a writer came, holding a thread per
// request: it is opened without waiting and refused, like every non-regular file.
TEST_F(FileServer, FifoIsRefusedWithoutBlocking) {
  const fs::path fifo = base_ / "root" / "pipe.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto start = std::chrono::steady_clock::now();
  auto r = get("/static/pipe.txt");
  ::unlink(fifo.c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(FileServer, NoEscapeAboveTheRoot) {
  for (const char* target :
       {"/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/%2E%2E%2Fsecret.txt",
        "/static/sub/../../secret.txt", "/static/..%2fsecret.txt", "/static/.."}) {
    auto r = get(target);
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 400) << target;
    EXPECT_EQ(r->body.find("top secret"), std::string::npos) << target;
  }
  for (const char* target :
       {"/static/link-out.txt", "/static/relative-out.txt", "/static/dir-out/secret.txt",
        "/static//etc/passwd", "/static/%2fetc%2fpasswd", "/static/absolute-in.css"}) {
    auto r = get(target);
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 404) << target;
    EXPECT_EQ(r->body.find("top secret"), std::string::npos) << target;
    EXPECT_EQ(r->body.find("root:"), std::string::npos) << target;
  }
  auto inside = get("/static/link-in.css");
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->status, 200) << "a link that stays inside the root is followed";
  EXPECT_EQ(inside->body, "body{}");
}

TEST_F(FileServer, StrongEntityTagAndIfNoneMatch) {
  auto first = get("/static/a.css");
  ASSERT_TRUE(first);
  const std::string etag = first->header("etag");
  ASSERT_GE(etag.size(), 3u);
  EXPECT_EQ(etag.front(), '"');
  EXPECT_EQ(etag.back(), '"');
  EXPECT_NE(etag.substr(0, 2), "W/") << "a strong tag";
  EXPECT_EQ(get("/static/a.css")->header("etag"), etag) << "stable while the file is";

  auto same = get("/static/a.css", "If-None-Match: " + etag + "\r\n");
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 304);
  EXPECT_TRUE(same->body.empty());
  EXPECT_EQ(same->header("etag"), etag);
  EXPECT_EQ(same->header("last-modified"), first->header("last-modified"));
  EXPECT_EQ(same->count("content-type"), 0u);
  // If-None-Match compares weakly; a list may hold several tags, and "*" any.
  EXPECT_EQ(get("/static/a.css", "If-None-Match: W/" + etag + "\r\n")->status, 304);
  EXPECT_EQ(get("/static/a.css", "If-None-Match: \"x\", " + etag + "\r\n")->status, 304);
  EXPECT_EQ(get("/static/a.css", "If-None-Match: *\r\n")->status, 304);
  EXPECT_EQ(get("/static/a.css", "If-None-Match: \"other\"\r\n")->status, 200);
  // If-None-Match decides alone: a date that would say "not modified" is not looked at.
  EXPECT_EQ(get("/static/a.css", "If-None-Match: \"other\"\r\nIf-Modified-Since: " +
                                     first->header("last-modified") + "\r\n")
                ->status,
            200);
  // A malformed list is ignored.
  EXPECT_EQ(get("/static/a.css", "If-None-Match: nonsense\r\n")->status, 200);
  auto head = get("/static/a.css", "If-None-Match: " + etag + "\r\n", "HEAD");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 304);
}

TEST_F(FileServer, EntityTagChangesWithTheFile) {
  const fs::path p = base_ / "root" / "changing.txt";
  put(p, "version one");
  auto before = get("/static/changing.txt");
  ASSERT_TRUE(before);
  // Same size, same second: only the nanoseconds of the modification time differ.
  struct stat st = {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  put(p, "version two");
  timespec times[2] = {st.st_atim, st.st_mtim};
  times[1].tv_nsec = (st.st_mtim.tv_nsec + 1) % 1000000000;
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
  auto after = get("/static/changing.txt", "If-None-Match: " + before->header("etag") + "\r\n");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(after->body, "version two");
  EXPECT_NE(after->header("etag"), before->header("etag"));
}

TEST_F(FileServer, IfMatchAndIfUnmodifiedSince) {
  auto first = get("/static/a.css");
  ASSERT_TRUE(first);
  const std::string etag = first->header("etag");
  EXPECT_EQ(get("/static/a.css", "If-Match: " + etag + "\r\n")->status, 200);
  EXPECT_EQ(get("/static/a.css", "If-Match: *\r\n")->status, 200);
  auto failed = get("/static/a.css", "If-Match: \"other\"\r\n");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 412);
  EXPECT_NE(failed->body.find("precondition failed"), std::string::npos);
  // If-Match compares strongly: a weak tag never matches.
  EXPECT_EQ(get("/static/a.css", "If-Match: W/" + etag + "\r\n")->status, 412);
  EXPECT_EQ(get("/static/a.css", "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n")->status,
            412);
  EXPECT_EQ(get("/static/a.css", "If-Unmodified-Since: " + first->header("last-modified") + "\r\n")
                ->status,
            200);
  // RFC 9110's order: If-Match first, so a failed one is 412 even where If-None-Match
  // alone would give 304; and If-Match, when present, makes If-Unmodified-Since moot.
  EXPECT_EQ(get("/static/a.css", "If-Match: \"other\"\r\nIf-None-Match: " + etag + "\r\n")->status,
            412);
  EXPECT_EQ(get("/static/a.css",
                "If-Match: " + etag + "\r\nIf-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n")
                ->status,
            200);
}

TEST_F(FileServer, IfRangeNeedsAStrongMatch) {
  const std::string all = pattern(1000);
  auto first = get("/static/data.bin");
  ASSERT_TRUE(first);
  const std::string etag = first->header("etag");
  const std::string lm = first->header("last-modified");
  auto tagged = get("/static/data.bin", "Range: bytes=0-9\r\nIf-Range: " + etag + "\r\n");
  ASSERT_TRUE(tagged);
  EXPECT_EQ(tagged->status, 206);
  EXPECT_EQ(tagged->body, all.substr(0, 10));
  auto dated = get("/static/data.bin", "Range: bytes=0-9\r\nIf-Range: " + lm + "\r\n");
  ASSERT_TRUE(dated);
  EXPECT_EQ(dated->status, 206);
  for (std::string stale : {"W/" + etag, std::string("\"other\""),
                            std::string("Sat, 01 Jan 2000 00:00:00 GMT"), std::string("junk")}) {
    auto whole = get("/static/data.bin", "Range: bytes=0-9\r\nIf-Range: " + stale + "\r\n");
    ASSERT_TRUE(whole) << stale;
    EXPECT_EQ(whole->status, 200) << stale;
    EXPECT_EQ(whole->body, all) << stale;
  }
}

TEST_F(FileServer, PrecompressedSiblings) {
  auto identity = get("/static/both.css");
  ASSERT_TRUE(identity);
  EXPECT_EQ(identity->body, "body{color:red}");
  EXPECT_EQ(identity->count("content-encoding"), 0u);
  EXPECT_EQ(identity->count("vary"), 0u);

  auto br = get("/static/both.css", "Accept-Encoding: gzip, deflate, br, zstd\r\n");
  ASSERT_TRUE(br);
  EXPECT_EQ(br->status, 200);
  EXPECT_EQ(br->body, "BROTLI-BYTES");
  EXPECT_EQ(br->header("content-encoding"), "br");
  EXPECT_EQ(br->header("content-type"), "text/css; charset=utf-8");
  EXPECT_EQ(br->header("vary"), "Accept-Encoding");
  EXPECT_EQ(br->header("content-length"), "12");
  EXPECT_NE(br->header("etag"), identity->header("etag"));

  auto zstd = get("/static/both.css", "Accept-Encoding: zstd, gzip;q=0.5\r\n");
  ASSERT_TRUE(zstd);
  EXPECT_EQ(zstd->body, "ZSTD-BYTES");
  EXPECT_EQ(zstd->header("content-encoding"), "zstd");
  auto gz = get("/static/both.css", "Accept-Encoding: br;q=0.1, gzip\r\n");
  ASSERT_TRUE(gz);
  EXPECT_EQ(gz->body, "GZIP-BYTES");
  auto none = get("/static/both.css", "Accept-Encoding: deflate\r\n");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->body, "body{color:red}");
  EXPECT_EQ(none->header("vary"), "Accept-Encoding");
  auto refused = get("/static/both.css", "Accept-Encoding: br;q=0, gzip;q=0, zstd;q=0\r\n");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->body, "body{color:red}");

  // A range counts the variant's bytes; its validator is the variant's.
  auto part = get("/static/both.css", "Accept-Encoding: br\r\nRange: bytes=0-5\r\n");
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->body, "BROTLI");
  EXPECT_EQ(part->header("content-range"), "bytes 0-5/12");
  EXPECT_EQ(get("/static/both.css",
                "Accept-Encoding: br\r\nIf-None-Match: " + br->header("etag") + "\r\n")
                ->status,
            304);
  EXPECT_EQ(get("/static/both.css", "If-None-Match: " + br->header("etag") + "\r\n")->status, 200)
      << "the identity representation has another tag";

  auto off = get("/plain/both.css", "Accept-Encoding: br\r\n");
  ASSERT_TRUE(off);
  EXPECT_EQ(off->body, "body{color:red}");
  EXPECT_EQ(off->count("content-encoding"), 0u);
}

// A middleware's Vary and the file server's add up: a cache keyed on one of them only
// would hand a response to the wrong client.
TEST_F(FileServer, VaryAddsToTheMiddlewares) {
  auto res = get("/cors/both.css", "Origin: https://a.example\r\nAccept-Encoding: gzip\r\n");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "GZIP-BYTES");
  std::string vary;
  for (auto [at, end] = res->headers.equal_range("vary"); at != end; ++at) vary += at->second + ";";
  EXPECT_EQ(vary, "Origin;Accept-Encoding;");
}

TEST_F(FileServer, IndexNamesInOrderAndNoListing) {
  auto alt = get("/static/alt/");
  ASSERT_TRUE(alt);
  EXPECT_EQ(alt->status, 200);
  EXPECT_EQ(alt->body, "<p>alt</p>");
  EXPECT_EQ(alt->header("content-type"), "text/html; charset=utf-8");
  auto bare = get("/static/bare/");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 404) << "a folder without an index is not listed";
  EXPECT_EQ(bare->body.find("readme.txt"), std::string::npos);
  auto redirect = get("/static/alt?a=1&b=2");
  ASSERT_TRUE(redirect);
  EXPECT_EQ(redirect->status, 301);
  EXPECT_EQ(redirect->header("location"), "./alt/?a=1&b=2");
}

// Runs curl (a shell fragment of arguments); stdout, or "curl failed" on an error.
std::string curl(const std::string& args) {
  std::string cmd = "curl --silent --show-error --max-time 15 " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "curl failed";
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return pclose(p) == 0 ? out : "curl failed: " + out;
}

TEST_F(FileServer, CurlConditionalAndCompressed) {
  const std::string url = server.url("/static/app.js");
  // -z FILE: If-Modified-Since from the file's own time, the file's date being the same.
  const std::string local = (base_ / "root" / "app.js").string();
  EXPECT_EQ(curl("-o /dev/null -w '%{http_code}' -z " + local + " " + url), "304");
  EXPECT_EQ(curl("-o /dev/null -w '%{http_code}' -z 'Jan 1 2000' " + url), "200");
  std::string head = curl("-D - -o /dev/null " + url);
  std::size_t at = head.find("ETag: ");
  ASSERT_NE(at, std::string::npos) << head;
  std::string etag = head.substr(at + 6, head.find('\r', at) - at - 6);
  EXPECT_EQ(curl("-o /dev/null -w '%{http_code}' -H 'If-None-Match: " + etag + "' " + url), "304");
  // --compressed: curl asks for gzip (and br, zstd), gets the .gz sibling and inflates it.
  std::string got = curl("--compressed -D /dev/stderr " + url);
  EXPECT_NE(got.find("Content-Encoding: gzip"), std::string::npos) << got;
  EXPECT_NE(got.find(kScript), std::string::npos) << got;
  EXPECT_EQ(curl(url), kScript);
}

TEST(FileServerSetup, RootMustExist) {
  EXPECT_THROW(file_server("/nonexistent/goro/root"), std::system_error);
}

TEST(FileServerTypes, ByExtension) {
  EXPECT_EQ(content_type_for("x.HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("dir.d/file"), "application/octet-stream");
  EXPECT_EQ(content_type_for("a.json"), "application/json");
  EXPECT_EQ(content_type_for("a.png"), "image/png");
}

}  // namespace
}  // namespace goro::http::test
