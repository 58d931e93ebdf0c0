// The in-memory membership store (cluster/membership.hpp): leases, create-if-
// absent, watches in revision order, expiry.
#include <gtest/gtest.h>

#include <thread>

#include "cluster/membership.hpp"
#include "core/error.hpp"

namespace genie {
namespace {

struct Recorder {
  std::vector<MemberEvent> events;
  MemberWatchFn fn() {
    return [this](const MemberEvent& e) { events.push_back(e); };
  }
};

TEST(Membership, CreatePutListAndWatchInRevisionOrder) {
  auto store = make_in_memory_membership();
  const MemberSnapshot empty = store->list();
  EXPECT_TRUE(empty.members.empty());
  Recorder r;
  const uint64_t w = store->watch(empty.revision + 1, r.fn());
  const uint64_t lease = store->grant(60000);
  store->create("a", "{\"id\":\"a\"}", lease);
  store->put("b", "{\"id\":\"b\"}", lease);
  store->put("a", "{\"id\":\"a\",\"v\":2}", lease);
  store->remove("b");
  store->remove("b");  // absent: nothing
  ASSERT_EQ(r.events.size(), 4u);
  for (size_t i = 1; i < r.events.size(); ++i) EXPECT_GT(r.events[i].revision, r.events[i - 1].revision);
  EXPECT_EQ(r.events[0].kind, MemberEvent::Kind::Put);
  EXPECT_EQ(r.events[3].kind, MemberEvent::Kind::Delete);
  EXPECT_EQ(r.events[3].id, "b");
  const MemberSnapshot s = store->list();
  ASSERT_EQ(s.members.size(), 1u);
  EXPECT_EQ(s.members[0].value, "{\"id\":\"a\",\"v\":2}");
  EXPECT_EQ(s.revision, r.events.back().revision);
  store->unwatch(w);
  store->put("c", "{}", lease);
  EXPECT_EQ(r.events.size(), 4u) << "a callback ran after unwatch";
}

TEST(Membership, CreateRefusesALiveIdUntilItsLeaseGoes) {
  auto store = make_in_memory_membership();
  const uint64_t first = store->grant(60000);
  store->create("node-a", "{}", first);
  const uint64_t second = store->grant(60000);
  try {
    store->create("node-a", "{}", second);
    FAIL() << "a second create of a live id succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.detail().find("node-a"), std::string::npos) << e.detail();
  }
  store->revoke(first);
  store->create("node-a", "{}", second);  // free again
  EXPECT_EQ(store->list().members.size(), 1u);
}

TEST(Membership, LeasesExpireUnlessRenewed) {
  auto store = make_in_memory_membership();
  Recorder r;
  store->watch(1, r.fn());
  const uint64_t short_lease = store->grant(50);
  const uint64_t renewed = store->grant(50);
  store->put("gone", "{}", short_lease);
  store->put("kept", "{}", renewed);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store->renew(renewed);
  }
  store->expire();
  const MemberSnapshot s = store->list();
  ASSERT_EQ(s.members.size(), 1u);
  EXPECT_EQ(s.members[0].id, "kept");
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[2].kind, MemberEvent::Kind::Delete);
  EXPECT_EQ(r.events[2].id, "gone");
  try {
    store->renew(short_lease);
    FAIL() << "an expired lease was renewed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_NOT_FOUND);
  }
  EXPECT_THROW(store->put("x", "{}", short_lease), Error);
}

TEST(Membership, BadInputIsRefused) {
  auto store = make_in_memory_membership();
  EXPECT_THROW(store->grant(0), Error);
  const uint64_t lease = store->grant(1000);
  EXPECT_THROW(store->put("", "{}", lease), Error);
  EXPECT_THROW(store->put("a/b", "{}", lease), Error);
  EXPECT_THROW(store->watch(1, nullptr), Error);
  EXPECT_TRUE(store->list().members.empty());
}

TEST(Membership, ACallbackMayChangeTheStoreAndEndItsOwnWatch) {
  auto store = make_in_memory_membership();
  const uint64_t lease = store->grant(60000);
  uint64_t w = 0;
  int calls = 0;
  w = store->watch(1, [&](const MemberEvent& e) {
    ++calls;
    if (e.id == "a") store->put("b", "{}", lease);
    if (e.id == "b") store->unwatch(w);
  });
  store->put("a", "{}", lease);
  store->put("c", "{}", lease);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(store->list().members.size(), 3u);
}

}  // namespace
}  // namespace genie
