// Conn::send_file: a file's bytes onto a socket by sendfile(2), whole and in ranges, to
// a reader that takes its time; parking (not holding the thread) while the socket is
// full; the write deadline, close() and a context ending the wait; a file that ends
// before the count.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include <goro/scheduler/context.hpp>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

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

// A temporary file holding content, open for reading; removed from its folder at once.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    char path[] = "/tmp/goro-send-file-XXXXXX";
    fd_ = ::mkstemp(path);
    EXPECT_GE(fd_, 0);
    ::unlink(path);
    EXPECT_EQ(::write(fd_, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  }
  ~TempFile() { ::close(fd_); }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// A connected pair: *server from accept, *client from dial.
void connect_pair(Conn& server, Conn& client) {
  auto ln = listen("tcp", "127.0.0.1:0");
  ASSERT_TRUE(ln);
  goro::WaitGroup accepted;
  accepted.add(1);
  goro::go([&] {
    auto c = ln->accept();
    if (c) server = std::move(*c);
    accepted.done();
  });
  auto c = dial("tcp", ln->addr().to_string());
  ASSERT_TRUE(c);
  client = std::move(*c);
  accepted.wait();
  ASSERT_TRUE(server.is_open());
}

class SendFile : public ::testing::TestWithParam<int> {};

// The whole file and a range of it, one after the other on one connection, to a reader
// with a small buffer that pauses: the socket fills and the sender parks again and again.
TEST_P(SendFile, WholeAndRangeToASlowReader) {
  run_with(GetParam(), [] {
    const std::string content = noise(3 * 1024 * 1024 + 17);
    TempFile file(content);
    Conn server, client;
    connect_pair(server, client);
    ASSERT_FALSE(client.set_read_buffer(16 * 1024));
    ASSERT_FALSE(server.set_write_buffer(16 * 1024));
    std::atomic<std::uint64_t> sent_whole{0}, sent_range{0};
    std::error_code first, second;
    goro::WaitGroup sending;
    sending.add(1);
    goro::go([&] {
      std::uint64_t n = 0;
      first = server.send_file(file.fd(), 0, content.size(), n);
      sent_whole = n;
      second = server.send_file(file.fd(), 1000, 200'000, n);
      sent_range = n;
      sending.done();
    });
    std::string got;
    std::string buf(7000, '\0');
    while (got.size() < content.size() + 200'000) {
      auto n = client.read(buf.data(), buf.size());
      ASSERT_TRUE(n);
      ASSERT_GT(*n, 0u);
      got.append(buf.data(), *n);
      if (got.size() % 5 == 0) goro::sleep(1ms);
    }
    sending.wait();
    EXPECT_FALSE(first) << first.message();
    EXPECT_FALSE(second) << second.message();
    EXPECT_EQ(sent_whole.load(), content.size());
    EXPECT_EQ(sent_range.load(), 200'000u);
    EXPECT_TRUE(got.substr(0, content.size()) == content) << "the whole file differs";
    EXPECT_TRUE(got.substr(content.size()) == content.substr(1000, 200'000)) << "the range differs";
  });
}

// While the peer does not read, the sender parks: on one P, another goroutine runs.
TEST_P(SendFile, ParksWhileTheSocketIsFull) {
  run_with(GetParam(), [] {
    const std::string content = noise(8 * 1024 * 1024);
    TempFile file(content);
    Conn server, client;
    connect_pair(server, client);
    ASSERT_FALSE(client.set_read_buffer(16 * 1024));
    ASSERT_FALSE(server.set_write_buffer(16 * 1024));
    std::atomic<bool> done{false};
    std::error_code ec;
    std::uint64_t sent = 0;
    goro::WaitGroup sending;
    sending.add(1);
    goro::go([&] {
      ec = server.send_file(file.fd(), 0, content.size(), sent);
      done = true;
      sending.done();
    });
    int ticks = 0;
    for (; ticks < 20; ++ticks) goro::sleep(2ms);
    EXPECT_FALSE(done.load()) << "sent 8 MiB to a peer that reads nothing";
    EXPECT_EQ(ticks, 20);
    std::string buf(1 << 16, '\0');
    std::uint64_t got = 0;
    while (got < content.size()) {
      auto n = client.read(buf.data(), buf.size());
      ASSERT_TRUE(n);
      ASSERT_GT(*n, 0u);
      got += *n;
    }
    sending.wait();
    EXPECT_FALSE(ec);
    EXPECT_EQ(sent, content.size());
  });
}

// A peer that never reads: the write deadline, close() from another goroutine and a
// context each end the parked send_file, with what went counted.
TEST_P(SendFile, DeadlineCloseAndContextEndTheWait) {
  run_with(GetParam(), [] {
    const std::string content = noise(8 * 1024 * 1024);
    TempFile file(content);
    {
      Conn server, client;
      connect_pair(server, client);
      ASSERT_FALSE(server.set_write_deadline(deadline_after(50ms)));
      std::uint64_t sent = 0;
      EXPECT_EQ(server.send_file(file.fd(), 0, content.size(), sent), errc::timeout);
      EXPECT_GT(sent, 0u);
      EXPECT_LT(sent, content.size());
      // A deadline already past fails at once, sending nothing.
      EXPECT_EQ(server.send_file(file.fd(), 0, content.size(), sent), errc::timeout);
      EXPECT_EQ(sent, 0u);
    }
    {
      Conn server, client;
      connect_pair(server, client);
      goro::go([&] {
        goro::sleep(30ms);
        server.close();
      });
      std::uint64_t sent = 0;
      EXPECT_EQ(server.send_file(file.fd(), 0, content.size(), sent), errc::closed);
    }
    {
      Conn server, client;
      connect_pair(server, client);
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      goro::go([cancel = cancel] {
        goro::sleep(30ms);
        cancel();
      });
      std::uint64_t sent = 0;
      std::error_code ec = with_context(server, IoMode::write, ctx, [&] {
        return server.send_file(file.fd(), 0, content.size(), sent);
      });
      EXPECT_EQ(ec, goro::context_errc::canceled);
      // The connection still works once the context is gone.
      std::string buf(1 << 16, '\0');
      goro::WaitGroup draining;
      draining.add(1);
      goro::go([&] {
        while (true) {
          auto n = client.read(buf.data(), buf.size());
          if (!n || *n == 0) break;
        }
        draining.done();
      });
      EXPECT_FALSE(server.send_file(file.fd(), 0, 100'000, sent));
      EXPECT_EQ(sent, 100'000u);
      server.close();  // the reader sees the end and stops
      draining.wait();
    }
  });
}

TEST(SendFileEnds, FileShorterThanTheCount) {
  run_with(2, [] {
    const std::string content = noise(50'000);
    TempFile file(content);
    Conn server, client;
    connect_pair(server, client);
    std::uint64_t sent = 0;
    EXPECT_FALSE(server.send_file(file.fd(), 40'000, 1'000'000, sent));
    EXPECT_EQ(sent, 10'000u);
    std::string got(10'000, '\0');
    auto n = client.read_full(got.data(), got.size());
    ASSERT_TRUE(n);
    EXPECT_EQ(got, content.substr(40'000));
    Conn none;
    EXPECT_EQ(none.send_file(file.fd(), 0, 1, sent), std::errc::bad_file_descriptor);
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, SendFile, ::testing::Values(1, 2, 4, 8), procs_name);

}  // namespace
}  // namespace goro::net::testing
