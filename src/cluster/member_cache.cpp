#include "cluster/member_cache.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"

namespace genie {

MemberCache::MemberCache(std::shared_ptr<MembershipStore> store, MemberWatchFn on_change)
    : store_(std::move(store)), on_change_(std::move(on_change)) {
  check(store_ != nullptr, GENIE_ERR_INVALID_ARGUMENT, "a member cache needs a store");
  const MemberSnapshot first = store_->list();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const MemberEntry& m : first.members) held_[m.id] = m;
    listed_ = revision_ = first.revision;
  }
  if (on_change_)
    for (const MemberEntry& m : first.members)
      on_change_({MemberEvent::Kind::Put, m.id, m.value, m.revision});
  watch_ = store_->watch(first.revision + 1, [this](const MemberEvent& ev) { on_event(ev); });
}

MemberCache::~MemberCache() { store_->unwatch(watch_); }

MemberSnapshot MemberCache::snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  MemberSnapshot s;
  s.revision = revision_;
  s.members.reserve(held_.size());
  for (const auto& [id, m] : held_) s.members.push_back(m);
  return s;
}

size_t MemberCache::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return held_.size();
}

uint64_t MemberCache::resyncs() const {
  std::lock_guard<std::mutex> lk(mu_);
  return resyncs_;
}

void MemberCache::on_event(const MemberEvent& ev) {
  std::vector<MemberEvent> out;
  if (ev.kind == MemberEvent::Kind::Resync) {
    out = resync();  // throws when the store cannot list: it retries
  } else {
    std::lock_guard<std::mutex> lk(mu_);
    // Older than the last list: already in it.
    if (ev.revision <= listed_) return;
    revision_ = std::max(revision_, ev.revision);
    if (ev.kind == MemberEvent::Kind::Put) {
      held_[ev.id] = {ev.id, ev.value, ev.revision};
    } else {
      if (held_.erase(ev.id) == 0) return;
    }
    out.push_back(ev);
  }
  if (on_change_)
    for (const MemberEvent& e : out) on_change_(e);
}

std::vector<MemberEvent> MemberCache::resync() {
  MemberSnapshot now;
  try {
    now = store_->list();
  } catch (const std::exception& e) {
    log(LogLevel::Warn, "cluster: listing ", store_->describe(), " again failed (", e.what(),
        "): serving the last view until it answers");
    throw;
  }
  std::vector<MemberEvent> out;
  std::lock_guard<std::mutex> lk(mu_);
  std::map<std::string, MemberEntry> fresh;
  for (MemberEntry& m : now.members) {
    auto it = held_.find(m.id);
    if (it == held_.end() || it->second.value != m.value)
      out.push_back({MemberEvent::Kind::Put, m.id, m.value, m.revision});
    fresh.emplace(m.id, std::move(m));
  }
  for (const auto& [id, m] : held_)
    if (!fresh.count(id)) out.push_back({MemberEvent::Kind::Delete, id, {}, now.revision});
  held_ = std::move(fresh);
  // The list is the truth, even when the store's history went back.
  listed_ = revision_ = now.revision;
  ++resyncs_;
  log(LogLevel::Info, "cluster: listed ", store_->describe(), " again at revision ", now.revision, ": ",
      out.size(), " change(s) since the last view");
  return out;
}

}  // namespace genie
