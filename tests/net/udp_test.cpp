// UDP: PacketConn round trips, deadlines, and a connected UDP Conn.
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

using namespace std::chrono_literals;

TEST_P(ProcsTest, UdpRoundTrip) {
  run_with(GetParam(), [] {
    auto server = listen_packet("udp", "127.0.0.1:0");
    ASSERT_TRUE(server) << server.error().message();
    auto client = listen_packet("udp4", "127.0.0.1:0");
    ASSERT_TRUE(client);
    Addr server_addr = server->local_addr();
    EXPECT_EQ(server_addr.network(), "udp");
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {  // echoes 100 datagrams back to their sender
      char buf[2048];
      for (int i = 0; i < 100; ++i) {
        auto r = server->read_from(buf, sizeof buf);
        if (!r) {
          ADD_FAILURE() << r.error().message();
          break;
        }
        auto [n, from] = *r;
        EXPECT_TRUE(server->write_to(buf, n, from));
      }
      wg.done();
    });
    for (int i = 0; i < 100; ++i) {
      std::string msg = "datagram " + std::to_string(i);
      auto w = client->write_to(msg.data(), msg.size(), server_addr);
      ASSERT_TRUE(w) << w.error().message();
      EXPECT_EQ(*w, msg.size());
      char buf[2048];
      ASSERT_FALSE(client->set_read_deadline(deadline_after(2s)));
      auto r = client->read_from(buf, sizeof buf);
      ASSERT_TRUE(r) << r.error().message();
      EXPECT_EQ(std::string(buf, r->first), msg);
      EXPECT_EQ(r->second, server_addr);
    }
    wg.wait();
  });
}

TEST(Udp, ReadDeadlineAndClose) {
  run_with(1, [] {
    auto pc = listen_packet("udp", "127.0.0.1:0");
    ASSERT_TRUE(pc);
    char buf[16];
    std::vector<double> samples;
    Result<std::pair<std::size_t, Addr>> r = errc::timeout;
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      ASSERT_FALSE(pc->set_read_deadline(t0 + 30ms));
      r = pc->read_from(buf, sizeof buf);
      samples.push_back(ms_since(t0));
      EXPECT_EQ(r.error(), errc::timeout);
    }
    expect_on_time(samples, 30);
    ASSERT_FALSE(pc->set_read_deadline(no_deadline));
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      goro::sleep(20ms);
      pc->close();
      wg.done();
    });
    r = pc->read_from(buf, sizeof buf);
    EXPECT_EQ(r.error(), errc::closed);
    wg.wait();
  });
}

// A dual-stack socket (":0" on "udp") talks to IPv4 peers with plain IPv4 addresses.
TEST(Udp, DualStackSocketSeesIpv4Peers) {
  run_with(1, [] {
    auto server = listen_packet("udp", ":0");
    ASSERT_TRUE(server) << server.error().message();
    std::uint16_t port = server->local_addr().port();
    auto client = dial("udp", join_host_port("127.0.0.1", port));
    ASSERT_TRUE(client) << client.error().message();
    ASSERT_TRUE(client->write("ping", 4));
    char buf[16];
    auto r = server->read_from(buf, sizeof buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->second.family(), AF_INET);
    EXPECT_EQ(r->second, client->local_addr());
    ASSERT_TRUE(server->write_to("pong", 4, r->second));
    auto n = client->read(buf, sizeof buf);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(std::string(buf, *n), "pong");
  });
}

// A datagram's boundaries are the message: writev on a connected UDP Conn sends the
// whole array as one datagram, however many pieces it has (more than the 64 a stream's
// writev hands the kernel at once).
TEST(Udp, WritevIsOneDatagram) {
  run_with(1, [] {
    auto server = listen_packet("udp", "127.0.0.1:0");
    ASSERT_TRUE(server);
    auto client = dial("udp", server->local_addr().to_string());
    ASSERT_TRUE(client);
    std::string bytes(100, 'x');
    for (int i = 0; i < 100; ++i) bytes[i] = static_cast<char>('a' + i % 26);
    std::vector<iovec> iov(100);
    for (int i = 0; i < 100; ++i) iov[i] = {&bytes[i], 1};
    auto w = client->writev(iov.data(), static_cast<int>(iov.size()));
    ASSERT_TRUE(w) << w.error().message();
    EXPECT_EQ(*w, 100u);
    char buf[256];
    ASSERT_FALSE(server->set_read_deadline(deadline_after(2s)));
    auto r = server->read_from(buf, sizeof buf);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::string(buf, r->first), bytes);
    std::vector<iovec> too_many(IOV_MAX + 1, iovec{&bytes[0], 1});
    EXPECT_EQ(client->writev(too_many.data(), static_cast<int>(too_many.size())).error(),
              std::errc::message_size);
  });
}

INSTANTIATE_TEST_SUITE_P(Net, ProcsTest, ::testing::Values(1, 4), procs_name);

}  // namespace
}  // namespace goro::net::testing
