#include "cluster/membership.hpp"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace genie {

namespace {

using Clock = std::chrono::steady_clock;

class InMemoryMembership final : public MembershipStore {
 public:
  uint64_t grant(int64_t ttl_ms) override {
    check(ttl_ms > 0, GENIE_ERR_INVALID_ARGUMENT, "lease TTL ", ttl_ms, " ms must be positive");
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t id = next_lease_++;
    leases_[id] = Lease{std::chrono::milliseconds(ttl_ms), Clock::now() + std::chrono::milliseconds(ttl_ms)};
    return id;
  }

  void renew(uint64_t lease) override {
    std::lock_guard<std::mutex> lk(mu_);
    Lease& l = live_lease(lease);
    l.deadline = Clock::now() + l.ttl;
  }

  void revoke(uint64_t lease) override {
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    std::vector<MemberEvent> events;
    {
      std::lock_guard<std::mutex> lk(mu_);
      drop_lease(lease, events);
    }
    deliver(events);
  }

  void create(const std::string& id, const std::string& value, uint64_t lease) override {
    write(id, value, lease, true);
  }

  void put(const std::string& id, const std::string& value, uint64_t lease) override {
    write(id, value, lease, false);
  }

  void remove(const std::string& id) override {
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    std::vector<MemberEvent> events;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return;
      erase(it, events);
    }
    deliver(events);
  }

  MemberSnapshot list() override {
    std::lock_guard<std::mutex> lk(mu_);
    MemberSnapshot s;
    s.revision = revision_;
    s.members.reserve(entries_.size());
    for (const auto& [id, e] : entries_) s.members.push_back({id, e.value, e.revision});
    return s;
  }

  uint64_t watch(int64_t /*from_revision*/, MemberWatchFn fn) override {
    check(fn != nullptr, GENIE_ERR_INVALID_ARGUMENT, "a watch needs a callback");
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t id = next_watch_++;
    watches_[id] = Watch{std::make_shared<MemberWatchFn>(std::move(fn)), 0, {}};
    return id;
  }

  void unwatch(uint64_t watch_id) override {
    std::unique_lock<std::mutex> lk(mu_);
    auto it = watches_.find(watch_id);
    if (it == watches_.end()) return;
    // Wait for a delivery in progress on another thread.
    cv_.wait(lk, [&] {
      auto w = watches_.find(watch_id);
      return w == watches_.end() || w->second.running == 0 || w->second.runner == std::this_thread::get_id();
    });
    watches_.erase(watch_id);
  }

  void expire() override {
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    std::vector<MemberEvent> events;
    {
      std::lock_guard<std::mutex> lk(mu_);
      const auto now = Clock::now();
      std::vector<uint64_t> due;
      for (const auto& [id, l] : leases_)
        if (l.deadline <= now) due.push_back(id);
      for (uint64_t id : due) drop_lease(id, events);
    }
    deliver(events);
  }

  std::string describe() const override { return "in-memory"; }

 private:
  struct Lease {
    std::chrono::milliseconds ttl;
    Clock::time_point deadline;
  };
  struct Entry {
    std::string value;
    uint64_t lease = 0;
    int64_t revision = 0;
  };
  struct Watch {
    std::shared_ptr<MemberWatchFn> fn;
    int running = 0;
    std::thread::id runner;
  };

  Lease& live_lease(uint64_t lease) {
    auto it = leases_.find(lease);
    check(it != leases_.end(), GENIE_ERR_NOT_FOUND, "lease ", lease, " has expired or never was");
    return it->second;
  }

  void write(const std::string& id, const std::string& value, uint64_t lease, bool only_new) {
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    check_node_id(id, "member id");
    check(!id.empty(), GENIE_ERR_INVALID_ARGUMENT, "a member needs an id");
    MemberEvent ev;
    {
      std::lock_guard<std::mutex> lk(mu_);
      live_lease(lease);
      auto it = entries_.find(id);
      check(!only_new || it == entries_.end(), GENIE_ERR_INVALID_ARGUMENT, "node id '", id,
            "' is already registered by a live node");
      Entry& e = entries_[id];
      e.value = value;
      e.lease = lease;
      e.revision = ++revision_;
      ev = {MemberEvent::Kind::Put, id, value, e.revision};
    }
    deliver({std::move(ev)});
  }

  void erase(std::map<std::string, Entry>::iterator it, std::vector<MemberEvent>& events) {
    events.push_back({MemberEvent::Kind::Delete, it->first, {}, ++revision_});
    entries_.erase(it);
  }

  void drop_lease(uint64_t lease, std::vector<MemberEvent>& events) {
    leases_.erase(lease);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.lease == lease)
        erase(it++, events);
      else
        ++it;
    }
  }

  // Runs the watches for `events`, in order, without the lock held.
  void deliver(const std::vector<MemberEvent>& events) {
    if (events.empty()) return;
    std::unique_lock<std::mutex> lk(mu_);
    std::vector<uint64_t> ids;
    for (const auto& [id, w] : watches_) ids.push_back(id);
    for (uint64_t id : ids) {
      auto it = watches_.find(id);
      if (it == watches_.end()) continue;
      std::shared_ptr<MemberWatchFn> fn = it->second.fn;
      ++it->second.running;
      it->second.runner = std::this_thread::get_id();
      lk.unlock();
      try {
        for (const MemberEvent& e : events) (*fn)(e);
      } catch (const std::exception& e) {
        log(LogLevel::Error, "membership: a watch callback threw: ", e.what());
      }
      lk.lock();
      if (auto w = watches_.find(id); w != watches_.end()) --w->second.running;
      cv_.notify_all();
    }
  }

  // Held from a change to the end of its delivery, so that every watch sees
  // the changes in revision order; recursive: a callback may change the store.
  std::recursive_mutex order_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Lease> leases_;
  std::map<std::string, Entry> entries_;
  std::map<uint64_t, Watch> watches_;
  uint64_t next_lease_ = 1;
  uint64_t next_watch_ = 1;
  int64_t revision_ = 0;
};

}  // namespace

std::unique_ptr<MembershipStore> make_in_memory_membership() { return std::make_unique<InMemoryMembership>(); }

}  // namespace genie
