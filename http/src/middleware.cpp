#include <goro/http/middleware.hpp>

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <goro/http/errors.hpp>
#include <goro/http/status.hpp>
#include <goro/net/errors.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>

#include "access.hpp"

namespace goro::http {
namespace {

void write_line(const LogSink& sink, std::string_view line) {
  if (sink) {
    sink(line);
    return;
  }
  goro::blocking([&] {
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fputc('\n', stderr);
  });
}

// Logs the exception and answers 500 in place of what the handler had buffered.
void recovered(const LogSink& sink, Request& req, ResponseWriter& w, const char* what) {
  std::string line = "recovered from exception in handler for ";
  line.append(req.method());
  line.push_back(' ');
  line.append(req.target());
  line.append(": ");
  line.append(what);
  write_line(sink, line);
  detail::ResponseAccess::discard(w);
  w.text("500 Internal Server Error\n", status::internal_server_error);
}

}  // namespace

Handler chain(Handler handler, std::initializer_list<Middleware> middlewares) {
  std::vector<Middleware> list(middlewares);
  for (auto it = list.rbegin(); it != list.rend(); ++it) handler = (*it)(std::move(handler));
  return handler;
}

Middleware access_log(LogSink sink) {
  return [sink](Handler next) -> Handler {
    return [sink, next = std::move(next)](Request& req, ResponseWriter& w) {
      auto start = std::chrono::steady_clock::now();
      next(req, w);
      auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
      char tail[96];
      std::snprintf(tail, sizeof tail, "\" %d %llu %lld.%03lldms", w.status(),
                    static_cast<unsigned long long>(w.bytes_written()),
                    static_cast<long long>(micros / 1000), static_cast<long long>(micros % 1000));
      std::string line;
      line.reserve(64 + req.target().size());
      line.append(req.remote_addr());
      line.append(" \"");
      line.append(req.method());
      line.push_back(' ');
      line.append(req.target());
      line.append(req.version_minor() == 0 ? " HTTP/1.0" : " HTTP/1.1");
      line.append(tail);
      write_line(sink, line);
    };
  };
}

Middleware recover(LogSink sink) {
  return [sink](Handler next) -> Handler {
    return [sink, next = std::move(next)](Request& req, ResponseWriter& w) {
      try {
        next(req, w);
      } catch (const std::exception& e) {
        if (w.headers_sent()) throw;
        recovered(sink, req, w, e.what());
      } catch (...) {
        if (w.headers_sent()) throw;
        recovered(sink, req, w, "an exception that is not a std::exception");
      }
    };
  };
}

namespace {

// Stands between a timed handler and the connection: once the time is up, the handler
// can no longer reach the connection. mu is held across each read, so the connection
// goroutine, taking mu after interrupting reads, knows no read is running.
class GuardedSource final : public detail::BodySource {
 public:
  explicit GuardedSource(detail::BodySource* real) : real_(real) {}

  Result<std::size_t> read_body(void* buf, std::size_t len) override {
    std::lock_guard lock(mu_);
    if (cut_off_ || real_ == nullptr) return make_error_code(net::errc::timeout);
    return real_->read_body(buf, len);
  }
  bool client_gone() override {
    std::lock_guard lock(mu_);
    return !cut_off_ && real_ != nullptr && real_->client_gone();
  }
  void interrupt_reads() override {}
  Context request_context() override {
    // Not reached in practice: the timeout middleware sets the request's context first.
    std::lock_guard lock(mu_);
    return real_ != nullptr ? real_->request_context() : Context();
  }
  detail::BodySource* real_source() const { return real_; }

  // Called by the connection goroutine when the time is up.
  void cut_off() {
    if (real_ != nullptr) real_->interrupt_reads();
    std::lock_guard lock(mu_);
    cut_off_ = true;
  }

 private:
  detail::BodySource* real_;
  goro::Mutex mu_;
  bool cut_off_ = false;  // guarded by mu_
};

// The sink of the held response: takes nothing (the response is replayed onto the
// connection's writer), and refuses writes once the handler's deadline has passed. It
// asks the context itself, which is cancelled before anything can wake the handler, so
// no write made after the handler could learn of the deadline gets through.
class TimedSink final : public detail::ResponseSink {
 public:
  explicit TimedSink(const Context& ctx) : ctx_(ctx) {}
  std::error_code write_out(const iovec*, int) override {
    if (!cut_off_.load(std::memory_order_acquire) &&
        ctx_.err() != context_errc::deadline_exceeded)
      return {};
    refused_.store(true, std::memory_order_release);
    return make_error_code(errc::handler_timeout);
  }
  bool reusable() override { return true; }
  void cut_off() { cut_off_.store(true, std::memory_order_release); }
  // Whether a write was refused: the held response is not what the handler meant.
  bool refused() const { return refused_.load(std::memory_order_acquire); }

 private:
  const Context& ctx_;
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
      GuardedSource guard(detail::RequestAccess::swap_source(req, nullptr));
      detail::RequestAccess::swap_source(req, &guard);
      TimedSink sink(ctx);
      ResponseWriter held;
      detail::ResponseAccess::begin(held, &sink, req.version_minor(), false, true, 0);
      detail::ResponseAccess::hold(held);
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
          !sink.refused()) {
        detail::RequestAccess::swap_source(req, guard.real_source());
        req.set_context(outer);
        cancel();
        if (failure) std::rethrow_exception(failure);
        detail::ResponseAccess::replay(held, w);
        return;
      }
      sink.cut_off();
      guard.cut_off();
      cancel();  // the client went (the parent was cancelled): say so to the handler too
      detail::ResponseAccess::set_keep_alive(w, false);
      w.text(message, status::service_unavailable);
      detail::ResponseAccess::finish(w);
      done.recv();  // the handler still uses req, whose data the connection owns
      detail::RequestAccess::swap_source(req, guard.real_source());
      req.set_context(outer);
    };
  };
}

}  // namespace goro::http
