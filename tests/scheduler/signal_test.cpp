// goro::signal_notify / signal_stop: signals reach the channels that asked for them, wake a
// parked receiver, never block the relay, and give the signal its old disposition back.
#include <goro/scheduler/signal.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "sync_test_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::WithProcs;

// The next value on ch within `limit`, or nullopt.
std::optional<int> recv_within(const goro::Chan<int>& ch, std::chrono::nanoseconds limit) {
  std::optional<int> value;
  if (goro::select(goro::recv_case(ch, value), goro::timeout_case(limit)) == 0) return value;
  return std::nullopt;
}

// Sends sig to this thread. A signal sent to the process reaches whichever thread the
// kernel picks, and under TSan a thread that sleeps in a raw futex (an idle M) takes it
// only when it next calls into libc, which may be never; the demo's and the container's
// tests send SIGTERM to the process from outside.
void send_signal(int sig) { ASSERT_EQ(::pthread_kill(::pthread_self(), sig), 0); }

bool handler_is_default(int sig) {
  struct sigaction now = {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler == SIG_DFL;
}

class SignalTest : public WithProcs {};
GORO_INSTANTIATE_PROCS(SignalTest);

TEST_P(SignalTest, ARaisedSignalWakesAParkedReceiver) {
  run([] {
    goro::Chan<int> signals(1);
    ASSERT_FALSE(goro::signal_notify(signals, {SIGUSR1}));
    std::atomic<int> got{0};
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {
      got = recv_within(signals, 5s).value_or(-1);
      wg.done();
    });
    goro::sleep(20ms);  // the receiver is parked by now
    send_signal(SIGUSR1);
    wg.wait();
    EXPECT_EQ(got.load(), SIGUSR1);
    goro::signal_stop(signals);
  });
}

TEST_P(SignalTest, EveryChannelThatAskedGetsIt) {
  run([] {
    goro::Chan<int> a(1), b(1), other(1);
    ASSERT_FALSE(goro::signal_notify(a, {SIGUSR1, SIGUSR2}));
    ASSERT_FALSE(goro::signal_notify(b, {SIGUSR2}));
    ASSERT_FALSE(goro::signal_notify(other, {SIGUSR1}));
    send_signal(SIGUSR2);
    EXPECT_EQ(recv_within(a, 5s), SIGUSR2);
    EXPECT_EQ(recv_within(b, 5s), SIGUSR2);
    EXPECT_EQ(recv_within(other, 50ms), std::nullopt) << "SIGUSR1 only";
    goro::signal_stop(a);
    goro::signal_stop(b);
    goro::signal_stop(other);
  });
}

TEST_P(SignalTest, AFullChannelDropsTheSignalAndNothingBlocks) {
  run([] {
    goro::Chan<int> full(1), unbuffered, fine(8);
    ASSERT_FALSE(goro::signal_notify(full, {SIGUSR1}));
    ASSERT_FALSE(goro::signal_notify(unbuffered, {SIGUSR1}));  // nobody receives on it
    ASSERT_FALSE(goro::signal_notify(fine, {SIGUSR1}));
    for (int i = 0; i < 3; ++i) {
      send_signal(SIGUSR1);
      EXPECT_EQ(recv_within(fine, 5s), SIGUSR1) << "signal " << i;
    }
    EXPECT_EQ(full.len(), 1u);
    goro::signal_stop(full);
    goro::signal_stop(unbuffered);
    goro::signal_stop(fine);
  });
}

TEST_P(SignalTest, AClosedRegisteredChannelDoesNotStopTheOthers) {
  run([] {
    goro::Chan<int> closed(1), open(1);
    ASSERT_FALSE(goro::signal_notify(closed, {SIGUSR1}));
    ASSERT_FALSE(goro::signal_notify(open, {SIGUSR1}));
    closed.close();
    send_signal(SIGUSR1);
    EXPECT_EQ(recv_within(open, 5s), SIGUSR1);
    send_signal(SIGUSR1);
    EXPECT_EQ(recv_within(open, 5s), SIGUSR1) << "the relay is still alive";
    goro::signal_stop(closed);
    goro::signal_stop(open);
  });
}

TEST_P(SignalTest, StopEndsDeliveryAndRestoresTheDefaultAction) {
  run([] {
    ASSERT_TRUE(handler_is_default(SIGUSR2));
    goro::Chan<int> a(4), b(4);
    ASSERT_FALSE(goro::signal_notify(a, {SIGUSR2}));
    ASSERT_FALSE(goro::signal_notify(b, {SIGUSR2}));
    EXPECT_FALSE(handler_is_default(SIGUSR2));
    goro::signal_stop(a);
    EXPECT_FALSE(handler_is_default(SIGUSR2)) << "b still asks for it";
    send_signal(SIGUSR2);
    EXPECT_EQ(recv_within(b, 5s), SIGUSR2);
    EXPECT_EQ(a.len(), 0u);
    goro::signal_stop(b);
    EXPECT_TRUE(handler_is_default(SIGUSR2));
  });
}

// A thread outside the runtime that readies a goroutine may start the M that runs it,
// and a new thread inherits its creator's signal mask. goro::signal_notify's relay
// blocks every signal: the Ms it starts must still take the program's signals and the
// preemption signal, as the thread that called goro::run does.
TEST(Signal, AnMStartedFromAThreadThatBlocksSignalsStillTakesThem) {
  goro::run(
      [] {
        goro::Chan<int> wake(1);
        std::thread outsider([wake] {
          sigset_t all;
          sigfillset(&all);
          pthread_sigmask(SIG_SETMASK, &all, nullptr);
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          wake.try_send(1);  // main is parked, M0 polls: this thread starts an M
        });
        // With a timeout, the idle M0 waits in the netpoller, not on the idle list.
        EXPECT_EQ(recv_within(wake, 5s), 1);
        sigset_t now;
        pthread_sigmask(SIG_BLOCK, nullptr, &now);
        EXPECT_FALSE(sigismember(&now, SIGUSR1)) << "this M blocks the program's signals";
        EXPECT_FALSE(sigismember(&now, SIGURG)) << "this M cannot be preempted";
        outsider.join();
      },
      goro::Config{.maxprocs = 1});
}

TEST(Signal, ThePreviousDispositionComesBack) {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before = {};
  sigaction(SIGUSR1, &ignore, &before);
  goro::run(
      [] {
        goro::Chan<int> ch(1);
        ASSERT_FALSE(goro::signal_notify(ch, {SIGUSR1}));
        goro::signal_stop(ch);
      },
      goro::Config{.maxprocs = 2});
  struct sigaction after = {};
  sigaction(SIGUSR1, &before, &after);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
}

TEST(Signal, RegistrationsEndWithTheRun) {
  goro::Chan<int> ch(1);
  goro::run(
      [&] {
        ASSERT_FALSE(goro::signal_notify(ch, {SIGUSR1}));
        EXPECT_FALSE(handler_is_default(SIGUSR1));
      },
      goro::Config{.maxprocs = 2});
  EXPECT_TRUE(handler_is_default(SIGUSR1));
}

TEST(Signal, ReservedAndInvalidSignalsAreRefused) {
  goro::run(
      [] {
        goro::Chan<int> ch(1);
        for (int sig : {SIGKILL, SIGSTOP, SIGURG, SIGSEGV, SIGBUS, SIGFPE, SIGILL, 0, -1, NSIG}) {
          EXPECT_EQ(goro::signal_notify(ch, {sig}), std::errc::invalid_argument) << sig;
        }
        // One bad number refuses the whole call.
        EXPECT_EQ(goro::signal_notify(ch, {SIGUSR1, SIGURG}), std::errc::invalid_argument);
        EXPECT_TRUE(handler_is_default(SIGUSR1));
      },
      goro::Config{.maxprocs = 1});
}

}  // namespace
