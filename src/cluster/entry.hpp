// Which server a client enters a cluster on etcd through
// (docs/cluster.md, "A cluster on etcd"): every live server registered
// under the cluster, in the order the client tries them.
#pragma once

#include <string>
#include <vector>

#include "core/config.hpp"

namespace genie {

struct EntryServer {
  std::string node_id;
  std::string host;
  int port = 0;
};

// The servers registered in cfg's etcd cluster that serve at a host:port:
// healthy ones before degraded, then unhealthy, then critical; within a
// level, by a rendezvous hash of (client_node, server id), so that clients
// spread evenly over the servers and one client keeps going to the same
// server while it lives. A client tries them in turn: a server that died
// keeps its key until its lease runs out, and the next one is tried then.
// Throws what opening the store throws (UNSUPPORTED without the plugin,
// CONNECTION naming the endpoints), and NOT_FOUND when no server is
// registered.
std::vector<EntryServer> entry_servers(const Config& cfg, const std::string& client_node);

}  // namespace genie
