// The NTP-style estimate of a server's clock (control/clock_offset.hpp).
#include <gtest/gtest.h>

#include "control/clock_offset.hpp"

namespace genie {
namespace {

TEST(ClockOffset, TheLeastRoundTripGivesTheOffsetAndHalfItAsTheError) {
  // The server's clock runs 1 s ahead. Its answers sit at various points of
  // each round trip; the sample of least round trip (10 us) bounds it best.
  const uint64_t ahead = 1'000'000'000;
  std::vector<ClockSample> s = {
      {100'000, 100'000 + ahead + 90'000, 200'000},  // rtt 100 us, answered late
      {300'000, 300'000 + ahead + 4'000, 310'000},   // rtt 10 us
      {400'000, 400'000 + ahead + 1'000, 450'000},   // rtt 50 us, answered early
  };
  const ClockOffset c = estimate_clock_offset(s);
  ASSERT_TRUE(c.known);
  EXPECT_EQ(c.samples, 3);
  EXPECT_EQ(c.rtt_ns, 10'000u);
  EXPECT_EQ(c.error_ns, 5'000u);
  // The middle of the round trip (305 us) against the server's 304 us + 1 s.
  EXPECT_EQ(c.offset_ns, static_cast<int64_t>(ahead) - 1'000);
  EXPECT_LE(static_cast<uint64_t>(std::llabs(c.offset_ns - static_cast<int64_t>(ahead))), c.error_ns);
}

TEST(ClockOffset, AServerBehindGivesANegativeOffset) {
  const ClockOffset c = estimate_clock_offset({{5'000'000, 2'000'000 + 10, 5'000'020}});
  ASSERT_TRUE(c.known);
  EXPECT_EQ(c.offset_ns, -3'000'000);
  EXPECT_EQ(c.error_ns, 10u);
}

TEST(ClockOffset, NoUsableSampleIsNotKnown) {
  EXPECT_FALSE(estimate_clock_offset({}).known);
  EXPECT_FALSE(estimate_clock_offset({{10, 5, 9}}).known) << "an answer before the probe left";
}

}  // namespace
}  // namespace genie
