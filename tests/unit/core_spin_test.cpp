// spin_until and spin_while (core/spin.hpp): bounded, ends with the step's
// answer, counts spin_while's bound from the last busy step, and never
// spins where the machine has no room for it.
#include <gtest/gtest.h>

#include <chrono>

#include "core/spin.hpp"

namespace genie {
namespace {

TEST(CoreSpin, ADoneStepEndsAtOnce) {
  int calls = 0;
  EXPECT_TRUE(spin_until(
      [&] {
        ++calls;
        return true;
      },
      std::chrono::milliseconds(100)));
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_TRUE(spin_while(
      [&] {
        ++calls;
        return SpinStep::Done;
      },
      std::chrono::milliseconds(100)));
  EXPECT_EQ(calls, 1);
}

TEST(CoreSpin, GivesUpWithinItsBudget) {
  int calls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(spin_until(
      [&] {
        ++calls;
        return false;
      },
      std::chrono::microseconds(200)));
  EXPECT_GE(calls, 1);
  // The budget plus one preempted yield; far below this even on a busy machine.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
}

TEST(CoreSpin, ReturnsTrueExactlyWhenTheStepSaidSo) {
  int calls = 0;
  const bool r = spin_until([&] { return ++calls == 3; }, std::chrono::seconds(1));
  // Where spinning is not allowed (a busy machine) the step runs once.
  if (r)
    EXPECT_EQ(calls, 3);
  else
    EXPECT_LT(calls, 3);
}

// Busy steps for five times the idle bound, then Done: a bound counted from
// the start (spin_until's) would have given up long before.
TEST(CoreSpin, BusyStepsKeepTheSpinGoingPastTheIdleBound) {
  using clock = std::chrono::steady_clock;
  constexpr auto kIdle = std::chrono::microseconds(200);
  SpinRoomForTests room(true);
  int calls = 0;
  const auto busy_until = clock::now() + 5 * kIdle;
  EXPECT_TRUE(spin_while(
      [&] {
        ++calls;
        return clock::now() < busy_until ? SpinStep::Busy : SpinStep::Done;
      },
      kIdle));
  EXPECT_GT(calls, 1);
}

// After the last busy step the spin goes on polling until the idle bound
// has passed, counted from that step; and then it ends.
TEST(CoreSpin, TheIdleBoundCountsFromTheLastBusyStep) {
  using clock = std::chrono::steady_clock;
  constexpr auto kIdle = std::chrono::microseconds(300);
  SpinRoomForTests room(true);
  clock::time_point last_busy;
  int idle_calls = 0;
  const auto busy_until = clock::now() + 3 * kIdle;
  EXPECT_FALSE(spin_while(
      [&] {
        const auto now = clock::now();
        if (now < busy_until) {
          last_busy = now;
          return SpinStep::Busy;
        }
        ++idle_calls;
        return SpinStep::Idle;
      },
      kIdle));
  const auto end = clock::now();
  EXPECT_GE(idle_calls, 1);
  EXPECT_GE(end - last_busy, kIdle) << "the spin ended before its idle bound";
  EXPECT_LT(end - last_busy, std::chrono::milliseconds(200));
}

// On a machine that looks idle a long yield does not end a spin; on a real
// one it does (kSpinPreempted).
TEST(CoreSpin, OnlyALongYieldCountsAsPreempted) {
  EXPECT_FALSE(spin_preempted(kSpinPreempted));
  EXPECT_TRUE(spin_preempted(kSpinPreempted + std::chrono::microseconds(1)));
  SpinRoomForTests room(true);
  EXPECT_FALSE(spin_preempted(std::chrono::milliseconds(10)));
}

TEST(CoreSpin, RoomIsRunnableThreadsAgainstUsableCpus) {
  EXPECT_TRUE(spin_room(2, 4));
  EXPECT_FALSE(spin_room(2, 5));
  EXPECT_FALSE(spin_room(8, -1));  // the load could not be read
  // Pinned to one CPU: the peer waited for is another process, or a thread
  // the yields let run.
  EXPECT_TRUE(spin_room(1, 2));
  EXPECT_TRUE(spin_room(1, 3));
  EXPECT_FALSE(spin_room(1, 4));
}

TEST(CoreSpin, NoRoomMeansOneStep) {
  SpinRoomForTests room(false);
  int calls = 0;
  EXPECT_FALSE(spin_while(
      [&] {
        ++calls;
        return SpinStep::Busy;
      },
      std::chrono::milliseconds(100)));
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_FALSE(spin_until([&] { return ++calls == 3; }, std::chrono::seconds(1)));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace genie
