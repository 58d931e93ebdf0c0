// A reader's view of a membership store (cluster/membership.hpp): filled by
// one list(), then kept current by a watch from the revision after it, so
// that changes arrive without polling (docs/cluster.md, "A cluster on
// etcd"). When the watch loses the thread (a Resync: the revisions it was
// behind on were compacted, or its stream broke), the cache lists again,
// compares the new list with what it held, reports the members that joined,
// changed or left meanwhile as Put and Delete events, and keeps, of the
// changes the watch delivers after that, only those newer than the new
// list. A change is never reported twice nor lost while the store keeps
// answering.
//
// Errors: the constructor throws what the store's list() throws (CONNECTION
// naming the endpoints); a list that fails on a Resync is logged and
// retried by the store after a back-off, the cache serving its last view
// meanwhile.
//
// Threads: snapshot() and the counters from any thread. `on_change` runs on
// the constructing thread for the first list, then on the store's watch
// thread, one event at a time, in order, without the cache's lock held (it
// may call snapshot()); it must not destroy the cache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/membership.hpp"

namespace genie {

class MemberCache {
 public:
  // Lists `store` and reports each member to `on_change` as a Put (may be
  // null), then watches it.
  MemberCache(std::shared_ptr<MembershipStore> store, MemberWatchFn on_change);
  // Stops the watch: on_change does not run after it returns.
  ~MemberCache();
  MemberCache(const MemberCache&) = delete;
  MemberCache& operator=(const MemberCache&) = delete;

  // The members held now, by id, and the revision the view is current to.
  MemberSnapshot snapshot() const;
  size_t size() const;
  // How many times the cache listed the store again after a Resync.
  uint64_t resyncs() const;

 private:
  void on_event(const MemberEvent& ev);
  // Lists again; the differences with what was held, as events.
  std::vector<MemberEvent> resync();

  std::shared_ptr<MembershipStore> store_;
  MemberWatchFn on_change_;
  mutable std::mutex mu_;
  std::map<std::string, MemberEntry> held_;
  int64_t listed_ = 0;    // the revision of the last list: older changes are in it
  int64_t revision_ = 0;  // the newest change applied
  uint64_t resyncs_ = 0;
  uint64_t watch_ = 0;
};

}  // namespace genie
