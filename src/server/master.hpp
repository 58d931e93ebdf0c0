// The master's side of the cluster: a `genie serve` process (a Server) that
// answers Probes with its backends, records every node that heartbeats to
// it, marks a node lost once it has been silent past the heartbeat timeout
// (checked every heartbeat interval), forgets lost nodes after ten
// timeouts, and answers each heartbeat with its view: itself (with its own
// GPUs and health) and every node it tracks. Bounded: at most 4096 nodes,
// 16 KiB per node status, a view of at most 4 MiB (nodes past it left out,
// lost ones first) rebuilt at most every 200 ms. It runs on the server's loop
// thread: the Server (server/server.hpp, ServerOptions::cluster) calls it
// directly; node joins, losses and returns are logged at INFO.
//
// Multi-node (docs/multinode.md): on a master, a worker that registers is a
// member at once (role worker, the host:port it serves on), is marked lost
// as soon as its session closes (or, like any node, after the heartbeat
// timeout), and the master places no work on a lost worker (node_alive).
// The RTT the planner uses for a worker's link is this layer's Probe
// measurement. On a worker, this object heartbeats to the master on the
// worker's session there (a timer on that session's loop thread), with its
// role, listen address, devices, GPUs and health.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cluster/discovery.hpp"
#include "cluster/gpu_monitor.hpp"
#include "cluster/health.hpp"
#include "cluster/member_cache.hpp"
#include "cluster/membership.hpp"
#include "cluster/registration.hpp"
#include "cluster/types.hpp"
#include "core/config.hpp"
#include "core/metrics.hpp"
#include "genie.pb.h"

namespace genie {

class LoopThread;
class RemoteClient;

class ClusterMaster {
 public:
  // Probes this host's backends (RDMA; DPDK is not probed here). Membership
  // goes through stores (cluster/membership.hpp): the nodes that heartbeat
  // to this server and its workers are kept in an in-memory one, and the
  // servers of a shared cluster store (`cluster`, etcd; may be null) in
  // that one; the view, node_alive and the metrics read the cache their
  // watches keep.
  explicit ClusterMaster(const Config& cfg, std::shared_ptr<MembershipStore> cluster = nullptr);
  ~ClusterMaster();
  ClusterMaster(const ClusterMaster&) = delete;
  ClusterMaster& operator=(const ClusterMaster&) = delete;

  // What the Server calls (it must not outlive this object). On the
  // server's loop thread unless said otherwise.
  // A Probe (first frame of a connection, no session): fills the reply
  // with this node's id, versions and backends.
  void answer_probe(wire::ProbeReply& r);
  // A Heartbeat on a session's control connection from `peer` ("ip:port"),
  // whose Hello named `session_node`: records the node and fills the reply
  // with the view. Throws genie::Error (answered as ErrorReply): a status
  // too large or malformed, a node heartbeating for another, too many
  // nodes.
  void answer_heartbeat(const std::string& peer, const std::string& session_node, const wire::Heartbeat& hb,
                        wire::HeartbeatReply& reply);
  // Serving has started: the sweep, GPU and health timers go on `loop`.
  void start(LoopThread& loop);
  // The loop stops: whatever start() put on it goes.
  void stop();
  // A worker, once registered with its master (constructor thread): its
  // session there (`link`) and the address it registered (host, port).
  // Heartbeats to the master on that session, on the link's loop thread,
  // until that loop stops.
  void start_worker_heartbeat(const std::shared_ptr<RemoteClient>& link, const std::string& host, int port);
  // A master: worker `node` registered from host:port offering `devices`
  // (task thread), or its session with this server went (loop thread).
  void worker_joined(const std::string& node, const std::string& host, int port,
                     const std::vector<std::string>& devices);
  void worker_left(const std::string& node);
  // The round-trip time to host:port from Probe round trips (the median of
  // five, as genie_discover reports), in seconds; 0 when it could not be
  // measured. Blocks (task thread).
  double measure_rtt(const std::string& host, int port) const;
  // The server's node id, once it is known.
  void set_node_id(const std::string& id);
  // With a cluster store: registers this server there (after set_node_id),
  // serving at host:port, with its status as value (cluster/registration.hpp)
  // and `profile` (a JSON object: its CPU's calibration, which the other
  // servers plan with; empty: none) under "profile". Throws what
  // Registration's constructor throws.
  void register_self(const std::string& host, int port, const std::string& profile = {});
  // The other servers of the cluster store, as they come and go (the peers
  // a server places stages on: server/cluster_peers.hpp). `fn(id, value)`
  // runs with the value a server registered when it joins or its value
  // changes, and with an empty value when its key goes (its lease expired
  // or was revoked): at once for every live server held now, then on the
  // store's watch thread, with this object's lock held, so it must only
  // take note (queue). This server's own key is never reported (compared
  // by node id). A new call replaces the function; null stops the calls:
  // after it returns, the old function does not run again.
  using ServerFn = std::function<void(const std::string& id, const std::string& value)>;
  void follow_servers(ServerFn fn);
  // Nodes tracked (not counting the master), alive ones.
  size_t alive_nodes() const;
  // Whether `node` may get work: not a member marked lost.
  bool node_alive(const std::string& node) const;
  // Its metrics, read at scrape time (docs/observability.md): nodes tracked
  // by state, and this host's GPUs as its last NVML poll saw them. Any
  // thread.
  std::vector<metrics::Family> metric_families() const;

 private:
  struct Member {
    NodeStatus status;
    std::string json;  // `status` encoded, for the view; empty: not yet
    std::chrono::steady_clock::time_point last_seen;
    uint64_t lease = 0;  // the store's lease its entry lives under
    bool in_cluster = false;  // from the cluster store (a server of it)
    std::string registered;   // its value there, as registered
  };
  // Writes `n` to the store under its lease (renewed, or a new one of the
  // heartbeat timeout). Without mu_ held: the watch takes it.
  void publish(const NodeStatus& n);
  // The store's watch: the cache (members_) follows the store.
  void on_member(const MemberEvent& ev, bool from_cluster);
  // The JSON array of nodes a heartbeat reply carries (with mu_ held):
  // this master, then the nodes it tracks, alive ones first, up to a
  // bounded size; rebuilt at most every 200 ms.
  const std::string& view();
  struct Tick;
  void every(uint64_t ms, void (ClusterMaster::*fn)());
  void sweep();
  void gpu_tick();
  void health_tick();
  NodeStatus self_status() const;  // with mu_ held
  void worker_heartbeat();         // the link's loop thread
  void stop_worker_heartbeat();    // the link's loop thread

  const Config cfg_;
  std::shared_ptr<MembershipStore> store_;
  uint64_t watch_ = 0;
  std::shared_ptr<MembershipStore> cluster_;
  std::unique_ptr<MemberCache> cluster_cache_;
  std::unique_ptr<Registration> registration_;
  ServerFn follow_;  // under mu_
  std::string backends_json_;
  GpuMonitor gpu_;
  LoopThread* loop_ = nullptr;
  std::vector<Tick*> ticks_;
  uint64_t close_hook_ = 0;
  // A worker's heartbeat (the link's loop thread only).
  std::weak_ptr<RemoteClient> link_;
  LoopThread* link_loop_ = nullptr;
  Tick* link_tick_ = nullptr;
  uint64_t link_hook_ = 0;
  bool hb_inflight_ = false;

  mutable std::mutex mu_;
  std::string node_id_;
  std::string host_;
  std::map<std::string, Member> members_;
  std::string view_;
  std::chrono::steady_clock::time_point view_built_;
  bool view_truncated_ = false;
  // Workers registered with this master now: a lost one is kept (not
  // forgotten by the sweep), so that it gets no work until it returns.
  std::set<std::string> workers_;
  std::vector<GpuInfo> gpus_;
  std::string listen_;  // a worker: host:port it registered (empty: not a worker)
  std::string gpu_reason_;
  HealthReport health_;
};

}  // namespace genie
