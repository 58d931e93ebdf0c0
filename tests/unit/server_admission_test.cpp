// Connection admission (server/admission.hpp), the log limiter
// (core/log_limiter.hpp) and the message budget (dataplane/transport.hpp).
#include <gtest/gtest.h>

#include "core/log_limiter.hpp"
#include "dataplane/transport.hpp"
#include "server/admission.hpp"

namespace genie {
namespace {

using Clock = Admission::Clock;
using std::chrono::milliseconds;

TEST(Admission, SourceIsTheAddressWithoutItsPort) {
  EXPECT_EQ(source_of("127.0.0.1:5555"), "127.0.0.1");
  EXPECT_EQ(source_of("[::1]:40000"), "::1");
  EXPECT_EQ(source_of("[::ffff:10.0.0.1]:1"), "10.0.0.1");
  EXPECT_EQ(source_of("10.1.2.3"), "10.1.2.3");
}

TEST(Admission, LimitsConnectionsInTotalAndPerSource) {
  Admission a(3, 2);
  genie_status_t st = GENIE_OK;
  EXPECT_EQ(a.admit("a", &st), "");
  EXPECT_EQ(a.admit("a", &st), "");
  const std::string third = a.admit("a", &st);
  EXPECT_NE(third.find("limit per address"), std::string::npos) << third;
  EXPECT_EQ(st, GENIE_ERR_CONNECTION);
  EXPECT_EQ(a.admit("b", &st), "");
  const std::string total = a.admit("c", &st);
  EXPECT_NE(total.find("3 connections"), std::string::npos) << total;
  a.release("a");
  EXPECT_EQ(a.admit("c", &st), "");
  EXPECT_EQ(st, GENIE_OK);
  EXPECT_EQ(a.connections(), 3u);
}

TEST(Admission, AVouchedConnectionLeavesItsSourcesCountButNotTheTotal) {
  Admission a(3, 1);
  genie_status_t st = GENIE_OK;
  EXPECT_EQ(a.admit("a", &st), "");
  EXPECT_NE(a.admit("a", &st), "");  // the one slot of "a" is taken
  a.vouch("a");                      // it proved its session: "a" has its slot back
  EXPECT_EQ(a.admit("a", &st), "");
  EXPECT_EQ(a.connections(), 2u);
  EXPECT_EQ(a.admit("b", &st), "");
  const std::string total = a.admit("c", &st);  // the total still counts it
  EXPECT_NE(total.find("3 connections"), std::string::npos) << total;
  a.release("a", false);  // the vouched one ends: the total only
  EXPECT_NE(a.admit("a", &st), "");
  EXPECT_EQ(a.connections(), 2u);
  a.release("a");
  EXPECT_EQ(a.admit("a", &st), "");
}

TEST(Admission, FailedAuthenticationsBackOffAndASuccessClears) {
  Admission a(0, 0);
  const auto t0 = Clock::now();
  for (int i = 0; i < Admission::kFreeAuthFailures; ++i) EXPECT_EQ(a.auth_failed("x", t0), 0);
  genie_status_t st = GENIE_OK;
  EXPECT_EQ(a.admit("x", &st, t0), "");
  a.release("x");
  // Then refused for a doubling interval, capped.
  EXPECT_EQ(a.auth_failed("x", t0), Admission::kFirstBackoffMs);
  EXPECT_EQ(a.auth_failed("x", t0), 2 * Admission::kFirstBackoffMs);
  const std::string why = a.admit("x", &st, t0 + milliseconds(100));
  EXPECT_NE(why.find("failed authentications"), std::string::npos) << why;
  EXPECT_EQ(st, GENIE_ERR_AUTH);
  EXPECT_EQ(a.admit("y", &st, t0), "") << "another source is not affected";
  EXPECT_EQ(a.admit("x", &st, t0 + milliseconds(2 * Admission::kFirstBackoffMs + 1)), "");
  int64_t last = 0;
  for (int i = 0; i < 30; ++i) last = a.auth_failed("x", t0);
  EXPECT_EQ(last, Admission::kMaxBackoffMs);
  a.auth_succeeded("x");
  EXPECT_EQ(a.admit("x", &st, t0), "");
}

// Rotating source addresses does not raise the guessing rate: failures
// from all sources draw on one allowance, and while it is spent only
// sources that authenticated before get in.
TEST(Admission, FailuresFromManySourcesAreLimitedServerWide) {
  Admission a(0, 0);
  const auto t0 = Clock::now();
  genie_status_t st = GENIE_OK;
  a.auth_succeeded("known", t0);
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string source = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250);
    if (!a.admit(source, &st, t0).empty()) continue;
    ++admitted;
    a.release(source);
    a.auth_failed(source, t0);  // each source fails once: no per-source back-off
  }
  EXPECT_LE(admitted, static_cast<int>(Admission::kGlobalFailureBurst) + 1);
  const std::string why = a.admit("10.9.9.9", &st, t0);
  EXPECT_NE(why.find("from all sources"), std::string::npos) << why;
  EXPECT_EQ(st, GENIE_ERR_AUTH);
  EXPECT_EQ(a.admit("known", &st, t0), "") << "a source that authenticated before is not locked out";
  a.release("known");
  // The allowance comes back with time, at a bounded rate.
  EXPECT_EQ(a.admit("10.9.9.9", &st, t0 + std::chrono::seconds(60)), "");
}

TEST(LogLimiter, WritesABurstThenCountsAndSummarises) {
  LogLimiter lim("test-line", 3, 1000);
  const auto t0 = Clock::now();
  for (int i = 0; i < 10; ++i) lim.write(LogLevel::Debug, "line", t0 + milliseconds(i));
  EXPECT_EQ(lim.suppressed_total(), 7u);
  lim.flush(t0 + milliseconds(1500));  // a new window: the summary is written
  for (int i = 0; i < 3; ++i) lim.write(LogLevel::Debug, "line", t0 + milliseconds(1600));
  EXPECT_EQ(lim.suppressed_total(), 7u);
}

TEST(MessageBudget, TakesUpToItsLimit) {
  dataplane::MessageBudget b(100);
  EXPECT_TRUE(b.take(60));
  EXPECT_FALSE(b.take(41));
  EXPECT_TRUE(b.take(40));
  EXPECT_FALSE(b.take(1));
  b.give(50);
  EXPECT_EQ(b.used(), 50u);
  EXPECT_FALSE(b.take(UINT64_MAX));
}

}  // namespace
}  // namespace genie
