// The etcd membership store plugin against a real etcd started here
// (cluster/etcd/store.cpp): unreachable at start, create-if-absent, list and
// watch from a revision, lease expiry, and etcd stopped and restarted under
// a watch.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "cluster/store_plugin.hpp"
#include "core/error.hpp"
#include "etcd_testing.hpp"

namespace genie {
namespace {

using namespace std::chrono_literals;

class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("GENIE_TRANSPORT_PATH", GENIE_PLUGIN_DIR, 1);
    if (testing::etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian etcd-server)";
    ASSERT_TRUE(etcd_.start()) << "etcd did not start";
  }

  // Opens a store, giving etcd a few seconds to elect itself.
  std::shared_ptr<MembershipStore> open(const std::string& cluster = "t") {
    StoreOptions o;
    o.endpoints = {etcd_.endpoint()};
    o.cluster = cluster;
    o.timeout_ms = 2000;
    for (int i = 0;; ++i) {
      try {
        return open_membership_store("etcd", o);
      } catch (const Error& e) {
        if (i >= 50) throw;
        std::this_thread::sleep_for(100ms);
      }
    }
  }

  testing::EtcdProcess etcd_;
};

struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<MemberEvent> got;
  MemberWatchFn fn() {
    return [this](const MemberEvent& e) {
      std::lock_guard<std::mutex> lk(mu);
      got.push_back(e);
      cv.notify_all();
    };
  }
  // Waits until an event of `kind` for `id` has arrived.
  bool wait(MemberEvent::Kind kind, const std::string& id, std::chrono::milliseconds within) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, within, [&] {
      for (const auto& e : got)
        if (e.kind == kind && e.id == id) return true;
      return false;
    });
  }
};

TEST(EtcdStoreOpen, UnreachableAtStartNamesTheEndpoints) {
  ::setenv("GENIE_TRANSPORT_PATH", GENIE_PLUGIN_DIR, 1);
  StoreOptions o;
  const std::string dead = "http://127.0.0.1:" + std::to_string(testing::free_port());
  o.endpoints = {dead};
  o.timeout_ms = 1000;
  try {
    open_membership_store("etcd", o);
    FAIL() << "a store opened with no etcd behind it";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_CONNECTION) << e.detail();
    EXPECT_NE(e.detail().find(dead), std::string::npos) << e.detail();
  }
  o.endpoints = {"ftp://x"};
  EXPECT_THROW(open_membership_store("etcd", o), Error);
  o.endpoints = {dead};
  o.cluster = "a/b";
  EXPECT_THROW(open_membership_store("etcd", o), Error);
  try {
    open_membership_store("nosuchstore", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED) << e.detail();
  }
}

TEST_F(EtcdStoreTest, CreateIsRefusedForALiveIdAndListAndWatchFollow) {
  auto a = open();
  auto b = open();
  const MemberSnapshot before = b->list();
  EXPECT_TRUE(before.members.empty());
  Events ev;
  const uint64_t w = b->watch(before.revision + 1, ev.fn());
  const uint64_t la = a->grant(30000);
  a->create("node-a", R"({"id":"node-a"})", la);
  const uint64_t lb = b->grant(30000);
  try {
    b->create("node-a", "{}", lb);
    FAIL() << "a second live node-a was registered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.detail().find("node-a"), std::string::npos) << e.detail();
    EXPECT_NE(e.detail().find("already registered"), std::string::npos) << e.detail();
  }
  b->create("node-b", R"({"id":"node-b"})", lb);
  a->put("node-a", R"({"id":"node-a","v":2})", la);
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Put, "node-b", 5s));
  const MemberSnapshot now = a->list();
  ASSERT_EQ(now.members.size(), 2u);
  EXPECT_EQ(now.members[0].id, "node-a");
  EXPECT_EQ(now.members[0].value, R"({"id":"node-a","v":2})");
  // Another cluster's namespace sees none of it.
  EXPECT_TRUE(open("other")->list().members.empty());
  a->revoke(la);
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Delete, "node-a", 5s));
  a->renew(lb);
  try {
    a->renew(la);
    FAIL() << "a revoked lease was renewed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_NOT_FOUND) << e.detail();
  }
  b->unwatch(w);
  std::lock_guard<std::mutex> lk(ev.mu);
  for (size_t i = 1; i < ev.got.size(); ++i) EXPECT_GT(ev.got[i].revision, ev.got[i - 1].revision);
}

TEST_F(EtcdStoreTest, AnUnrenewedLeaseExpiresWithinItsTtl) {
  auto s = open();
  Events ev;
  s->watch(s->list().revision + 1, ev.fn());
  const uint64_t lease = s->grant(1000);
  s->create("short", "{}", lease);
  // A bound, not a timing: etcd expires it about a second later.
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Delete, "short", 10s)) << "the key outlived its lease";
  EXPECT_TRUE(s->list().members.empty());
}

TEST_F(EtcdStoreTest, AWatchResumesAfterEtcdRestartsAndMissesNothing) {
  auto writer = open();
  auto reader = open();
  Events ev;
  reader->watch(reader->list().revision + 1, ev.fn());
  const uint64_t lease = writer->grant(60000);
  writer->put("before", "{}", lease);
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Put, "before", 5s));
  etcd_.stop();
  // Unavailable is not "not found".
  try {
    writer->list();
    FAIL() << "a stopped etcd answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_CONNECTION) << e.detail();
  }
  ASSERT_TRUE(etcd_.start());
  for (int i = 0;; ++i) {
    try {
      writer->put("after", "{}", lease);
      break;
    } catch (const Error&) {
      ASSERT_LT(i, 50) << "etcd did not come back";
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_TRUE(ev.wait(MemberEvent::Kind::Put, "after", 10s)) << "the watch did not resume";
}

}  // namespace
}  // namespace genie
