// Many keep-alive connections whose handlers wait: each request takes its context and
// sleeps on it for 0 to 2 ms, so at every moment hundreds of connections are either
// parked in a handler or waiting for their next request, on every thread of the
// server, while goroutines move between threads. This is the load under which goro-demo
// once died within seconds (GET /sleep at 1,000 connections): a connection going idle
// freed a spare exchange, whose request context ended inside the thread's exchange
// cache, at a point where the goroutine could move to another thread. What a client
// must see: the server stays up, and every response is the one its request asked for.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <goro/http/server.hpp>
#include <goro/scheduler/context.hpp>

#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kConns = 400;
constexpr auto kLoad = 3s;

// GET /wait?us=N&tag=T: sleeps N µs on the request's context, then answers T.
Handler waiting_handler() {
  return [](Request& req, ResponseWriter& w) {
    const std::string us_text = req.query("us").value_or("0");
    int us = 0;
    std::from_chars(us_text.data(), us_text.data() + us_text.size(), us);
    if (goro::sleep(std::chrono::microseconds(us), req.context())) return;
    w.text(std::string(req.query("tag").value_or("")));
  };
}

// One client connection of the load: a request in flight at a time, keep-alive.
struct LoadConn {
  int fd = -1;
  int id = 0;
  unsigned seq = 0;
  std::string expected;  // the body the request in flight must get back
  std::string in;
  bool busy = false;
};

struct LoadReport {
  std::uint64_t responses = 0;
  std::uint64_t errors = 0;
  std::string first_error;
  void fail(std::string why) {
    if (errors++ == 0) first_error = std::move(why);
  }
};

void send_next(LoadConn& c, LoadReport& report) {
  ++c.seq;
  const unsigned us = (c.seq * 7919u + static_cast<unsigned>(c.id) * 104729u) % 2001u;
  c.expected = "c" + std::to_string(c.id) + "-" + std::to_string(c.seq);
  const std::string req = "GET /wait?us=" + std::to_string(us) + "&tag=" + c.expected +
                          " HTTP/1.1\r\nHost: x\r\n\r\n";
  if (::send(c.fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    report.fail("send failed on connection " + std::to_string(c.id));
    return;
  }
  c.busy = true;
}

// Takes one whole response off c.in if it is there; false when more bytes are needed.
bool take_response(LoadConn& c, LoadReport& report) {
  const std::size_t head_end = c.in.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  const std::size_t cl = c.in.find("Content-Length: ");
  if (cl == std::string::npos || cl > head_end) {
    report.fail("response without Content-Length: " + c.in.substr(0, head_end));
    c.in.clear();
    c.busy = false;
    return true;
  }
  std::size_t length = 0;
  std::from_chars(c.in.data() + cl + 16, c.in.data() + head_end, length);
  if (c.in.size() < head_end + 4 + length) return false;
  const std::string body = c.in.substr(head_end + 4, length);
  if (c.in.compare(0, 12, "HTTP/1.1 200") != 0) {
    report.fail("status: " + c.in.substr(0, c.in.find("\r\n")));
  } else if (body != c.expected) {
    report.fail("connection " + std::to_string(c.id) + " expected " + c.expected + ", got " + body);
  } else {
    ++report.responses;
  }
  c.in.erase(0, head_end + 4 + length);
  c.busy = false;
  return true;
}

// Runs kConns connections against port for `load`, then lets the requests in flight
// finish (at most 5 s more).
LoadReport drive(std::uint16_t port, std::chrono::milliseconds load) {
  LoadReport report;
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<LoadConn> conns(kConns);
  for (int i = 0; i < kConns; ++i) {
    LoadConn& c = conns[i];
    c.id = i;
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c.fd < 0 || ::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      report.fail(std::string("connect: ") + std::strerror(errno));
      break;
    }
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::fcntl(c.fd, F_SETFL, O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    send_next(c, report);
  }
  const auto stop_sending = Clock::now() + load;
  const auto give_up = stop_sending + 5s;
  int in_flight = 0;
  for (const LoadConn& c : conns) in_flight += c.busy;
  epoll_event events[256];
  while (in_flight > 0 && Clock::now() < give_up && report.errors == 0) {
    const int n = ::epoll_wait(ep, events, 256, 100);
    for (int k = 0; k < n; ++k) {
      LoadConn& c = conns[events[k].data.u32];
      char buf[4096];
      const ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        report.fail("connection " + std::to_string(c.id) + " closed by the server");
        ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
        if (c.busy) --in_flight;
        c.busy = false;
        continue;
      }
      c.in.append(buf, static_cast<std::size_t>(got));
      while (c.busy && take_response(c, report)) {
        --in_flight;
        if (Clock::now() < stop_sending) {
          send_next(c, report);
          in_flight += c.busy;
        }
      }
    }
  }
  if (in_flight > 0 && report.errors == 0) {
    report.fail(std::to_string(in_flight) + " requests still unanswered 5 s after the load");
  }
  for (LoadConn& c : conns)
    if (c.fd >= 0) ::close(c.fd);
  ::close(ep);
  return report;
}

class WaitingHandlers : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    // kConns descriptors on each side.
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
};
INSTANTIATE_TEST_SUITE_P(Ps, WaitingHandlers, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return std::to_string(info.param) + "Ps"; });

TEST_P(WaitingHandlers, ServerStaysUpAndAnswersEveryRequestRight) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < 2 * kConns + 64) GTEST_SKIP() << "needs " << 2 * kConns + 64 << " descriptors";
  TestServer server(waiting_handler(), ServerOptions{}, GetParam());
  ASSERT_NE(server.port(), 0);
  const LoadReport report = drive(server.port(), kLoad);
  EXPECT_EQ(report.errors, 0u) << report.first_error;
  // A few thousand requests at least: the handlers waited, the server did not stall.
  EXPECT_GT(report.responses, 2000u);
  // Still serving afterwards, on a fresh connection.
  RawConn after(server.port());
  ASSERT_TRUE(after.send("GET /wait?us=0&tag=after HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto response = after.read_response();
  ASSERT_TRUE(response);
  EXPECT_EQ(response->body, "after");
  EXPECT_FALSE(server.stop());
}

}  // namespace
}  // namespace goro::http::test
