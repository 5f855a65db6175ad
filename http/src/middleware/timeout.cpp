// http::timeout, written against the public API only, as Go's TimeoutHandler is: the
// handler writes to a writer of this file's (HeldWriter) that keeps its whole response in
// memory, reads the body through a guard (GuardedBody), and runs under a context with the
// limit as its deadline, in a goroutine of its own. What it needs of the server's writer
// it asks through ResponseController: a read deadline in the past to wake a body read,
// and the response completed early.
#include <goro/http/middleware.hpp>

#include <atomic>
#include <exception>
#include <mutex>
#include <string>

#include <goro/http/errors.hpp>
#include <goro/http/response_controller.hpp>
#include <goro/http/status.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "access.hpp"

namespace goro::http {
namespace {

// Stands between the timed handler and the request body: once the time is up, the
// handler can no longer reach it. mu is held across each read, so the goroutine that
// cuts it off, taking mu after waking the read, knows no read is running.
class GuardedBody final : public BodyReader {
 public:
  explicit GuardedBody(BodyReader* real) : real_(real) {}

  Result<std::size_t> read(void* buf, std::size_t len) override {
    std::lock_guard lock(mu_);
    if (cut_off_) return make_error_code(net::errc::timeout);
    if (real_ == nullptr) return std::size_t{0};
    return real_->read(buf, len);
  }
  BodyReader* real() const noexcept { return real_; }

  // The time is up: wakes a read waiting for the client (through the writer below,
  // which owns the connection's deadlines), then closes the door.
  void cut_off(ResponseWriter& w) {
    ResponseController(w).set_read_deadline(net::Deadline(std::chrono::nanoseconds(1)));
    std::lock_guard lock(mu_);
    cut_off_ = true;
  }

 private:
  BodyReader* real_;
  goro::Mutex mu_;
  bool cut_off_ = false;  // guarded by mu_
};

// The timed handler's writer: the whole response in memory, sent by the connection's
// goroutine if the handler finishes in time. A write once the time is up is refused; it
// asks the context itself, which is cancelled before anything can wake the handler, so
// no write made after the handler could learn of the deadline gets through. It wraps
// nothing (no unwrap): the connection's powers are not the timed handler's.
class HeldWriter final : public ResponseWriter {
 public:
  explicit HeldWriter(const Context& ctx) : ctx_(ctx) {}

  using ResponseWriter::write;
  Headers& header() override { return headers_; }
  void set_status(int code) override { status_ = code; }
  int status() const override { return status_; }
  std::error_code write(std::string_view data) override {
    if (std::error_code ec = still_wanted()) return ec;
    body_.append(data);
    return {};
  }
  std::error_code flush() override { return still_wanted(); }
  bool headers_sent() const override { return false; }
  std::uint64_t bytes_written() const override { return body_.size(); }

  void cut_off() { cut_off_.store(true, std::memory_order_release); }
  // Whether a write was refused: the held response is not what the handler meant.
  bool refused() const { return refused_.load(std::memory_order_acquire); }
  // Copies what the handler made to w.
  void replay(ResponseWriter& w) const {
    w.set_status(status_);
    for (HeaderField f : headers_) w.header().add(f.name, f.value);
    w.write(body_);
  }

 private:
  std::error_code still_wanted() {
    if (!cut_off_.load(std::memory_order_acquire) &&
        ctx_.err() != context_errc::deadline_exceeded)
      return {};
    refused_.store(true, std::memory_order_release);
    return make_error_code(errc::handler_timeout);
  }

  const Context& ctx_;
  Headers headers_;
  std::string body_;
  int status_ = status::ok;
  std::atomic<bool> cut_off_{false};
  std::atomic<bool> refused_{false};
};

}  // namespace

Middleware timeout(std::chrono::nanoseconds limit, std::string_view message) {
  return [limit, message = std::string(message)](Handler next) -> Handler {
    return [limit, message, next = std::move(next)](Request& req, ResponseWriter& w) {
      const Context outer = req.context();
      auto [ctx, cancel] = goro::with_timeout(outer, limit);
      req.set_context(ctx);
      GuardedBody guard(req.body_reader());
      req.set_body_reader(&guard);
      HeldWriter held(ctx);
      goro::Chan<int> done;
      std::exception_ptr failure;
      goro::go([&] {
        try {
          next(req, held);
        } catch (...) {
          failure = std::current_exception();
        }
        done.close();
      });
      // The context's deadline is the limit; it also ends early when the client goes.
      if (goro::select(goro::recv_case(done), goro::recv_case(ctx.done())) == 0 &&
          !held.refused()) {
        req.set_body_reader(guard.real());
        req.set_context(outer);
        cancel();
        if (failure) std::rethrow_exception(failure);
        held.replay(w);
        return;
      }
      held.cut_off();
      guard.cut_off(w);
      cancel();  // the client went (the parent was cancelled): say so to the handler too
      // The client has its answer now, and the connection ends after it.
      w.header().set("Connection", "close");
      (void)detail::send_builtin_error(req, w, status::service_unavailable, message,
                                       "handler timeout", "timeout");
      ResponseController(w).finish_response();
      done.recv();  // the handler still uses req, whose data the connection owns
      req.set_body_reader(guard.real());
      req.set_context(outer);
    };
  };
}

}  // namespace goro::http
