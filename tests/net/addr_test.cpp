// Addr, Result and the error values; resolve() and dialing a name.
#include <arpa/inet.h>
#include <net/if.h>

#include <algorithm>

#include "net_test_util.hpp"

namespace goro::net::testing {
namespace {

TEST(Result, ValueAndError) {
  Result<int> good = 42;
  EXPECT_TRUE(good.ok());
  EXPECT_TRUE(static_cast<bool>(good));
  EXPECT_EQ(*good, 42);
  EXPECT_FALSE(good.error());
  Result<int> bad = errc::timeout;
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.error(), errc::timeout);
  EXPECT_EQ(bad.value_or(7), 7);
  EXPECT_THROW((void)bad.value(), std::system_error);
  Result<std::string> moved = std::string("abc");
  EXPECT_EQ(moved->size(), 3u);
  std::string s = *std::move(moved);
  EXPECT_EQ(s, "abc");
}

TEST(Errors, CategoriesAndHelpers) {
  std::error_code timeout = errc::timeout;
  EXPECT_STREQ(timeout.category().name(), "goro.net");
  EXPECT_EQ(timeout.message(), "i/o timeout");
  EXPECT_TRUE(timeout == std::errc::timed_out);
  EXPECT_TRUE(is_timeout(timeout));
  EXPECT_TRUE(is_timeout(std::error_code(ETIMEDOUT, std::system_category())));
  EXPECT_FALSE(is_timeout(errc::closed));
  EXPECT_TRUE(is_closed(errc::closed));
  EXPECT_EQ(std::error_code(errc::closed).message(), "use of closed network connection");
  EXPECT_FALSE(is_closed(std::make_error_code(std::errc::connection_reset)));
}

TEST(Addr, ParseAndFormat) {
  auto a = Addr::parse("tcp", "127.0.0.1:8080");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->to_string(), "127.0.0.1:8080");
  EXPECT_EQ(a->network(), "tcp");
  EXPECT_EQ(a->port(), 8080);
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_TRUE(a->is_loopback());

  auto b = Addr::parse("udp", "[::1]:53");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->to_string(), "[::1]:53");
  EXPECT_EQ(b->host(), "::1");
  EXPECT_EQ(b->network(), "udp");
  EXPECT_TRUE(b->is_loopback());

  auto any = Addr::parse("tcp", ":80");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->to_string(), "0.0.0.0:80");
  auto any6 = Addr::parse("tcp6", ":80");
  ASSERT_TRUE(any6);
  EXPECT_EQ(any6->to_string(), "[::]:80");

  auto u = Addr::parse("unix", "/run/app.sock");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->to_string(), "/run/app.sock");
  EXPECT_EQ(u->network(), "unix");
  auto abstract = Addr::parse("unix", "@hidden");
  ASSERT_TRUE(abstract);
  EXPECT_EQ(abstract->to_string(), "@hidden");

  EXPECT_EQ(Addr().to_string(), "");
  EXPECT_TRUE(Addr().empty());
  EXPECT_EQ(*Addr::parse("tcp", "10.0.0.1:1"), *Addr::parse("tcp", "10.0.0.1:1"));
  EXPECT_FALSE(*Addr::parse("tcp", "10.0.0.1:1") == *Addr::parse("tcp", "10.0.0.1:2"));
  EXPECT_EQ(a->with_port(9).to_string(), "127.0.0.1:9");
  EXPECT_EQ(a->to_v6_mapped().to_string(), "[::ffff:127.0.0.1]:8080");
}

TEST(Addr, Ipv4MappedBecomesIpv4) {
  sockaddr_in6 in6 = {};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(99);
  inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr);
  Addr a = Addr::from_sockaddr(reinterpret_cast<sockaddr*>(&in6), sizeof in6, Network::tcp);
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.to_string(), "10.1.2.3:99");
}

TEST(Addr, Rejects) {
  EXPECT_FALSE(Addr::parse("tcp", "127.0.0.1"));        // no port
  EXPECT_FALSE(Addr::parse("tcp", "::1:80"));           // unbracketed IPv6
  EXPECT_FALSE(Addr::parse("tcp", "127.0.0.1:65536"));  // port out of range
  EXPECT_FALSE(Addr::parse("tcp", "127.0.0.1:http"));   // no service names
  EXPECT_FALSE(Addr::parse("tcp", "example.com:80"));   // parse never looks up
  EXPECT_FALSE(Addr::parse("tcp4", "[::1]:80"));        // wrong family
  EXPECT_EQ(Addr::parse("sctp", "1.2.3.4:5").error(), std::errc::protocol_not_supported);
}

// IPv6 zones: a numeric one is an interface index, a name must name an interface
// ("lo" exists everywhere); an unknown name is an error, not a silent zone 0.
TEST(Addr, Ipv6Zones) {
  auto by_name = Addr::parse("tcp", "[fe80::1%lo]:80");
  ASSERT_TRUE(by_name) << by_name.error().message();
  EXPECT_EQ(by_name->to_string(), "[fe80::1%lo]:80");
  const std::string index = std::to_string(if_nametoindex("lo"));
  auto by_index = Addr::parse("tcp", "[fe80::1%" + index + "]:80");
  ASSERT_TRUE(by_index);
  EXPECT_EQ(*by_index, *by_name);
  EXPECT_FALSE(Addr::parse("tcp", "[fe80::1%nosuch0]:80"));
  EXPECT_FALSE(Addr::parse("tcp", "[fe80::1%]:80"));
}

TEST(SplitHostPort, AsGo) {
  auto p = split_host_port("[::1]:80");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "::1");
  EXPECT_EQ(p->second, "80");
  p = split_host_port("example.com:https");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "example.com");
  p = split_host_port(":8080");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "");
  EXPECT_FALSE(split_host_port("a:b:c"));
  EXPECT_FALSE(split_host_port("[::1]80"));
  EXPECT_EQ(join_host_port("::1", 443), "[::1]:443");
  EXPECT_EQ(join_host_port("h", 1), "h:1");
}

TEST(Resolve, LocalhostAndLiterals) {
  run_with(1, [] {
    auto addrs = resolve("localhost");
    ASSERT_TRUE(addrs) << addrs.error().message();
    ASSERT_FALSE(addrs->empty());
    bool loopback =
        std::all_of(addrs->begin(), addrs->end(), [](const Addr& a) { return a.is_loopback(); });
    EXPECT_TRUE(loopback);
    bool v4 = std::any_of(addrs->begin(), addrs->end(),
                          [](const Addr& a) { return a.to_string() == "127.0.0.1"; });
    EXPECT_TRUE(v4);
    EXPECT_EQ(addrs->front().network(), "ip");

    auto literal = resolve("::1");
    ASSERT_TRUE(literal);
    ASSERT_EQ(literal->size(), 1u);
    EXPECT_EQ(literal->front().to_string(), "::1");
  });
}

TEST(Resolve, DialByName) {
  run_with(2, [] {
    auto ln = listen("tcp", "localhost:0");  // binds the first IPv4 address: 127.0.0.1
    ASSERT_TRUE(ln) << ln.error().message();
    EXPECT_EQ(ln->addr().host(), "127.0.0.1");
    EchoServer server(std::move(*ln));
    auto port = Addr::parse("tcp", server.addr())->port();
    auto c = dial("tcp", join_host_port("localhost", port));
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_TRUE(c->remote_addr().is_loopback());
    ASSERT_TRUE(c->write("name", 4));
    char buf[4];
    auto r = c->read_full(buf, 4);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 4u);
  });
}

}  // namespace
}  // namespace goro::net::testing
