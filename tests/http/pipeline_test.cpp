// Pipelined requests through the real connection code (Server::serve_conn) over an
// in-memory Stream that hands the server scripted reads and records every write: the
// responses to requests that arrived together leave in one write, in order, and a
// response is never held back while the server waits for the client. Also the race
// between a graceful shutdown and a request arriving on an idle connection.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <goro/http/server.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace goro::http {
namespace {

// What the server wrote, call by call, and how much of it had been written when each
// read was made.
struct Wire {
  std::vector<std::string> reads;  // served in order, one per read(); then end of stream
  std::size_t next_read = 0;
  std::vector<std::string> writes;
  std::vector<std::size_t> written_before_read;             // bytes written when read i was made
  std::function<void(std::size_t read_index)> before_read;  // may park

  std::string output() const {
    std::string all;
    for (const std::string& w : writes) all += w;
    return all;
  }
};

class ScriptedStream final : public net::Stream {
 public:
  explicit ScriptedStream(std::shared_ptr<Wire> wire) : wire_(std::move(wire)) {}

  Result<std::size_t> read(void* buf, std::size_t len) override {
    if (closed_) return make_error_code(net::errc::closed);
    if (wire_->before_read) wire_->before_read(wire_->written_before_read.size());
    wire_->written_before_read.push_back(wire_->output().size());
    if (wire_->next_read == wire_->reads.size() || len == 0) return std::size_t{0};
    std::string& chunk = wire_->reads[wire_->next_read];
    std::size_t n = std::min(len, chunk.size());
    std::copy_n(chunk.data(), n, static_cast<char*>(buf));
    chunk.erase(0, n);
    if (chunk.empty()) ++wire_->next_read;
    return n;
  }
  Result<std::size_t> write(const void* buf, std::size_t len) override {
    iovec iov{const_cast<void*>(buf), len};
    return writev(&iov, 1);
  }
  Result<std::size_t> writev(const iovec* iov, int count) override {
    if (closed_ || write_shut_) return make_error_code(std::errc::broken_pipe);
    std::string call;
    for (int i = 0; i < count; ++i)
      call.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    wire_->writes.push_back(call);
    return call.size();
  }
  std::error_code close() override {
    closed_ = true;
    return {};
  }
  std::error_code shutdown_write() override {
    write_shut_ = true;
    return {};
  }
  bool peer_closed() const override { return wire_->next_read == wire_->reads.size(); }
  std::error_code set_read_deadline(net::Deadline) override { return {}; }
  std::error_code set_write_deadline(net::Deadline) override { return {}; }
  std::error_code set_deadline(net::Deadline) override { return {}; }
  net::Addr remote_addr() const override { return {}; }
  net::Addr local_addr() const override { return {}; }

 private:
  std::shared_ptr<Wire> wire_;
  std::atomic<bool> closed_{false};  // close() may come from the goroutine of a shutdown
  bool write_shut_ = false;
};

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"; }

// Serves reads on one connection with handler; returns what went over the wire.
std::shared_ptr<Wire> serve(std::vector<std::string> reads, Handler handler,
                            ServerOptions options = {}) {
  auto wire = std::make_shared<Wire>();
  wire->reads = std::move(reads);
  goro::run(
      [&] {
        Server server(std::move(options), std::move(handler));
        server.serve_conn(std::make_unique<ScriptedStream>(wire));
      },
      goro::Config{.maxprocs = 1});
  return wire;
}

// The bodies of the responses in out, in order (each response is Content-Length framed).
std::vector<std::string> bodies(const std::string& out) {
  std::vector<std::string> result;
  std::size_t pos = 0;
  while ((pos = out.find("HTTP/1.1 ", pos)) != std::string::npos) {
    std::size_t length_at = out.find("Content-Length: ", pos);
    std::size_t head_end = out.find("\r\n\r\n", pos);
    if (length_at == std::string::npos || head_end == std::string::npos) break;
    std::size_t length = std::stoul(out.substr(length_at + 16));
    result.push_back(out.substr(head_end + 4, length));
    pos = head_end + 4 + length;
  }
  return result;
}

void echo_path(Request& req, ResponseWriter& w) { w.text(std::string(req.path())); }

TEST(Pipelining, RequestsReadTogetherAreAnsweredInOneWriteInOrder) {
  std::string batch;
  std::vector<std::string> expected;
  for (int i = 0; i < 16; ++i) {
    batch += get("/" + std::to_string(i));
    expected.push_back("/" + std::to_string(i));
  }
  auto wire = serve({batch}, echo_path);
  EXPECT_EQ(bodies(wire->output()), expected);
  ASSERT_EQ(wire->writes.size(), 1u) << "16 responses should leave in one write";
  // Before the read that found the end of the stream, all 16 were out.
  ASSERT_EQ(wire->written_before_read.size(), 2u);
  EXPECT_EQ(wire->written_before_read[1], wire->output().size());
}

TEST(Pipelining, AResponseIsWrittenBeforeTheServerWaitsForMoreInput) {
  // The second request arrives in two halves: the first response must be out before
  // the server reads the rest, or a client waiting for it would never send that rest.
  std::string second = get("/b");
  auto wire = serve({get("/a") + second.substr(0, 10), second.substr(10)}, echo_path);
  EXPECT_EQ(bodies(wire->output()), (std::vector<std::string>{"/a", "/b"}));
  ASSERT_GE(wire->written_before_read.size(), 2u);
  EXPECT_GT(wire->written_before_read[1], 0u) << "response /a held while reading /b";
}

TEST(Pipelining, AStreamingHandlerFlushesTheBatchBeforeItsOwnBytes) {
  std::size_t writes_when_flushed = 0;
  std::shared_ptr<Wire> wire;
  auto handler = [&](Request& req, ResponseWriter& w) {
    if (req.path() != "/stream") return echo_path(req, w);
    w.write("part 1;");
    w.flush();
    writes_when_flushed = 1;  // reached: the flush returned
    w.write("part 2");
  };
  wire = serve({get("/a") + get("/stream") + get("/c")}, handler);
  std::string out = wire->output();
  EXPECT_EQ(writes_when_flushed, 1u);
  std::size_t a = out.find("\r\n\r\n/a"), stream = out.find("part 1;"), c = out.find("\r\n\r\n/c");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(stream, std::string::npos);
  ASSERT_NE(c, std::string::npos);
  EXPECT_LT(a, stream);
  EXPECT_LT(stream, c);
  EXPECT_NE(out.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_GE(wire->writes.size(), 2u) << "the flush must reach the wire on its own";
}

TEST(Pipelining, ABatchLargerThanTheWriteBufferIsSplit) {
  std::string batch;
  std::vector<std::string> expected;
  for (int i = 0; i < 32; ++i) {
    batch += get("/" + std::to_string(i));
    expected.push_back("/" + std::to_string(i));
  }
  ServerOptions options;
  options.write_buffer_size = 1024;  // a response is about 130 bytes
  auto wire = serve({batch}, echo_path, options);
  EXPECT_EQ(bodies(wire->output()), expected);
  EXPECT_GT(wire->writes.size(), 2u);
  for (const std::string& w : wire->writes) EXPECT_LE(w.size(), 1024u + 256u);
}

TEST(Pipelining, AnErrorReplyFollowsTheResponsesBeforeIt) {
  auto wire = serve({get("/a") + get("/b") + "GET / HTTP/1.1\r\nHost: a b\r\n\r\n" + get("/never")},
                    echo_path);
  std::string out = wire->output();
  std::size_t b = out.find("\r\n\r\n/b"), bad = out.find("HTTP/1.1 400");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(bad, std::string::npos);
  EXPECT_LT(b, bad);
  EXPECT_EQ(out.find("/never"), std::string::npos);
}

TEST(Pipelining, BodiesAndHeadRequestsKeepTheirFraming) {
  std::string post = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  std::string head = "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n";
  auto handler = [](Request& req, ResponseWriter& w) {
    if (req.path() == "/echo") {
      Result<std::string> body = req.body();
      w.text(body ? *body : "read failed");
    } else {
      w.text(std::string(req.path()));
    }
  };
  auto wire = serve({post + head + get("/after")}, handler);
  std::string out = wire->output();
  EXPECT_EQ(wire->writes.size(), 1u);
  std::size_t hello = out.find("\r\n\r\nhello");
  ASSERT_NE(hello, std::string::npos);
  std::size_t head_at = out.find("HTTP/1.1", hello), after = out.find("\r\n\r\n/after");
  ASSERT_NE(head_at, std::string::npos);
  ASSERT_NE(after, std::string::npos);
  std::string head_response = out.substr(head_at, after - head_at);
  EXPECT_NE(head_response.find("Content-Length: 2\r\n"), std::string::npos) << head_response;
  EXPECT_EQ(head_response.find("/h"), std::string::npos) << "HEAD's response carries no body";
}

// Graceful shutdown and a connection it finds idle while the next request's bytes are on
// the way. With no grace (Go's rule) it closes the connection, and the request read just
// before that close must not be served: its answer could not be written, and a handler's
// work with no answer is a request lost. With the grace (the default) the request is
// served, and its answer says "Connection: close".
std::vector<std::string> race_idle_close(std::chrono::nanoseconds grace, int* handled_out,
                                         std::string* output) {
  auto wire = std::make_shared<Wire>();
  wire->reads = {get("/a"), get("/b")};
  std::atomic<int> handled{0};
  goro::run(
      [&] {
        ServerOptions options;
        options.shutdown_idle_grace = grace;
        Server server(options, [&](Request& req, ResponseWriter& w) {
          handled.fetch_add(1);
          echo_path(req, w);
        });
        goro::WaitGroup shut;
        wire->before_read = [&](std::size_t i) {
          if (i != 1) return;  // the connection now waits, idle, for /b
          shut.add(1);
          goro::go([&] {
            server.shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(5));
            shut.done();
          });
          goro::sleep(std::chrono::milliseconds(20));  // it finds the connection idle
        };
        server.serve_conn(std::make_unique<ScriptedStream>(wire));
        shut.wait();
      },
      goro::Config{.maxprocs = 2});
  *handled_out = handled.load();
  *output = wire->output();
  return bodies(wire->output());
}

TEST(ServerShutdown, ARequestThatRacesAnIdleCloseIsNotServed) {
  int handled = 0;
  std::string out;
  EXPECT_EQ(race_idle_close(std::chrono::nanoseconds(0), &handled, &out),
            (std::vector<std::string>{"/a"}));
  EXPECT_EQ(handled, 1) << "/b was handled after its connection was closed";
}

TEST(ServerShutdown, ARequestThatComesInTheIdleGraceIsServedWithClose) {
  int handled = 0;
  std::string out;
  EXPECT_EQ(race_idle_close(std::chrono::milliseconds(500), &handled, &out),
            (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(handled, 2);
  const std::size_t second = out.rfind("HTTP/1.1 200");
  ASSERT_NE(second, std::string::npos);
  EXPECT_NE(out.find("Connection: close\r\n", second), std::string::npos) << out;
}

}  // namespace
}  // namespace goro::http
