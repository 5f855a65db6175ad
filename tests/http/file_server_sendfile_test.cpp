// file_server's large bodies on every transport: sendfile(2) on plain HTTP/1.1, the copy
// path on TLS and HTTP/2 and under a writer wrapper that does not know FileSender. The
// bytes must be the file's, whole and in ranges, for fast and slow readers alike.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <goro/http/file_server.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/router.hpp>

#include "h2_test_util.hpp"
#include "test_certs.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kBig = 6 * 1024 * 1024 + 123;  // past a socket buffer
constexpr std::size_t kHuge = 256 * 1024 * 1024;

// Bytes that differ from one position to the next far apart, so that a misplaced or
// repeated block cannot pass for the right one.
std::string noise(std::size_t n) {
  std::string s(n, '\0');
  std::uint32_t x = 2463534242u;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x);
  }
  return s;
}

// A wrapper as a middleware writes one: it forwards everything and counts the body
// bytes that pass through it, and knows nothing of FileSender.
class CountingWriter final : public ResponseWriter {
 public:
  CountingWriter(ResponseWriter& inner, std::atomic<std::uint64_t>& published)
      : inner_(inner), published_(published) {}
  Headers& header() override { return inner_.header(); }
  void set_status(int code) override { inner_.set_status(code); }
  int status() const override { return inner_.status(); }
  // Counted before the bytes go on, so that a client holding them sees them counted.
  std::error_code write(std::string_view data) override {
    counted_ += data.size();
    published_.store(counted_);
    return inner_.write(data);
  }
  std::error_code flush() override { return inner_.flush(); }
  bool headers_sent() const override { return inner_.headers_sent(); }
  std::uint64_t bytes_written() const override { return inner_.bytes_written(); }
  ResponseWriter* unwrap() noexcept override { return &inner_; }

 private:
  ResponseWriter& inner_;
  std::atomic<std::uint64_t>& published_;
  std::uint64_t counted_ = 0;
};

class FileServerTransfer : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/goro-http-sendfile-XXXXXX";
    root_ = mkdtemp(tmpl);
    content_ = new std::string(noise(kBig));
    std::ofstream(root_ / "big.bin", std::ios::binary) << *content_;
    // Larger than what the kernel's socket buffers take in (a sparse file: no disk).
    std::ofstream(root_ / "huge.bin", std::ios::binary).close();
    fs::resize_file(root_ / "huge.bin", kHuge);
    pki_ = new net::testing::TestPki();
    leaf_ = new net::TlsCertificate(pki_->leaf("server", {"localhost"}));
  }
  static void TearDownTestSuite() {
    fs::remove_all(root_);
    delete content_;
    delete leaf_;
    delete pki_;
  }

  static Handler app() {
    auto r = std::make_shared<Router>();
    Handler files = file_server(root_.string());
    r->handle("GET /files/{path...}", files);
    r->handle("GET /wrapped/{path...}", [files](Request& req, ResponseWriter& w) {
      CountingWriter counting(w, last_counted_);
      files(req, counting);
    });
    r->handle("GET /ping", [](Request&, ResponseWriter& w) { w.text("pong"); });
    return [r](Request& req, ResponseWriter& w) { (*r)(req, w); };
  }

  // curl's body for args, or "" when it failed.
  static std::string curl(const std::string& args) {
    std::string cmd = "curl --silent --show-error --max-time 20 " + args;
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return {};
    std::unique_ptr<char[]> buf(new char[1 << 16]);
    std::size_t n;
    while ((n = fread(buf.get(), 1, 1 << 16, p)) > 0) out.append(buf.get(), n);
    return pclose(p) == 0 ? out : std::string();
  }
  std::string tls(const H2Server& s, const std::string& path) {
    const std::string port = std::to_string(s.port());
    return "--cacert " + pki_->ca_file() + " --resolve localhost:" + port +
           ":127.0.0.1 https://localhost:" + port + path;
  }

  static fs::path root_;
  static std::string* content_;
  static net::testing::TestPki* pki_;
  static net::TlsCertificate* leaf_;
  static std::atomic<std::uint64_t> last_counted_;
};
fs::path FileServerTransfer::root_;
std::string* FileServerTransfer::content_ = nullptr;
net::testing::TestPki* FileServerTransfer::pki_ = nullptr;
net::TlsCertificate* FileServerTransfer::leaf_ = nullptr;
std::atomic<std::uint64_t> FileServerTransfer::last_counted_{0};

// Plain HTTP/1.1 with a reader that takes its time: a small receive buffer, pauses.
// The response after it on the same connection (pipelined) comes intact too.
TEST_P(FileServerTransfer, PlainHttp1SlowReader) {
  TestServer server(app(), {}, GetParam());
  RawConn c(server.port());
  int small = 16 * 1024;
  ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  c.send(
      "GET /files/big.bin HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /files/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000000-4999999\r\n\r\n"
      "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(c.fill());
  }
  auto whole = c.read_response();
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body.size(), kBig);
  EXPECT_TRUE(whole->body == *content_) << "the bytes differ";
  auto part = c.read_response();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->header("content-range"), "bytes 1000000-4999999/" + std::to_string(kBig));
  EXPECT_TRUE(part->body == content_->substr(1000000, 4000000)) << "the range's bytes differ";
  auto pong = c.read_response();
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->body, "pong");
}

// A client that stops reading parks its connection's goroutine, not a thread: with one
// P the server answers others meanwhile; and the write deadline ends the stalled one.
TEST_P(FileServerTransfer, StalledReaderHoldsNoThread) {
  ServerOptions options;
  options.write_timeout = std::chrono::seconds(2);
  TestServer server(app(), options, GetParam());
  RawConn stalled(server.port());
  stalled.send("GET /files/huge.bin HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    auto pong = round_trip(server.port(), "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(pong);
    EXPECT_EQ(pong->body, "pong");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  // Past the deadline the server has given up: the connection ends short of the body.
  EXPECT_TRUE(stalled.closed_by_peer(5000)) << stalled.pending().size() << " bytes read";
  EXPECT_LT(stalled.pending().size(), kHuge);
}

TEST_P(FileServerTransfer, TlsCopies) {
  H2Server server(app(), {}, *leaf_, GetParam());  // ALPN h2 and http/1.1
  const std::string url = tls(server, "/files/big.bin");
  EXPECT_TRUE(curl("--http1.1 " + url) == *content_) << "h1 over TLS";
  EXPECT_TRUE(curl("--http2 " + url) == *content_) << "h2 over TLS";
  // A slow reader (curl's rate limit), and a range.
  EXPECT_TRUE(curl("--http1.1 --limit-rate 8M " + url) == *content_);
  EXPECT_TRUE(curl("--http2 --limit-rate 8M " + url) == *content_);
  const std::string want = content_->substr(100, 2999900);
  EXPECT_TRUE(curl("-r 100-2999999 --http1.1 " + url) == want);
  EXPECT_TRUE(curl("-r 100-2999999 --http2 " + url) == want);
}

TEST_P(FileServerTransfer, CleartextHttp2CopiesAndHttp1SendsFile) {
  H2Server server(app(), {}, std::nullopt, GetParam());  // h2c with prior knowledge, and h1
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/files/big.bin";
  EXPECT_TRUE(curl("--http2-prior-knowledge " + url) == *content_) << "h2c";
  EXPECT_TRUE(curl("--http1.1 " + url) == *content_) << "h1";
  EXPECT_TRUE(curl("--http2-prior-knowledge --limit-rate 8M " + url) == *content_);
  EXPECT_TRUE(curl("--http1.1 --limit-rate 8M " + url) == *content_);
  const std::string want = content_->substr(100, 2999900);
  EXPECT_TRUE(curl("-r 100-2999999 --http2-prior-knowledge " + url) == want);
  EXPECT_TRUE(curl("-r 100-2999999 --http1.1 " + url) == want);
}

// A wrapper that does not know FileSender sees every byte: the file server falls back
// to writing through it.
TEST_P(FileServerTransfer, WrappedWriterGetsTheBytes) {
  TestServer server(app(), {}, GetParam());
  last_counted_.store(0);
  auto r = round_trip(server.port(), "GET /wrapped/big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body == *content_) << "the bytes differ";
  EXPECT_EQ(last_counted_.load(), kBig);
  auto part = round_trip(server.port(),
                         "GET /wrapped/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-70000\r\n\r\n");
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_TRUE(part->body == content_->substr(kBig - 70000));
  EXPECT_EQ(last_counted_.load(), 70000u);
}

INSTANTIATE_TEST_SUITE_P(Procs, FileServerTransfer, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace goro::http::test
