// The membership store: who is in a cluster now (docs/cluster.md).
//
// Every node is one entry: its id and a value (the node's status as JSON,
// cluster/types.hpp) written under a lease. A lease lives for its TTL unless
// renewed; when it expires, every entry written under it goes, and the
// watchers see a Delete. Every change has a store-wide revision that only
// grows: a reader takes one list() (a snapshot and its revision) and then
// watches from the next revision, so that it misses no change and needs no
// polling (the pattern of etcd's range + watch).
//
// Two implementations: InMemoryMembership (below), the view a master
// `genie serve` keeps of the nodes that heartbeat to it, and an etcd v3
// store loaded as a plugin (cluster/store_plugin.hpp), shared by every
// server of a cluster. Callers see only this interface.
//
// Errors (genie::Error): INVALID_ARGUMENT for a bad id or TTL, or an id
// that a live entry already holds (create); NOT_FOUND for a lease that has
// expired or never was (renew, put); CONNECTION when the store cannot be
// reached (a remote store: the detail names its endpoints); TIMEOUT when it
// does not answer in time. "Not found" and "unavailable" are different
// answers: a cache keeps serving through the second.
//
// Threads: every method may be called from any thread. Watch callbacks run
// on a thread of the store's choosing (the caller of the change for the
// in-memory store, the watch thread for etcd), one event at a time per
// watch, never with a lock of the store held: a callback may call the store.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace genie {

struct MemberEntry {
  std::string id;
  std::string value;
  int64_t revision = 0;  // of its last write
};

struct MemberEvent {
  // Resync: the watch lost the thread of changes (the revisions it had not
  // delivered yet were compacted away, or its stream broke and was opened
  // again, or the store's history is not the one it watched): the caller
  // lists again and keeps, of the changes that follow, those newer than
  // its list (MemberCache does both). id and value are empty.
  enum class Kind { Put, Delete, Resync };
  Kind kind = Kind::Put;
  std::string id;
  std::string value;  // empty for Delete and Resync
  int64_t revision = 0;
};

struct MemberSnapshot {
  std::vector<MemberEntry> members;
  int64_t revision = 0;  // the store's revision the snapshot was read at
};

using MemberWatchFn = std::function<void(const MemberEvent&)>;

class MembershipStore {
 public:
  virtual ~MembershipStore() = default;

  // A new lease of `ttl_ms` (at least 1000 ms for a remote store, which
  // counts in whole seconds; rounded up).
  virtual uint64_t grant(int64_t ttl_ms) = 0;
  // Restarts the lease's TTL. NOT_FOUND once it has expired.
  virtual void renew(uint64_t lease) = 0;
  // Ends the lease at once: its entries go.
  virtual void revoke(uint64_t lease) = 0;
  // Writes `id` under `lease` only if no entry holds `id` (create-if-absent,
  // one transaction); INVALID_ARGUMENT naming the id when one does.
  virtual void create(const std::string& id, const std::string& value, uint64_t lease) = 0;
  // Writes `id` under `lease`, creating or replacing it.
  virtual void put(const std::string& id, const std::string& value, uint64_t lease) = 0;
  // Removes `id` (nothing when absent).
  virtual void remove(const std::string& id) = 0;
  // Every live entry and the revision they were read at.
  virtual MemberSnapshot list() = 0;
  // Calls `fn` for every change with a revision >= from_revision, in
  // revision order, until unwatch(); returns the watch's id. A change older
  // than what the store still remembers is not replayed: the watch delivers
  // one Resync event instead, then goes on from the oldest revision the
  // store still has, and the caller lists again (MemberCache). When `fn`
  // throws on a Resync, the store delivers another after a back-off.
  virtual uint64_t watch(int64_t from_revision, MemberWatchFn fn) = 0;
  // After it returns, the watch's callback does not run (unless called from
  // that callback, which then finishes).
  virtual void unwatch(uint64_t watch_id) = 0;
  // A store that keeps its leases itself (in-memory) expires the ones past
  // their TTL here; a remote store (etcd) expires them on its own.
  virtual void expire() {}
  // What the store is, for logs and errors ("in-memory", "etcd at
  // http://127.0.0.1:2379 (cluster 'default')").
  virtual std::string describe() const = 0;
};

// Leases and entries in this process's memory: the master's view of the
// nodes that heartbeat to it. Leases expire at expire() (the master calls it
// every heartbeat interval), watch replays nothing older than the watch
// (from_revision below the current one starts at the current one).
std::unique_ptr<MembershipStore> make_in_memory_membership();

}  // namespace genie
