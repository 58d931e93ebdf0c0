// The master's side of the cluster: a `genie serve` process (a Server) that
// answers Probes with its backends, records every node that heartbeats to
// it, marks a node lost once it has been silent past the heartbeat timeout
// (checked every heartbeat interval), forgets lost nodes after ten
// timeouts, and answers each heartbeat with its view: itself (with its own
// GPUs and health) and every node it tracks. It runs on the server's loop
// thread through the ServerOptions hooks; node joins, losses and returns
// are logged at INFO.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/discovery.hpp"
#include "cluster/gpu_monitor.hpp"
#include "cluster/health.hpp"
#include "cluster/types.hpp"
#include "control/server.hpp"
#include "core/config.hpp"

namespace genie {

class ClusterMaster {
 public:
  // Probes this host's backends (RDMA; DPDK is not probed here).
  explicit ClusterMaster(const Config& cfg);
  ~ClusterMaster();
  ClusterMaster(const ClusterMaster&) = delete;
  ClusterMaster& operator=(const ClusterMaster&) = delete;

  // Sets the hooks of `opts`; this object must outlive the Server.
  void install(ServerOptions& opts);
  // The server's node id, once it is known.
  void set_node_id(const std::string& id);
  // Nodes tracked (not counting the master), alive ones.
  size_t alive_nodes() const;

 private:
  struct Member {
    NodeStatus status;
    std::chrono::steady_clock::time_point last_seen;
  };
  struct Tick;
  void every(uint64_t ms, void (ClusterMaster::*fn)());
  void start(LoopThread& loop);
  void stop();
  void sweep();
  void gpu_tick();
  void health_tick();
  NodeStatus self_status() const;  // with mu_ held

  const Config cfg_;
  std::string backends_json_;
  GpuMonitor gpu_;
  LoopThread* loop_ = nullptr;
  std::vector<Tick*> ticks_;
  uint64_t close_hook_ = 0;

  mutable std::mutex mu_;
  std::string node_id_;
  std::string host_;
  std::map<std::string, Member> members_;
  std::vector<GpuInfo> gpus_;
  std::string gpu_reason_;
  HealthReport health_;
};

}  // namespace genie
