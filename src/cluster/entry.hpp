// A client's look at a cluster on etcd (docs/cluster.md, "A cluster on
// etcd"): which server it enters through (every live server registered
// under the cluster, in the order it tries them), and the members as
// `genie discover --etcd` lists them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/membership.hpp"
#include "core/config.hpp"

namespace genie {

struct EntryServer {
  std::string node_id;
  std::string host;
  int port = 0;
  int64_t lease_ttl_ms = 0;  // its lease's TTL, as it registered it (0: not said)
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

// The etcd store of cfg's endpoints and cluster, as a client opens it (one
// request at most min(timeout, 5 s)). Throws INVALID_ARGUMENT without
// endpoints, and what open_membership_store throws.
std::shared_ptr<MembershipStore> open_cluster_store(const Config& cfg);

// One list of the store, as JSON (genie_cluster_members in genie.h):
// {"store", "cluster", "revision", "members": [each member's registered
// status with its "id" and "revision"; one that does not parse: "id",
// "revision", "error"]}, by id.
std::string members_json(MembershipStore& store, const std::string& cluster);

}  // namespace genie
