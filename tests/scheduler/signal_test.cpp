// goro::signal_notify / signal_stop: signals reach the channels that asked for them, wake a
// parked receiver, never block the relay, and give the signal its old disposition back.
#include <goro/scheduler/signal.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>

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
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
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
    ::kill(::getpid(), SIGUSR2);
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
      ::kill(::getpid(), SIGUSR1);
      EXPECT_EQ(recv_within(fine, 5s), SIGUSR1) << "signal " << i;
    }
    EXPECT_EQ(full.len(), 1u);
    goro::signal_stop(full);
    goro::signal_stop(unbuffered);
    goro::signal_stop(fine);
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
    ::kill(::getpid(), SIGUSR2);
    EXPECT_EQ(recv_within(b, 5s), SIGUSR2);
    EXPECT_EQ(a.len(), 0u);
    goro::signal_stop(b);
    EXPECT_TRUE(handler_is_default(SIGUSR2));
  });
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
