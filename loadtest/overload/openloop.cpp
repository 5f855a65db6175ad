// overload_openloop: an open-loop HTTP/1.1 load generator for the overload benchmark
// (loadtest/overload/run.sh). Plain C++ and one epoll thread, no goro.
//
//   overload_openloop --url http://127.0.0.1:8080/cpu?ms=1 --rate 10000 [--conns 1000]
//                     [--duration 8] [--warmup 2] [--timeout 2] [--rss-pids P,Q] [--json]
//
// Why not wrk: wrk is closed loop (a connection sends its next request when the last one
// is answered), so a slow server slows the load down and never sees the demand; and it
// gives one latency distribution for every status, where overload needs the served and
// the shed apart.
//
// The schedule: request i is due at start + i / rate, whatever the server does. It goes
// out on a free keep-alive connection (one request at a time on each: no pipelining);
// when none is free it waits, in order, for the first one to become free. Its latency
// runs from its due time to the end of its response, so the time it waited for a
// connection counts (coordinated omission is not hidden). A request not answered within
// --timeout of its due time is a timeout: if it was sent, its connection is closed and
// opened again; if it was still waiting for a connection, it is dropped unsent.
//
// Requests due in the first --warmup seconds are sent but not counted. The counters and
// the latencies are of the requests due in the next --duration seconds; after the last
// one is due the generator waits for the answers (at most --timeout).
//
// Output: one line of key=value on stdout (--json: one JSON object instead):
//   due              requests due in the counted window
//   sent             of them, written to a connection
//   unsent           dropped: no connection came free within --timeout of the due time
//   answered_2xx, answered_503, answered_429, answered_other   by status
//   timeouts         sent and not answered within --timeout of the due time
//   errors_connect, errors_read, errors_write, errors_reset, errors_closed (the server
//                    closed the connection before the whole response), errors_parse
//                    (not an HTTP/1.1 response); a request lost to one counts in it
//   goodput          2xx answers per second of the counted window
//   ok_{p50,p90,p99,p999,max}_ms     latency of the 2xx answers, from the due time
//   shed_{p50,p90,p99,p999,max}_ms   latency of the 503 and 429 answers
//   send_lag_p99_ms, send_lag_max_ms from due time to write: waiting for a connection,
//                    or the generator falling behind
//   queue_max        most requests due at once and waiting for a free connection
//   conns_open       connections open when the schedule started; reconnects
//   peak_rss_kib     with --rss-pids: the highest sum of the VmRSS of those processes,
//                    read every 200 ms while the schedule runs (0 without). Read here, in
//                    the generator's loop, rather than by a script that forks readers:
//                    the forks would take turns on the cores being measured.
// Percentiles come from a log-linear histogram with 256 steps per power of two (within
// 0.4%); the maxima are exact. RLIMIT_NOFILE is raised to fit --conns.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "histogram.hpp"
#include "options.hpp"

namespace {

using openloop::Histogram;
using openloop::Nanos;

Nanos now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

using openloop::fail;
using openloop::Options;
using openloop::parse_options;

void raise_nofile(std::size_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur >= needed) return;
  if (limit.rlim_max < needed) limit.rlim_max = needed;  // with CAP_SYS_RESOURCE only
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < needed) {
    fail("RLIMIT_NOFILE is " + std::to_string(limit.rlim_cur) + ", " +
         std::to_string(needed) + " needed (ulimit -n)");
  }
}

// Where a response parse stands.
enum class Phase { head, length_body, chunk_size, chunk_data, chunk_end, trailers, until_close };
enum class Parsed { more, done, bad };

enum class State { down, connecting, idle, busy };

struct Connection {
  int fd = -1;
  State state = State::down;
  bool in_free_list = false;
  std::uint32_t generation = 0;  // of fd: an event for a closed one is stale
  Nanos deadline = 0;  // connecting: of the connect; busy: of the request
  Nanos retry_at = 0;  // down: when to connect again

  // The request in flight (busy).
  std::uint64_t request = 0;
  Nanos due = 0;
  std::size_t written = 0;

  // The response being read.
  std::string in;
  std::size_t pos = 0;
  Phase phase = Phase::head;
  int status = 0;
  bool close_after = false;
  std::uint64_t remaining = 0;
};

bool header_is(std::string_view line, std::string_view name) {
  return line.size() > name.size() && line[name.size()] == ':' &&
         ::strncasecmp(line.data(), name.data(), name.size()) == 0;
}

std::string_view header_value(std::string_view line) {
  std::string_view v = line.substr(line.find(':') + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool contains_token(std::string_view value, std::string_view token) {
  for (std::size_t i = 0; i + token.size() <= value.size(); ++i) {
    if (::strncasecmp(value.data() + i, token.data(), token.size()) == 0) return true;
  }
  return false;
}

// Reads as much of one response from c.in as is there.
Parsed parse_response(Connection& c) {
  constexpr std::size_t max_head = 64 * 1024;
  for (;;) {
    switch (c.phase) {
      case Phase::head: {
        const std::size_t end = c.in.find("\r\n\r\n", c.pos);
        if (end == std::string::npos) return c.in.size() - c.pos > max_head ? Parsed::bad : Parsed::more;
        std::string_view head(c.in.data() + c.pos, end - c.pos);
        c.pos = end + 4;
        // "HTTP/1.x SSS reason"
        if (head.size() < 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ') return Parsed::bad;
        c.status = 0;
        for (std::size_t i = 9; i < 12; ++i) {
          if (head[i] < '0' || head[i] > '9') return Parsed::bad;
          c.status = c.status * 10 + (head[i] - '0');
        }
        c.close_after = head[7] == '0';
        bool chunked = false, have_length = false;
        std::uint64_t length = 0;
        for (std::size_t at = head.find("\r\n"); at != std::string_view::npos;) {
          const std::size_t next = head.find("\r\n", at + 2);
          const std::string_view line = head.substr(at + 2, next == std::string_view::npos ? next : next - at - 2);
          at = next;
          if (header_is(line, "content-length")) {
            const std::string_view v = header_value(line);
            if (v.empty() || v.size() > 18) return Parsed::bad;
            length = 0;
            for (char ch : v) {
              if (ch < '0' || ch > '9') return Parsed::bad;
              length = length * 10 + static_cast<std::uint64_t>(ch - '0');
            }
            have_length = true;
          } else if (header_is(line, "transfer-encoding")) {
            chunked = contains_token(header_value(line), "chunked");
          } else if (header_is(line, "connection")) {
            const std::string_view v = header_value(line);
            if (contains_token(v, "close")) c.close_after = true;
            if (contains_token(v, "keep-alive")) c.close_after = false;
          }
        }
        if (c.status >= 100 && c.status < 200 && c.status != 101) continue;  // interim
        if (c.status == 204 || c.status == 304 || c.status == 101) return Parsed::done;
        if (chunked) {
          c.phase = Phase::chunk_size;
        } else if (have_length) {
          c.remaining = length;
          c.phase = Phase::length_body;
        } else {
          c.close_after = true;
          c.phase = Phase::until_close;
        }
        break;
      }
      case Phase::length_body: {
        const std::uint64_t take = std::min<std::uint64_t>(c.remaining, c.in.size() - c.pos);
        c.pos += take;
        c.remaining -= take;
        return c.remaining == 0 ? Parsed::done : Parsed::more;
      }
      case Phase::chunk_size: {
        const std::size_t eol = c.in.find("\r\n", c.pos);
        if (eol == std::string::npos) return c.in.size() - c.pos > 1024 ? Parsed::bad : Parsed::more;
        std::uint64_t size = 0;
        std::size_t i = c.pos;
        for (; i < eol && std::isxdigit(static_cast<unsigned char>(c.in[i])); ++i) {
          if (size >> 56) return Parsed::bad;
          const char ch = c.in[i];
          size = size * 16 + static_cast<std::uint64_t>(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
        }
        if (i == c.pos) return Parsed::bad;
        c.pos = eol + 2;
        c.remaining = size;
        c.phase = size == 0 ? Phase::trailers : Phase::chunk_data;
        break;
      }
      case Phase::chunk_data: {
        const std::uint64_t take = std::min<std::uint64_t>(c.remaining, c.in.size() - c.pos);
        c.pos += take;
        c.remaining -= take;
        if (c.remaining > 0) return Parsed::more;
        c.phase = Phase::chunk_end;
        break;
      }
      case Phase::chunk_end:
        if (c.in.size() - c.pos < 2) return Parsed::more;
        if (c.in.compare(c.pos, 2, "\r\n") != 0) return Parsed::bad;
        c.pos += 2;
        c.phase = Phase::chunk_size;
        break;
      case Phase::trailers: {
        const std::size_t eol = c.in.find("\r\n", c.pos);
        if (eol == std::string::npos) return c.in.size() - c.pos > max_head ? Parsed::bad : Parsed::more;
        const bool last = eol == c.pos;
        c.pos = eol + 2;
        if (last) return Parsed::done;
        break;
      }
      case Phase::until_close:
        c.pos = c.in.size();
        return Parsed::more;
    }
  }
}

struct Counters {
  std::uint64_t sent = 0, unsent = 0, queue_max = 0;
  std::uint64_t ok = 0, status_503 = 0, status_429 = 0, other = 0, timeouts = 0;
  std::uint64_t errors_connect = 0, errors_read = 0, errors_write = 0, errors_reset = 0;
  std::uint64_t errors_closed = 0, errors_parse = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t peak_rss_kib = 0;
  Histogram ok_latency, shed_latency, send_lag;
};

class Generator {
 public:
  explicit Generator(const Options& o) : o_(o), conns_(o.conns) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &found); rc != 0) {
      fail("cannot resolve " + o.host + ":" + o.port + ": " + ::gai_strerror(rc));
    }
    std::memcpy(&address_, found->ai_addr, found->ai_addrlen);
    address_len_ = found->ai_addrlen;
    family_ = found->ai_family;
    ::freeaddrinfo(found);
    request_ = "GET " + o.path + " HTTP/1.1\r\nHost: " + o.host + ":" + o.port +
               "\r\nUser-Agent: overload_openloop\r\n\r\n";
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epoll_ < 0 || timer_ < 0) fail(std::string("epoll/timerfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = timer_tag;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, timer_, &ev);
    interval_ = 1e9 / o.rate;
    total_ = static_cast<std::uint64_t>(std::llround((o.warmup + o.duration) * o.rate));
    first_counted_ = static_cast<std::uint64_t>(std::llround(o.warmup * o.rate));
    timeout_ = static_cast<Nanos>(o.timeout * 1e9);
  }

  void run() {
    // Every connection open before the first request is due, so that the connect
    // storm is not measured as latency.
    Nanos t = now_ns();
    for (std::size_t i = 0; i < conns_.size(); ++i) open(i, t);
    const Nanos connect_until = t + std::max<Nanos>(timeout_, 5'000'000'000);
    auto idle = [this] {
      return static_cast<std::size_t>(std::count_if(
          conns_.begin(), conns_.end(), [](const Connection& c) { return c.state == State::idle; }));
    };
    while (idle() < conns_.size() && t < connect_until) {
      wait(t + 10'000'000);
      t = now_ns();
      sweep(t);
    }
    conns_open_ = idle();
    counters_ = Counters{};  // connect errors before the start are not the server's load
    start_ = now_ns() + 1'000'000;
    Nanos next_sweep = start_;
    Nanos next_rss = start_;
    for (;;) {
      const Nanos now = now_ns();
      if (!o_.rss_pids.empty() && now >= next_rss) {
        counters_.peak_rss_kib = std::max(counters_.peak_rss_kib, rss_kib());
        next_rss = now + 200'000'000;
      }
      const std::uint64_t due_now = std::min(total_, due_count(now));
      while (next_ < due_now && due_at(next_) + timeout_ <= now) {
        if (counted(next_)) ++counters_.unsent;
        ++next_;
      }
      while (next_ < due_now) {
        const int id = take_free();
        if (id < 0) break;
        send(static_cast<std::size_t>(id), next_, now);
        ++next_;
      }
      counters_.queue_max = std::max(counters_.queue_max, due_now - next_);
      if (now >= next_sweep) {
        sweep(now);
        next_sweep = now + 5'000'000;
      }
      if (next_ == total_ && busy_ == 0) break;
      Nanos wake = next_sweep;
      if (next_ < total_ && next_ >= due_now) wake = std::min(wake, due_at(next_));
      wait(wake);
    }
    for (Connection& c : conns_) {
      if (c.fd >= 0) ::close(c.fd);
    }
  }

  void report() const {
    const Counters& k = counters_;
    const double goodput = static_cast<double>(k.ok) / o_.duration;
    const std::uint64_t due = total_ - first_counted_;
    auto ms = [](Nanos v) { return static_cast<double>(v) / 1e6; };
    struct Field {
      const char* name;
      double value;
      int decimals;
    };
    const std::vector<Field> fields = {
        {"rate", o_.rate, 1},
        {"conns", static_cast<double>(o_.conns), 0},
        {"duration", o_.duration, 3},
        {"due", static_cast<double>(due), 0},
        {"sent", static_cast<double>(k.sent), 0},
        {"unsent", static_cast<double>(k.unsent), 0},
        {"answered_2xx", static_cast<double>(k.ok), 0},
        {"answered_503", static_cast<double>(k.status_503), 0},
        {"answered_429", static_cast<double>(k.status_429), 0},
        {"answered_other", static_cast<double>(k.other), 0},
        {"timeouts", static_cast<double>(k.timeouts), 0},
        {"errors_connect", static_cast<double>(k.errors_connect), 0},
        {"errors_read", static_cast<double>(k.errors_read), 0},
        {"errors_write", static_cast<double>(k.errors_write), 0},
        {"errors_reset", static_cast<double>(k.errors_reset), 0},
        {"errors_closed", static_cast<double>(k.errors_closed), 0},
        {"errors_parse", static_cast<double>(k.errors_parse), 0},
        {"goodput", goodput, 1},
        {"ok_p50_ms", ms(k.ok_latency.percentile(0.5)), 3},
        {"ok_p90_ms", ms(k.ok_latency.percentile(0.9)), 3},
        {"ok_p99_ms", ms(k.ok_latency.percentile(0.99)), 3},
        {"ok_p999_ms", ms(k.ok_latency.percentile(0.999)), 3},
        {"ok_max_ms", ms(k.ok_latency.max()), 3},
        {"shed_p50_ms", ms(k.shed_latency.percentile(0.5)), 3},
        {"shed_p90_ms", ms(k.shed_latency.percentile(0.9)), 3},
        {"shed_p99_ms", ms(k.shed_latency.percentile(0.99)), 3},
        {"shed_p999_ms", ms(k.shed_latency.percentile(0.999)), 3},
        {"shed_max_ms", ms(k.shed_latency.max()), 3},
        {"send_lag_p99_ms", ms(k.send_lag.percentile(0.99)), 3},
        {"send_lag_max_ms", ms(k.send_lag.max()), 3},
        {"queue_max", static_cast<double>(k.queue_max), 0},
        {"conns_open", static_cast<double>(conns_open_), 0},
        {"reconnects", static_cast<double>(k.reconnects), 0},
        {"peak_rss_kib", static_cast<double>(k.peak_rss_kib), 0},
    };
    std::string line = o_.json ? "{" : "";
    for (const Field& f : fields) {
      char buffer[96];
      if (o_.json) {
        std::snprintf(buffer, sizeof buffer, "%s\"%s\": %.*f", line.size() > 1 ? ", " : "",
                      f.name, f.decimals, f.value);
      } else {
        std::snprintf(buffer, sizeof buffer, "%s%s=%.*f", line.empty() ? "" : " ", f.name,
                      f.decimals, f.value);
      }
      line += buffer;
    }
    if (o_.json) line += "}";
    std::puts(line.c_str());
  }

 private:
  static constexpr std::uint64_t timer_tag = ~std::uint64_t{0};

  Nanos due_at(std::uint64_t i) const {
    return start_ + static_cast<Nanos>(static_cast<double>(i) * interval_);
  }
  // Requests due at or before t: those with i * interval <= t - start.
  std::uint64_t due_count(Nanos t) const {
    if (t < start_) return 0;
    return static_cast<std::uint64_t>(std::floor(static_cast<double>(t - start_) / interval_)) + 1;
  }
  bool counted(std::uint64_t i) const { return i >= first_counted_; }

  // The VmRSS of --rss-pids, summed (a process that is gone counts 0).
  std::uint64_t rss_kib() const {
    std::uint64_t sum = 0;
    for (int pid : o_.rss_pids) {
      const std::string path = "/proc/" + std::to_string(pid) + "/status";
      std::FILE* f = std::fopen(path.c_str(), "re");
      if (f == nullptr) continue;
      char line[256];
      while (std::fgets(line, sizeof line, f) != nullptr) {
        unsigned long long kib = 0;
        if (std::sscanf(line, "VmRSS: %llu", &kib) == 1) {
          sum += kib;
          break;
        }
      }
      std::fclose(f);
    }
    return sum;
  }

  void open(std::size_t id, Nanos now) {
    Connection& c = conns_[id];
    c.fd = ::socket(family_, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) fail(std::string("socket: ") + std::strerror(errno));
    const int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c.in.clear();
    c.pos = 0;
    c.phase = Phase::head;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ++c.generation;
    ev.data.u64 = (std::uint64_t{c.generation} << 32) | id;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev);
    if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&address_), address_len_) == 0 ||
        errno == EINPROGRESS) {
      c.state = State::connecting;
      c.deadline = now + timeout_;
      return;
    }
    ++counters_.errors_connect;
    drop(id, now + 10'000'000);
  }

  // Closes the connection; it is opened again at retry_at (by sweep).
  void drop(std::size_t id, Nanos retry_at) {
    Connection& c = conns_[id];
    if (c.state == State::busy) --busy_;
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.state = State::down;
    c.retry_at = retry_at;
  }

  void reopen(std::size_t id, Nanos now) {
    drop(id, now);
    ++counters_.reconnects;
    open(id, now);
  }

  void make_idle(std::size_t id) {
    Connection& c = conns_[id];
    if (c.state == State::busy) --busy_;
    c.state = State::idle;
    if (!c.in_free_list) {
      c.in_free_list = true;
      free_.push_back(id);
    }
  }

  int take_free() {
    while (!free_.empty()) {
      const std::size_t id = free_.back();
      free_.pop_back();
      conns_[id].in_free_list = false;
      if (conns_[id].state == State::idle) return static_cast<int>(id);
    }
    return -1;
  }

  void send(std::size_t id, std::uint64_t request, Nanos now) {
    Connection& c = conns_[id];
    c.state = State::busy;
    ++busy_;
    c.request = request;
    c.due = due_at(request);
    c.deadline = c.due + timeout_;
    c.written = 0;
    if (counted(request)) {
      ++counters_.sent;
      counters_.send_lag.record(now - c.due);
    }
    write_some(id, now);
  }

  void write_some(std::size_t id, Nanos now) {
    Connection& c = conns_[id];
    while (c.written < request_.size()) {
      const ssize_t n = ::send(c.fd, request_.data() + c.written, request_.size() - c.written,
                               MSG_NOSIGNAL);
      if (n > 0) {
        c.written += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT goes on
      lose(id, errno == ECONNRESET ? counters_.errors_reset : counters_.errors_write, now);
      return;
    }
  }

  // The request in flight on `id` is lost to an error (counted in `counter` when it
  // is in the window); the connection is opened again.
  void lose(std::size_t id, std::uint64_t& counter, Nanos now) {
    if (conns_[id].state == State::busy && counted(conns_[id].request)) ++counter;
    reopen(id, now);
  }

  void on_event(std::size_t id, std::uint32_t events, Nanos now) {
    Connection& c = conns_[id];
    if (c.state == State::down) return;
    if (c.state == State::connecting) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0 || (events & (EPOLLERR | EPOLLHUP))) {
        ++counters_.errors_connect;
        drop(id, now + 10'000'000);
        return;
      }
      make_idle(id);
      return;
    }
    if (c.state == State::busy && (events & EPOLLOUT) && c.written < request_.size()) {
      write_some(id, now);
      if (c.state != State::busy) return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) read_some(id);
  }

  void read_some(std::size_t id) {
    Connection& c = conns_[id];
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        if (c.state != State::busy) {  // nothing asked: a server closing an idle connection
          reopen(id, now_ns());
          return;
        }
        c.in.append(buffer, static_cast<std::size_t>(n));
        if (!consume(id)) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      const Nanos now = now_ns();
      if (n == 0) {
        if (c.state == State::busy && c.phase == Phase::until_close) {
          finish(id, now);
          reopen(id, now);
        } else {
          lose(id, counters_.errors_closed, now);
        }
      } else {
        lose(id, errno == ECONNRESET ? counters_.errors_reset : counters_.errors_read, now);
      }
      return;
    }
  }

  // Parses what arrived; false when the connection was reopened meanwhile.
  bool consume(std::size_t id) {
    Connection& c = conns_[id];
    switch (parse_response(c)) {
      case Parsed::more:
        if (c.pos > 65536) {
          c.in.erase(0, c.pos);
          c.pos = 0;
        }
        return true;
      case Parsed::bad:
        lose(id, counters_.errors_parse, now_ns());
        return false;
      case Parsed::done:
        break;
    }
    const Nanos now = now_ns();
    const bool extra = c.pos != c.in.size();
    finish(id, now);
    if (c.close_after || extra) {
      reopen(id, now);
      return false;
    }
    c.in.clear();
    c.pos = 0;
    c.phase = Phase::head;
    make_idle(id);
    return true;
  }

  // The response to the request in flight on `id` is complete.
  void finish(std::size_t id, Nanos now) {
    Connection& c = conns_[id];
    if (!counted(c.request)) return;
    if (c.status >= 200 && c.status < 300) {
      ++counters_.ok;
      counters_.ok_latency.record(now - c.due);
    } else if (c.status == 503 || c.status == 429) {
      ++(c.status == 503 ? counters_.status_503 : counters_.status_429);
      counters_.shed_latency.record(now - c.due);
    } else {
      ++counters_.other;
    }
  }

  // Timeouts and reconnections.
  void sweep(Nanos now) {
    for (std::size_t id = 0; id < conns_.size(); ++id) {
      Connection& c = conns_[id];
      if (c.state == State::busy && now >= c.deadline) {
        lose(id, counters_.timeouts, now);
      } else if (c.state == State::connecting && now >= c.deadline) {
        ++counters_.errors_connect;
        drop(id, now);
      }
      if (c.state == State::down && now >= c.retry_at) {
        ++counters_.reconnects;
        open(id, now);
      }
    }
  }

  // Handles what is ready, waiting at most until `until`.
  void wait(Nanos until) {
    itimerspec at{};
    const Nanos when = std::max<Nanos>(until, 1);
    at.it_value.tv_sec = when / 1'000'000'000;
    at.it_value.tv_nsec = when % 1'000'000'000;
    ::timerfd_settime(timer_, TFD_TIMER_ABSTIME, &at, nullptr);
    std::array<epoll_event, 256> events;
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), -1);
    const Nanos now = now_ns();
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == timer_tag) {
        std::uint64_t expirations = 0;
        (void)!::read(timer_, &expirations, sizeof expirations);
        continue;
      }
      const std::size_t id = events[i].data.u64 & 0xffff'ffff;
      if (conns_[id].generation != events[i].data.u64 >> 32) continue;  // closed in this batch
      on_event(id, events[i].events, now);
    }
  }

  const Options& o_;
  std::vector<Connection> conns_;
  std::vector<std::size_t> free_;  // idle connections (and stale entries: see take_free)
  std::size_t busy_ = 0;
  sockaddr_storage address_{};
  socklen_t address_len_ = 0;
  int family_ = AF_INET;
  std::string request_;
  int epoll_ = -1;
  int timer_ = -1;
  double interval_ = 0;
  Nanos timeout_ = 0;
  Nanos start_ = 0;
  std::uint64_t total_ = 0;
  std::uint64_t first_counted_ = 0;
  std::uint64_t next_ = 0;
  std::size_t conns_open_ = 0;
  Counters counters_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  raise_nofile(options.conns + 64);
  std::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // wake when a request is due, not up to 50 µs later
  Generator generator(options);
  generator.run();
  generator.report();
  return 0;
}
