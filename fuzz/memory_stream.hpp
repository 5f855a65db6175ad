// A net::Stream over bytes in memory, for the targets that run the real server code on
// one connection: reads return the input in pieces of the given sizes (cycling through
// them), then end of stream; writes are appended to an output string. Nothing waits,
// so no input can make a target spend time in a timeout: deadlines are accepted and
// ignored, and the peer is never seen leaving (as with httptest::record). A target may
// ask to be called before each read (set_before_read), to let the server's other
// goroutines run before the next bytes or the end of stream arrive (http2_server).
//
// Reads and writes come from one goroutine at a time (the connection's); where another
// goroutine looks at the output meanwhile, set_output_lock names the mutex that guards it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <goro/net/errors.hpp>
#include <goro/net/stream.hpp>

namespace goro::fuzz {

class MemoryStream final : public net::Stream {
 public:
  // steps: the size of each read, in turn (never empty; 0 is taken as 1). output must
  // outlive the stream.
  MemoryStream(std::string_view input, std::vector<std::size_t> steps, std::string& output)
      : input_(input), steps_(std::move(steps)), output_(output) {}

  // Writes append to the output under mu (held only for the append).
  void set_output_lock(std::mutex* mu) { output_mu_ = mu; }

  // fn(input_left) runs at the start of every read, on the reading goroutine.
  void set_before_read(std::function<void(bool input_left)> fn) { before_read_ = std::move(fn); }

  Result<std::size_t> read(void* buf, std::size_t len) override {
    if (closed_) return net::errc::closed;
    if (before_read_) before_read_(!input_.empty());
    std::size_t step = std::max<std::size_t>(1, steps_[next_step_++ % steps_.size()]);
    std::size_t n = std::min({len, step, input_.size()});
    std::copy_n(input_.data(), n, static_cast<char*>(buf));
    input_.remove_prefix(n);
    return n;
  }
  Result<std::size_t> write(const void* buf, std::size_t len) override {
    iovec iov{const_cast<void*>(buf), len};
    return writev(&iov, 1);
  }
  Result<std::size_t> writev(const iovec* iov, int count) override {
    if (closed_) return net::errc::closed;
    if (write_shut_) return std::errc::broken_pipe;
    std::unique_lock<std::mutex> lock;
    if (output_mu_ != nullptr) lock = std::unique_lock(*output_mu_);
    std::size_t total = 0;
    for (int i = 0; i < count; ++i) {
      output_.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
      total += iov[i].iov_len;
    }
    return total;
  }
  std::error_code close() override {
    if (closed_) return net::errc::closed;
    closed_ = true;
    return {};
  }
  std::error_code shutdown_write() override {
    if (closed_) return net::errc::closed;
    write_shut_ = true;
    return {};
  }
  bool peer_closed() const override { return false; }
  std::error_code set_read_deadline(net::Deadline) override { return {}; }
  std::error_code set_write_deadline(net::Deadline) override { return {}; }
  std::error_code set_deadline(net::Deadline) override { return {}; }
  net::Addr remote_addr() const override { return {}; }
  net::Addr local_addr() const override { return {}; }

 private:
  std::string_view input_;
  std::vector<std::size_t> steps_;
  std::size_t next_step_ = 0;
  std::string& output_;
  std::function<void(bool)> before_read_;
  std::mutex* output_mu_ = nullptr;
  bool closed_ = false;
  bool write_shut_ = false;
};

}  // namespace goro::fuzz
