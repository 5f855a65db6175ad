// file_server over the wire: types, conditional requests, ranges, and escapes from the
// root that must fail.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include <goro/http/file_server.hpp>
#include <goro/http/router.hpp>

#include "test_util.hpp"

namespace goro::http::test {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
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
    put(base_ / "secret.txt", "top secret");
    fs::create_symlink("a.css", root / "link-in.css");
    fs::create_symlink(root / "a.css", root / "absolute-in.css");
    fs::create_symlink(base_ / "secret.txt", root / "link-out.txt");
    fs::create_symlink("../secret.txt", root / "relative-out.txt");
    fs::create_symlink(base_, root / "dir-out");
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }

  static Handler app() {
    Router r;
    r.handle("GET /static/{path...}", file_server((base_ / "root").string()));
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
