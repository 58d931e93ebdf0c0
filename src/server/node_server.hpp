// A server node (`genie serve`, genie_server_create): a Server with its
// cluster role (ClusterMaster: probes, heartbeats, node tracking, the
// cluster store) and multi-node orchestration (on etcd, over the other
// servers of its cluster: ClusterPeers), and its metrics endpoint.
#pragma once

#include <memory>
#include <string>

#include "core/config.hpp"
#include "core/metrics.hpp"
#include "server/cluster_peers.hpp"
#include "server/master.hpp"
#include "server/server.hpp"

namespace genie {

class NodeServer {
 public:
  // Serves on host:port (empty host: 127.0.0.1; port 0: a free one) with
  // the settings of `cfg` (auth token, grace period, threads, limits). A
  // `cfg.master_addr` makes this server a worker of that master; the
  // environment is applied after it is read (GENIE_MASTER_ADDR points
  // clients at a server and must not turn servers into workers). Throws
  // what Server's constructor throws.
  NodeServer(Config cfg, const std::string& host, int port);
  // Stops and waits.
  ~NodeServer();

  int port() const { return server_->port(); }
  const std::string& node_id() const { return server_->node_id(); }
  void stop() { server_->stop(); }
  void wait() { server_->wait(); }
  ServerStats stats() const { return server_->stats(); }
  // The port of the metrics endpoint (cfg.metrics_port), -1: none.
  int metrics_port() const { return exposure_ ? exposure_->port() : -1; }

 private:
  // Serves cfg's metrics endpoint with this server's values in it.
  void serve_metrics(const Config& cfg, uint64_t budget);

  std::unique_ptr<ClusterMaster> master_;  // outlives server_, which calls it on its loop
  std::unique_ptr<Server> server_;
  std::unique_ptr<ClusterPeers> peers_;  // on etcd: the other servers in server_'s registry
  std::shared_ptr<metrics::Exposure> exposure_;
  std::shared_ptr<void> collector_;  // reads server_ and master_: released first
};

}  // namespace genie
