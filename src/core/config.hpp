// Context configuration: defaults, builder values, GENIE_* environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "genie.h"

namespace genie {

struct Config {
  std::string master_addr;  // empty = embedded mode
  int32_t master_port = 5555;
  std::string node_id;      // empty = generated at init
  genie_node_role_t role = GENIE_NODE_ROLE_CLIENT;
  genie_backend_t backend = GENIE_BACKEND_AUTO;
  // Remote mode: the transport of data connections, by registry name
  // (dataplane/registry.hpp). `transport` is what the user demanded
  // (GENIE_TRANSPORT): the connection fails if it cannot be had.
  // `selected_transport` is the selected backend's (set at init from
  // discovery): when it cannot be had, data connections fall back to TCP.
  // Both empty: TCP.
  std::string transport;
  std::string selected_transport;
  // A server (genie serve): the data transports it offers besides TCP
  // (GENIE_SERVE_TRANSPORTS, comma-separated names).
  std::vector<std::string> serve_transports;
  LogLevel log_level = LogLevel::Warn;
  int64_t timeout_ms = 30000;
  int32_t num_threads = 0;  // 0 = hardware concurrency
  std::string auth_token;   // empty = no authentication; else at least kMinAuthTokenBytes
  // A server may listen beyond loopback without authentication only when
  // this is set (genie serve --insecure, GENIE_ALLOW_INSECURE=1).
  bool allow_insecure = false;
  // TLS 1.3 (docs/security.md, "TLS"), PEM file paths. A server (genie
  // serve) speaks TLS when tls_cert and tls_key are set, and with tls_ca
  // requires client certificates chained to it. A client speaks TLS when
  // tls_ca is set: the server's certificate must chain to it and carry
  // tls_server_name (empty: the host connected to); tls_cert and tls_key
  // are then its client certificate (optional), also used by a server when
  // it connects out (to its master, or to another server for a transfer).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  std::string tls_server_name;
  int64_t session_grace_ms = 30000;
  // A server (docs/security.md): sessions that receive nothing this long
  // end (0: never); connections not through their handshake by then close;
  // limits on connections (total, per source address) and sessions (0: no
  // limit).
  int64_t session_idle_ms = 600000;
  int64_t handshake_timeout_ms = 10000;
  int32_t max_connections = 1024;
  int32_t max_connections_per_source = 128;
  int32_t max_sessions = 1024;
  int64_t max_message_bytes = 64 << 20;
  // The largest graph a server parses: bytes of its JSON and nodes (0: no
  // limit); and, a master, how long a stage sent to a worker may take.
  int64_t max_graph_bytes = kDefaultMaxGraphBytes;
  int64_t max_graph_nodes = kDefaultMaxGraphNodes;
  int64_t stage_timeout_ms = 600000;
  static constexpr int64_t kDefaultMaxGraphBytes = int64_t{32} << 20;
  static constexpr int64_t kDefaultMaxGraphNodes = 65536;
  // A server's memory (docs/security.md, "Quotas and the memory budget"):
  // the bytes its tensors and the graphs in flight may hold (0: a share of
  // the available memory and the cgroup limit, core/memory.hpp), and what
  // one session may hold of it (bytes 0: the whole budget).
  int64_t memory_budget_bytes = 0;
  int64_t session_max_bytes = 0;
  int64_t session_max_tensors = kDefaultSessionMaxTensors;
  int64_t session_max_graphs = kDefaultSessionMaxGraphs;
  static constexpr int64_t kDefaultSessionMaxTensors = 65536;
  static constexpr int64_t kDefaultSessionMaxGraphs = 256;
  bool graph_deltas = true;  // remote mode: send graph deltas (GENIE_GRAPH_DELTAS=0 turns them off)
  // Remote mode: false runs as semantics-blind disaggregation (genie.h,
  // genie_config_set_semantics; GENIE_SEMANTICS=off).
  bool semantics = true;
  // Remote mode: synchronous tensor writes and reads, and graph submissions
  // whose completion the waiting thread reads, on the calling thread's own
  // data connection (control/client/direct.hpp); GENIE_DIRECT_CALLS=0 sends
  // them through the client's event loop instead.
  bool direct_calls = true;
  bool use_env = true;
  // Cluster monitoring (docs/cluster.md).
  int64_t heartbeat_interval_ms = 10000;
  int64_t heartbeat_timeout_ms = 60000;
  int64_t gpu_poll_interval_ms = 5000;
  int64_t health_interval_ms = 30000;
  bool dpdk_probe = true;  // genie_discover: full EAL probe in a child
  // Prometheus metrics (docs/observability.md): served over HTTP on
  // metrics_addr:metrics_port by a server (and a client context) when the
  // port is 0 (a free one) or more; -1: not served. Beyond loopback the
  // address follows the control port's exposure rule.
  int32_t metrics_port = -1;
  std::string metrics_addr = "127.0.0.1";
  // A cluster on etcd (docs/cluster.md): the etcd client URLs
  // (GENIE_ETCD_ENDPOINTS, comma-separated; empty: none), the cluster's
  // namespace there (GENIE_CLUSTER) and the TTL of a server's lease
  // (GENIE_ETCD_LEASE_TTL, ms; renewed at a third of it).
  std::vector<std::string> etcd_endpoints;
  std::string cluster = "default";
  int64_t etcd_lease_ttl_ms = 10000;

  // Applies GENIE_* environment variables when use_env is set. Throws
  // Error(INVALID_ARGUMENT) naming the variable and the value on a bad value.
  void apply_env();
  // Full validation of every field (setters validate too; this catches
  // values that came from the environment).
  void validate() const;
};

// Validators shared by the setters and the environment parser; each throws
// Error(INVALID_ARGUMENT) with a message naming `what`.
void check_node_id(const std::string& id, const char* what);
void check_port(int64_t port, const char* what);
void check_grace(int64_t ms, const char* what);
void check_max_message(int64_t bytes, const char* what);
void check_interval(int64_t ms, const char* what);  // 10..86400000
void check_limit(int64_t n, const char* what);      // 0..1000000 (0: none)
// A memory budget or session quota: 0 (the default) or a positive count.
void check_quota(int64_t value, const char* what);
// A graph limit (bytes or nodes): 0 (no limit) .. 2^40.
void check_graph_limit(int64_t value, const char* what);
// An auth token: empty (none) or kMinAuthTokenBytes..4096 bytes.
constexpr size_t kMinAuthTokenBytes = 16;
void check_auth_token(const std::string& token, const char* what);
// etcd endpoints, comma-separated, parsed and checked (at most 16, each
// 1..255 bytes without blanks).
std::vector<std::string> parse_etcd_endpoints(const std::string& list, const char* what);
void check_cluster_name(const std::string& name, const char* what);  // [A-Za-z0-9._-]{1,64}
void check_etcd_lease_ttl(int64_t ms, const char* what);             // 1000..3600000
bool is_transport_name(const std::string& name);  // [a-z0-9_]{1,64}
void check_transport_name(const std::string& name, const char* what);

const char* role_str(genie_node_role_t r);
const char* backend_str(genie_backend_t b);

}  // namespace genie
