// Echo server on standalone Asio with C++20 coroutines: one io_context per thread, each
// with its own SO_REUSEPORT acceptor (the kernel spreads connections over them), one
// coroutine per connection. TCP_NODELAY as goro and Go set it.
//   bench_net_echo_asio [address] [threads]   (default 127.0.0.1:9000, ASIO_THREADS or 1)
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using asio::ip::tcp;

namespace {

asio::awaitable<void> echo(tcp::socket socket) {
  char buf[4096];
  try {
    for (;;) {
      std::size_t n = co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(buf, n), asio::use_awaitable);
    }
  } catch (const std::exception&) {
    // the peer went away
  }
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    socket.set_option(tcp::no_delay(true));
    asio::co_spawn(acceptor.get_executor(), echo(std::move(socket)), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = argc > 1 ? argv[1] : "127.0.0.1:9000";
  const char* env_threads = std::getenv("ASIO_THREADS");
  int threads = argc > 2 ? std::atoi(argv[2]) : (env_threads ? std::atoi(env_threads) : 1);
  if (threads < 1) threads = 1;
  auto colon = address.rfind(':');
  tcp::endpoint endpoint(asio::ip::make_address(address.substr(0, colon)),
                         static_cast<unsigned short>(std::atoi(address.c_str() + colon + 1)));
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  for (int i = 0; i < threads; ++i) {
    contexts.push_back(std::make_unique<asio::io_context>(1));
    auto acceptor = std::make_unique<tcp::acceptor>(*contexts.back());
    acceptor->open(endpoint.protocol());
    acceptor->set_option(tcp::acceptor::reuse_address(true));
    int one = 1;
    ::setsockopt(acceptor->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    acceptor->bind(endpoint);
    acceptor->listen(4096);
    asio::co_spawn(*contexts.back(), accept_loop(*acceptor), asio::detached);
    acceptors.push_back(std::move(acceptor));
  }
  std::fprintf(stderr, "asio echo on %s with %d threads\n", address.c_str(), threads);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&, i] { contexts[i]->run(); });
  contexts[0]->run();
  for (auto& t : pool) t.join();
}
