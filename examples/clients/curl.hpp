// curl.hpp — libcurl transfers from goroutines: one multi handle driven by the
// "socket" interface (curl_multi_socket_action), its sockets watched with
// goro::net::FdWatch.
//
//   curl::Multi multi;                       // on a goroutine; shared by many
//   CURL* easy = curl_easy_init();
//   curl_easy_setopt(easy, CURLOPT_URL, "http://127.0.0.1:8080/slow");
//   CURLcode rc = multi.perform(easy, ctx);  // parks this goroutine until done
//
// libcurl tells the application which sockets to watch for what
// (CURLMOPT_SOCKETFUNCTION: in, out, both, or remove) and when to call it back anyway
// (CURLMOPT_TIMERFUNCTION), and is then called with curl_multi_socket_action for each
// readiness. Here:
//  - one driver goroutine owns the multi handle and makes every call into it (a multi
//    handle is not thread-safe); transfers, readiness and cancellations reach it over
//    channels, and curl's timer is the timeout of its select;
//  - each socket gets two waiter goroutines, one per direction, because one goroutine
//    waits for one direction at a time and curl may want both. A waiter waits when the
//    driver says curl wants that direction, reports the readiness, and waits for the
//    next go; so a socket curl has not read yet is not reported twice (the watch is
//    level-triggered: curl reads at most a buffer per call);
//  - CURL_POLL_REMOVE, which curl sends before it closes a socket, releases the watch.
// perform() may be called by any number of goroutines at once; connections are kept
// and reused between transfers, as curl_multi does. A context's cancellation removes
// the transfer at once (CURLE_ABORTED_BY_CALLBACK). CURLOPT_NOSIGNAL is set on every
// transfer: signals and threads do not mix. Call curl_global_init once at start-up.
// Header-only: include it and link libcurl and goro::net.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <variant>

#include <goro/net/wait_fd.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

namespace curl {

class Multi {
 public:
  // Starts the driver goroutine. Call on a goroutine.
  Multi() : multi_(curl_multi_init()) {
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    goroutines_.add(1);
    goro::go([this] {
      drive();
      goroutines_.done();
    });
  }
  Multi(const Multi&) = delete;
  Multi& operator=(const Multi&) = delete;

  // Ends the transfers still running (their perform() returns
  // CURLE_ABORTED_BY_CALLBACK) and the goroutines, and closes the connections. Call on
  // a goroutine.
  ~Multi() {
    quit_.close();
    goroutines_.wait();
    curl_multi_cleanup(multi_);
  }

  // Runs the transfer set up on easy to its end, parking the calling goroutine, and
  // returns its result; CURLE_ABORTED_BY_CALLBACK when ctx was cancelled first.
  CURLcode perform(CURL* easy, const goro::Context& ctx = goro::background()) {
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    Transfer t{easy, goro::Chan<CURLcode>(1)};
    submit_.send(&t);
    std::optional<CURLcode> code;
    if (goro::select(goro::recv_case(t.done, code), goro::recv_case(ctx.done())) == 0) {
      return *code;
    }
    cancel_.send(&t);
    // Aborted, or its result if it ended just before the cancel reached the driver.
    return t.done.recv().value_or(CURLE_ABORTED_BY_CALLBACK);
  }

 private:
  enum Direction { in = 0, out = 1 };

  struct Transfer {
    CURL* easy;
    goro::Chan<CURLcode> done;  // the driver sends the result, once
  };

  // A socket curl asked to watch. want, idle and removed are the driver's alone; the
  // waiters use watch (safe beside release) and their go channel.
  struct Socket {
    Socket(curl_socket_t fd, goro::net::FdWatch w) : fd(fd), watch(std::move(w)) {}
    const curl_socket_t fd;
    goro::net::FdWatch watch;
    int want = 0;                 // CURL_POLL_IN and CURL_POLL_OUT bits
    bool idle[2] = {true, true};  // the direction's waiter waits for a go
    bool removed = false;         // CURL_POLL_REMOVE came
    goro::Chan<bool> go[2] = {goro::Chan<bool>(1), goro::Chan<bool>(1)};
  };

  struct Event {
    std::shared_ptr<Socket> socket;
    Direction direction;
    std::error_code error;
  };

  void drive() {
    for (;;) {
      std::optional<Transfer*> submitted, cancelled;
      std::optional<Event> event;
      const std::chrono::nanoseconds until_timer =
          timer_ ? *timer_ - std::chrono::steady_clock::now() : std::chrono::hours(1);
      switch (goro::select(goro::recv_case(submit_, submitted), goro::recv_case(cancel_, cancelled),
                           goro::recv_case(events_, event), goro::recv_case(quit_),
                           goro::timeout_case(until_timer))) {
        case 0: add(*submitted); break;
        case 1: cancel(*cancelled); break;
        case 2: ready(*event); break;
        case 3: shut_down(); return;
        case goro::select_timeout:
          timer_.reset();
          action(CURL_SOCKET_TIMEOUT, 0);
          break;
      }
      collect_finished();
    }
  }

  void add(Transfer* t) {
    transfers_[t->easy] = t;
    if (curl_multi_add_handle(multi_, t->easy) != CURLM_OK) {
      transfers_.erase(t->easy);
      t->done.send(CURLE_FAILED_INIT);
    }
  }

  void cancel(Transfer* t) {
    if (transfers_.erase(t->easy) == 0) return;  // finished; its result is sent
    curl_multi_remove_handle(multi_, t->easy);
    t->done.send(CURLE_ABORTED_BY_CALLBACK);
  }

  void ready(const Event& e) {
    Socket& s = *e.socket;
    s.idle[e.direction] = true;
    if (s.removed) return;  // a readiness of a socket curl has given up
    int mask = e.direction == in ? CURL_CSELECT_IN : CURL_CSELECT_OUT;
    if (e.error) mask = CURL_CSELECT_ERR;
    action(s.fd, mask);
    resume(s);
  }

  void action(curl_socket_t fd, int mask) {
    int running = 0;
    curl_multi_socket_action(multi_, fd, mask, &running);
  }

  void collect_finished() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* easy = msg->easy_handle;
      const CURLcode result = msg->data.result;  // msg is gone after remove_handle
      auto it = transfers_.find(easy);
      if (it == transfers_.end()) continue;
      Transfer* t = it->second;
      transfers_.erase(it);
      curl_multi_remove_handle(multi_, easy);
      t->done.send(result);
    }
  }

  // Tells the idle waiters of the directions curl wants to wait.
  void resume(Socket& s) {
    if (s.removed) return;  // curl gave it up during the call that just returned
    for (Direction d : {in, out}) {
      const int bit = d == in ? CURL_POLL_IN : CURL_POLL_OUT;
      if ((s.want & bit) != 0 && s.idle[d]) {
        s.idle[d] = false;
        s.go[d].send(true);  // never blocks: one go at most is pending
      }
    }
  }

  // CURLMOPT_SOCKETFUNCTION, called by curl from inside the driver's calls.
  static int on_socket(CURL*, curl_socket_t fd, int what, void* userp, void*) {
    return static_cast<Multi*>(userp)->socket_changed(fd, what);
  }

  int socket_changed(curl_socket_t fd, int what) {
    if (what == CURL_POLL_REMOVE) {
      forget(fd);
      return 0;
    }
    std::shared_ptr<Socket>& s = sockets_[fd];
    if (!s) {
      auto watch = goro::net::FdWatch::open(fd);
      if (!watch) {
        sockets_.erase(fd);
        return -1;  // curl fails the transfer
      }
      s = std::make_shared<Socket>(fd, std::move(*watch));
      for (Direction d : {in, out}) {
        goroutines_.add(1);
        goro::go([this, socket = s, d] {
          wait_for_curl(socket, d);
          goroutines_.done();
        });
      }
    }
    s->want = what;
    resume(*s);
    return 0;
  }

  // Before curl closes the socket: unregister it, end its waiters.
  void forget(curl_socket_t fd) {
    auto it = sockets_.find(fd);
    if (it == sockets_.end()) return;
    std::shared_ptr<Socket> s = std::move(it->second);
    sockets_.erase(it);
    s->removed = true;
    s->watch.release();  // a parked waiter returns errc::closed
    s->go[in].close();
    s->go[out].close();
  }

  // A waiter: on each go, waits until the socket is ready for d and tells the driver.
  void wait_for_curl(const std::shared_ptr<Socket>& s, Direction d) {
    const auto interest = d == in ? goro::net::Interest::read : goro::net::Interest::write;
    for (;;) {
      std::optional<bool> go;
      if (goro::select(goro::recv_case(s->go[d], go), goro::recv_case(quit_)) != 0 || !go) return;
      Event e{s, d, s->watch.wait(interest)};
      if (goro::select(goro::send_case(events_, std::move(e)), goro::recv_case(quit_)) != 0) return;
    }
  }

  // CURLMOPT_TIMERFUNCTION: curl wants a call after timeout_ms (-1: no timer).
  static int on_timer(CURLM*, long timeout_ms, void* userp) {
    auto* m = static_cast<Multi*>(userp);
    if (timeout_ms < 0) {
      m->timer_.reset();
    } else {
      m->timer_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    return 0;
  }

  void shut_down() {
    for (auto& [easy, t] : transfers_) {
      curl_multi_remove_handle(multi_, easy);
      t->done.send(CURLE_ABORTED_BY_CALLBACK);
    }
    transfers_.clear();
    while (!sockets_.empty()) forget(sockets_.begin()->first);
  }

  CURLM* const multi_;
  // The driver's alone.
  std::map<curl_socket_t, std::shared_ptr<Socket>> sockets_;
  std::map<CURL*, Transfer*> transfers_;
  std::optional<std::chrono::steady_clock::time_point> timer_;
  goro::Chan<Transfer*> submit_;
  goro::Chan<Transfer*> cancel_;
  goro::Chan<Event> events_;
  goro::Chan<std::monostate> quit_;  // closed by the destructor
  goro::WaitGroup goroutines_;       // the driver and the waiters
};

}  // namespace curl
