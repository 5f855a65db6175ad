// Listeners passed between processes (activation.hpp): a listening socket taken over
// from a descriptor, systemd's LISTEN_FDS protocol on both ends (this test binary
// starts itself with a listener, and the child serves it), and sd_notify's datagrams.
#include <goro/net/activation.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/runtime.hpp>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

using namespace std::chrono_literals;
namespace net = goro::net;

namespace {

// A listening TCP socket on 127.0.0.1:<ephemeral>, made without goro.
int raw_listener(int type = SOCK_STREAM, bool listening = true) {
  int fd = ::socket(AF_INET, type, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (listening) {
    EXPECT_EQ(::listen(fd, 16), 0);
  }
  return fd;
}

std::string self_exe() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

TEST(Activation, ListenerFromFdAcceptsAndRefusesOtherSockets) {
  goro::run([] {
    const int fd = raw_listener();
    goro::Result<net::Listener> ln = net::listener_from_fd(fd);
    ASSERT_TRUE(ln) << ln.error().message();
    EXPECT_EQ(ln->addr().host(), "127.0.0.1");
    goro::go([port = ln->addr().port()] {
      goro::Result<net::Conn> c = net::dial("tcp", "127.0.0.1:" + std::to_string(port));
      ASSERT_TRUE(c);
      (void)c->write("hi", 2);
    });
    goro::Result<net::Conn> accepted = ln->accept();
    ASSERT_TRUE(accepted);
    char buf[2];
    goro::Result<std::size_t> n = accepted->read(buf, 2);
    ASSERT_TRUE(n);
    EXPECT_EQ(std::string(buf, *n), "hi");

    const int udp = raw_listener(SOCK_DGRAM, false);
    EXPECT_EQ(net::listener_from_fd(udp).error(), std::errc::invalid_argument);
    ::close(udp);
    const int bound = raw_listener(SOCK_STREAM, false);
    EXPECT_EQ(net::listener_from_fd(bound).error(), std::errc::invalid_argument);
    ::close(bound);
    EXPECT_EQ(net::listener_from_fd(-1).error(), std::errc::invalid_argument);
  });
}

// Variables for another process, or none at all: nothing inherited, and they are gone
// from the environment afterwards. Garbage is an error.
TEST(Activation, InheritedListenersOnlyForThisProcess) {
  goro::run([] {
    ::unsetenv("LISTEN_FDS");
    goro::Result<std::vector<net::InheritedListener>> none = net::inherited_listeners();
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->empty());
    ::setenv("LISTEN_PID", std::to_string(::getpid() + 1).c_str(), 1);
    ::setenv("LISTEN_FDS", "1", 1);
    ::setenv("LISTEN_FDNAMES", "http", 1);
    goro::Result<std::vector<net::InheritedListener>> other = net::inherited_listeners();
    ASSERT_TRUE(other);
    EXPECT_TRUE(other->empty());
    EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
    EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);
    EXPECT_EQ(std::getenv("LISTEN_FDNAMES"), nullptr);
    ::setenv("LISTEN_PID", "not a pid", 1);
    ::setenv("LISTEN_FDS", "1", 1);
    EXPECT_EQ(net::inherited_listeners().error(), std::errc::invalid_argument);
  });
}

TEST(Activation, NotifyReachesTheNotifySocket) {
  goro::run([] {
    goro::Result<net::NotifySocket> s = net::NotifySocket::open();
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(s->name().rfind("@goro-notify-", 0), 0u) << s->name();
    ::unsetenv("NOTIFY_SOCKET");
    EXPECT_FALSE(net::notify("READY=1"));  // nowhere to send: nothing sent, no error
    EXPECT_EQ(s->receive(net::deadline_after(50ms)).error(), net::errc::timeout);
    ::setenv("NOTIFY_SOCKET", s->name().c_str(), 1);
    EXPECT_FALSE(net::notify("READY=1\nSTATUS=serving"));
    goro::Result<std::string> got = s->receive(net::deadline_after(5s));
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(*got, "READY=1\nSTATUS=serving");
    ::unsetenv("NOTIFY_SOCKET");
  });
}

// The child's side of the next test: serves one connection on the listener it was
// given, answering with the listener's name.
TEST(Activation, Child) {
  if (std::getenv("GORO_NET_ACTIVATION_CHILD") == nullptr)
    GTEST_SKIP() << "runs only as the child of Activation.StartWithListenersPassesThem";
  const int code = goro::run([]() -> int {
    goro::Result<std::vector<net::InheritedListener>> got = net::inherited_listeners();
    if (!got || got->size() != 1) return 3;
    if (std::getenv("LISTEN_FDS") != nullptr) return 4;
    (void)net::notify("READY=1");
    goro::Result<net::Conn> c = (*got)[0].listener.accept();
    if (!c) return 5;
    const std::string answer = "served by " + (*got)[0].name;
    return c->write(answer.data(), answer.size()) ? 0 : 6;
  });
  std::fflush(nullptr);
  std::_Exit(code);
}

// A process started with a listener at descriptor 3 (LISTEN_FDS, LISTEN_PID set for
// it) takes it over, tells the parent READY=1, and serves the connection the parent
// queued on the socket before the child ever accepted.
TEST(Activation, StartWithListenersPassesThem) {
  const std::string self = self_exe();
  ASSERT_FALSE(self.empty());
  goro::run([&] {
    const int fd = raw_listener();
    goro::Result<net::Listener> ln = net::listener_from_fd(fd);
    ASSERT_TRUE(ln);
    goro::Result<net::Conn> early = net::dial("tcp", "127.0.0.1:" + std::to_string(ln->addr().port()));
    ASSERT_TRUE(early);
    goro::Result<net::NotifySocket> ready = net::NotifySocket::open();
    ASSERT_TRUE(ready);
    const net::PassedListener passed[] = {{"web", ln->fd()}};
    goro::Result<int> pid = net::start_with_listeners(
        self, {self, "--gtest_filter=Activation.Child"}, passed,
        {"GORO_NET_ACTIVATION_CHILD=1", "NOTIFY_SOCKET=" + ready->name()});
    ASSERT_TRUE(pid) << pid.error().message();
    goro::Result<std::string> said = ready->receive(net::deadline_after(30s));
    ASSERT_TRUE(said) << said.error().message();
    EXPECT_EQ(*said, "READY=1");
    (void)ln->close();  // the child holds its own descriptor of the socket
    char buf[64];
    std::string answer;
    for (;;) {
      goro::Result<std::size_t> n = early->read(buf, sizeof buf);
      if (!n || *n == 0) break;
      answer.append(buf, *n);
    }
    EXPECT_EQ(answer, "served by web");
    int status = 0;
    goro::blocking([&] { ::waitpid(*pid, &status, 0); });
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  });
}

TEST(Activation, StartWithListenersReportsABadProgram) {
  goro::run([] {
    goro::Result<int> pid = net::start_with_listeners("/nonexistent/program", {"x"}, {});
    ASSERT_TRUE(pid);  // the fork succeeded; the exec fails in the child
    int status = 0;
    goro::blocking([&] { ::waitpid(*pid, &status, 0); });
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 127);
    EXPECT_EQ(net::start_with_listeners("/bin/true", {}, {}).error(), std::errc::invalid_argument);
  });
}
