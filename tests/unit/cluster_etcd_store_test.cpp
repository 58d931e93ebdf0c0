// The etcd membership store plugin against a real etcd started here
// (cluster/etcd/store.cpp): unreachable at start, create-if-absent, list and
// watch from a revision, lease expiry, and etcd stopped and restarted under
// a watch; a member cache whose watch fell behind a compaction lists again.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "cluster/member_cache.hpp"
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
  // Waits until an event of `kind` for `id` (with `value`, when given) has arrived.
  bool wait(MemberEvent::Kind kind, const std::string& id, std::chrono::milliseconds within,
            const char* value = nullptr) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, within, [&] {
      for (const auto& e : got)
        if (e.kind == kind && e.id == id && (!value || e.value == value)) return true;
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
  // It cannot know what it missed while the stream was down: it says so.
  EXPECT_TRUE(ev.wait(MemberEvent::Kind::Resync, "", 1s)) << "no Resync after the stream broke";
}

// A store whose watches start only when released: a reader that has fallen
// behind (its watch not yet reading) while others write and etcd compacts.
class HeldWatches final : public MembershipStore {
 public:
  explicit HeldWatches(std::shared_ptr<MembershipStore> s) : s_(std::move(s)) {}
  uint64_t grant(int64_t ttl_ms) override { return s_->grant(ttl_ms); }
  void renew(uint64_t lease) override { s_->renew(lease); }
  void revoke(uint64_t lease) override { s_->revoke(lease); }
  void create(const std::string& id, const std::string& v, uint64_t lease) override {
    s_->create(id, v, lease);
  }
  void put(const std::string& id, const std::string& v, uint64_t lease) override { s_->put(id, v, lease); }
  void remove(const std::string& id) override { s_->remove(id); }
  MemberSnapshot list() override { return s_->list(); }
  uint64_t watch(int64_t from, MemberWatchFn fn) override {
    from_ = from;
    fn_ = std::move(fn);
    return 1;
  }
  void unwatch(uint64_t) override {
    if (id_ != 0) s_->unwatch(id_);
    id_ = 0;
  }
  std::string describe() const override { return s_->describe(); }
  void release() { id_ = s_->watch(from_, fn_); }
  int64_t from() const { return from_; }

 private:
  std::shared_ptr<MembershipStore> s_;
  int64_t from_ = 0;
  MemberWatchFn fn_;
  uint64_t id_ = 0;
};

TEST_F(EtcdStoreTest, ACacheBehindACompactionListsAgainAndReportsTheDifference) {
  const std::string etcdctl = testing::etcdctl_binary();
  if (etcdctl.empty()) GTEST_SKIP() << "etcdctl is not installed (Debian etcd-client)";
  auto writer = open();
  const uint64_t la = writer->grant(60000), lb = writer->grant(60000), lc = writer->grant(60000);
  writer->create("a", "a1", la);
  writer->create("b", "b1", lb);
  auto held = std::make_shared<HeldWatches>(open());
  Events ev;
  MemberCache cache(held, ev.fn());
  ASSERT_EQ(cache.size(), 2u);
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    ASSERT_EQ(ev.got.size(), 2u);  // the first list, as Puts
    ev.got.clear();
  }
  // While the cache's watch is behind: a changes, b leaves, c joins, d comes
  // and goes; then etcd forgets those revisions.
  writer->put("a", "a2", la);
  writer->revoke(lb);
  writer->create("c", "c1", lc);
  writer->create("d", "d1", lc);
  writer->remove("d");
  const int64_t now = writer->list().revision;
  ASSERT_GT(now, held->from());
  const std::string compact =
      etcdctl + " --endpoints " + etcd_.endpoint() + " compact " + std::to_string(now) + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(compact.c_str()), 0) << compact;
  held->release();  // the watch starts from a compacted revision: etcd cancels it
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Delete, "b", 10s)) << "b's leaving was not reported";
  EXPECT_EQ(cache.resyncs(), 1u);
  // The watch resumed: a change after the new list arrives, once.
  writer->create("e", "e1", lc);
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Put, "e", 10s)) << "the watch did not resume after listing again";
  writer->put("a", "a3", la);
  ASSERT_TRUE(ev.wait(MemberEvent::Kind::Put, "a", 10s, "a3"));
  std::vector<std::string> seen;
  {
    std::lock_guard<std::mutex> lk(ev.mu);
    for (const MemberEvent& e : ev.got)
      seen.push_back((e.kind == MemberEvent::Kind::Put ? "+" : "-") + e.id +
                     (e.value.empty() ? "" : "=" + e.value));
  }
  // The difference (joined and changed, then left), then the changes after.
  EXPECT_EQ(seen, (std::vector<std::string>{"+a=a2", "+c=c1", "-b", "+e=e1", "+a=a3"}));
  const MemberSnapshot s = cache.snapshot();
  ASSERT_EQ(s.members.size(), 3u);
  EXPECT_EQ(s.members[0].id + s.members[0].value, "aa3");
  EXPECT_EQ(s.members[1].id, "c");
  EXPECT_EQ(s.members[2].id, "e");
}

}  // namespace
}  // namespace genie
