// goro::signal_notify: signals relayed to channels (see <goro/scheduler/signal.hpp>).
//
// The handler writes the signal's number, one byte, to a pipe whose write end does not
// block (a full pipe drops the signal, as a full channel would). One relay thread per
// process, started by the first signal_notify, reads the pipe and, under `mu`, sends
// each number to the channels registered for it with try_send. The relay is an OS thread
// outside the runtime, as a thread that calls goro::go is: a send readies a parked
// receiver without the relay ever parking, and the relay needs no goroutine of its own
// that a later goro::run would have to start again.
//
// signal_stop and the end of a run take `mu` too, so once they return no send to the
// channels they removed is under way. A signal's handler is installed while some
// registration wants it and the previous disposition is put back when none does.

#include <goro/scheduler/signal.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <thread>
#include <vector>

#include "signals.hpp"

namespace goro {
namespace {

constexpr int kSignals = NSIG;  // signal numbers are 1 .. NSIG - 1 (64 on Linux)

struct Registration {
  Chan<int> ch;
  bool wanted[kSignals] = {};
};

struct Relay {
  std::mutex mu;  // guards the fields below
  std::vector<Registration> registrations;
  bool caught[kSignals] = {};
  struct sigaction previous[kSignals] = {};
};

Relay& relay() {
  static Relay* r = new Relay();  // never destroyed: the relay thread outlives main
  return *r;
}

int pipe_write_end = -1;  // written once, before any handler is installed

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char number = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(pipe_write_end, &number, 1);
  errno = saved;
}

void relay_main(int read_end) {
  unsigned char numbers[64];
  for (;;) {
    ssize_t n = ::read(read_end, numbers, sizeof numbers);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    Relay& r = relay();
    std::lock_guard lock(r.mu);
    for (ssize_t i = 0; i < n; ++i) {
      for (Registration& reg : r.registrations) {
        if (!reg.wanted[numbers[i]]) continue;
        try {
          reg.ch.try_send(static_cast<int>(numbers[i]));
        } catch (const ChanClosed&) {
          // The program closed a channel it had not stopped: it gets nothing more.
        }
      }
    }
  }
}

// Creates the pipe and the relay thread, once. False if either cannot be had.
bool start_relay() {
  static const bool started = [] {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    pipe_write_end = fds[1];
    // The relay takes no signal itself: its read is never interrupted, and a signal
    // directed at the process goes to a thread that can take it.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    std::thread(relay_main, fds[0]).detach();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return true;
  }();
  return started;
}

// Installs the handler for the signals some registration wants, and puts the previous
// disposition back for those none wants any more. Caller holds r.mu.
void update_handlers(Relay& r) {
  for (int sig = 1; sig < kSignals; ++sig) {
    bool wanted = false;
    for (const Registration& reg : r.registrations) wanted = wanted || reg.wanted[sig];
    if (wanted && !r.caught[sig]) {
      struct sigaction sa = {};
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART | SA_ONSTACK;
      sigfillset(&sa.sa_mask);
      if (sigaction(sig, &sa, &r.previous[sig]) == 0) r.caught[sig] = true;
    } else if (!wanted && r.caught[sig]) {
      sigaction(sig, &r.previous[sig], nullptr);
      r.caught[sig] = false;
    }
  }
}

bool reserved(int sig) {
  switch (sig) {
    case SIGKILL:
    case SIGSTOP:
    case SIGURG:
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL: return true;
    default: return sig < 1 || sig >= kSignals;
  }
}

}  // namespace

std::error_code signal_notify(const Chan<int>& ch, std::initializer_list<int> signals) {
  for (int sig : signals) {
    if (reserved(sig)) return std::make_error_code(std::errc::invalid_argument);
  }
  if (!start_relay()) return std::error_code(errno, std::generic_category());
  Relay& r = relay();
  std::lock_guard lock(r.mu);
  Registration* reg = nullptr;
  for (Registration& existing : r.registrations) {
    if (existing.ch == ch) reg = &existing;
  }
  if (reg == nullptr) reg = &r.registrations.emplace_back(Registration{ch});
  for (int sig : signals) reg->wanted[sig] = true;
  update_handlers(r);
  return {};
}

void signal_stop(const Chan<int>& ch) {
  Relay& r = relay();
  std::lock_guard lock(r.mu);
  std::erase_if(r.registrations, [&](const Registration& reg) { return reg.ch == ch; });
  update_handlers(r);
}

namespace detail {

void signal_notify_reset() {
  Relay& r = relay();
  std::lock_guard lock(r.mu);
  r.registrations.clear();
  update_handlers(r);
}

}  // namespace detail
}  // namespace goro
