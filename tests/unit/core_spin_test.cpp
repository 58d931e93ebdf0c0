// spin_until (core/spin.hpp): bounded, ends with the step's answer, and
// never spins where the machine has no room for it.
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

}  // namespace
}  // namespace genie
