// The other servers of a cluster on etcd as this server's workers
// (docs/cluster.md, "Placing across the cluster"): no single master. Every
// `genie serve --etcd` follows the servers registered under its cluster
// (ClusterMaster::follow_servers, from its member cache) and adds each one,
// other than itself, to its multi-node registry (MultiNode::join) exactly as
// a master adds a worker that joined it: a client session there with this
// server's credentials (auth token, TLS and client certificate), refused
// when the server answering is this one (its handshake's instance) or
// answers as another node id than the key it was registered under; its link
// measured once; its CPU priced with the calibration profile it registered
// ("profile" in its value). Any server is then an entry point that places
// stages on the others.
//
// A server whose key goes (its lease expired: it died or was cut off; or it
// stopped) leaves the registry at once: graphs bound to its tensors fail
// with CONNECTION naming it, new plans leave it out. One whose key comes
// back (NODE_RECOVERED), or whose registered address changes, is joined
// again. A join that fails (the server does not answer yet, a refusal) is
// logged and retried with a back-off (0.5 s doubling to 10 s) while its key
// lives. At most kMaxPeers servers are joined; more are logged and left out.
//
// Threads: joins block (connect, link measurement), so they run on a
// thread of this object's own, never on the store's watch thread or the
// server's loop; the follow callback only queues.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "sched/plan.hpp"

namespace genie {

class ClusterMaster;
class MultiNode;

// The calibration profile a server registers ("profile" in its value), as
// JSON, and back. profile_from_json throws Error(PROTOCOL) naming what is
// missing, and INVALID_ARGUMENT for a device other than cpu:0 or rates that
// are not positive and finite.
std::string profile_to_json(const sched::DeviceProfile& p);
sched::DeviceProfile profile_from_json(const std::string& member_value);

class ClusterPeers {
 public:
  static constexpr size_t kMaxPeers = 64;

  // Starts following `cluster`'s servers into `multinode`. Both must
  // outlive this object.
  ClusterPeers(ClusterMaster& cluster, MultiNode& multinode);
  // Stops following, waits for a join in progress (bounded by the client
  // timeout), and drops every peer it joined.
  ~ClusterPeers();
  ClusterPeers(const ClusterPeers&) = delete;
  ClusterPeers& operator=(const ClusterPeers&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  struct Peer {
    std::string listen;  // host:port it was joined at
  };
  struct Pending {
    std::string value;  // its registered value; empty: its key went
    Clock::time_point due{};
    int64_t backoff_ms = 0;
  };
  void run();
  // Applies the latest word on `id` (the peer thread, without mu_).
  // Returns false when a join failed and should be tried again.
  bool apply(const std::string& id, const std::string& value);
  void drop(const std::string& id, const std::string& why);

  ClusterMaster& cluster_;
  MultiNode& multinode_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, Pending> pending_;  // by id: the latest word not applied yet
  // Peer thread only: the peers joined, by id (the address of each is the
  // registration token MultiNode keeps: a new one per join).
  std::map<std::string, std::unique_ptr<Peer>> joined_;
  std::thread thread_;
};

}  // namespace genie
