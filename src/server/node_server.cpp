#include "server/node_server.hpp"

#include <unistd.h>

#include <algorithm>

#include "cluster/store_plugin.hpp"
#include "core/host.hpp"
#include "core/log.hpp"
#include "core/memory.hpp"
#include "server/multinode.hpp"

namespace genie {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

metrics::Family family(const char* name, const char* help, bool counter, double value) {
  return {name, help, counter, {{{}, value}}};
}

// A server's ServerInfo as metric families (docs/observability.md).
std::vector<metrics::Family> server_families(const ServerStats& s, uint64_t budget, const SessionQuota& q) {
  std::vector<metrics::Family> f;
  f.push_back(
      family("genie_sessions", "Live sessions, connected or in their grace period.", false, s.sessions()));
  f.push_back(family("genie_tensors", "Tensors held across all sessions.", false, double(s.tensors())));
  f.push_back(family("genie_tensor_memory_bytes", "Bytes the tensors held across all sessions take.", false,
                     double(s.tensor_bytes())));
  f.push_back(family("genie_memory_budget_bytes",
                     "What tensors and graphs in flight may hold in all (the server's memory budget).", false,
                     double(budget)));
  // The quotas as the server applies them (a 0 setting: its default).
  f.push_back(family("genie_session_quota_bytes", "What one session's tensors and graphs in flight may hold.",
                     false, double(q.max_bytes ? q.max_bytes : budget)));
  f.push_back(family("genie_session_quota_tensors", "Tensors one session may hold.", false,
                     double(q.max_tensors ? q.max_tensors : SessionQuota::kDefaultTensors)));
  f.push_back(family("genie_session_quota_graphs", "Graphs one session may have in flight.", false,
                     double(q.max_graphs ? q.max_graphs : SessionQuota::kDefaultGraphs)));
  f.push_back(
      family("genie_uptime_seconds", "Seconds since the server started.", false, s.uptime_ms() / 1e3));
  f.push_back(family("genie_connections_refused_total",
                     "Connections closed for a failed handshake, a protocol error or a limit.", true,
                     double(s.connections_refused())));
  f.push_back({"genie_graph_submits_total",
               "Graph submissions received, as full graphs or as deltas.",
               true,
               {{{{"kind", "full"}}, double(s.graph_submits_full())},
                {{{"kind", "delta"}}, double(s.graph_submits_delta())}}});
  f.push_back(family("genie_graph_submit_bytes_total", "Bytes of the graph submission frames received.", true,
                     double(s.graph_submit_bytes())));
  f.push_back(family("genie_graph_delta_unknown_base_total",
                     "Graph deltas refused because this server did not hold their base.", true,
                     double(s.graph_delta_unknown_base())));
  f.push_back(family("genie_workers", "Workers joined to this master and live.", false, s.workers()));
  f.push_back(family("genie_multinode_graphs_total", "Graphs this master planned across nodes.", true,
                     double(s.multinode_graphs())));
  metrics::Family by_role{"genie_server_transfer_bytes_total",
                          "Tensor bytes moved between servers for multi-node graphs, by the value's role.",
                          true,
                          {}};
  for (const auto& [role, bytes] : s.server_transfer_bytes_by_role())
    by_role.samples.push_back({{{"role", role}}, double(bytes)});
  if (by_role.samples.empty()) by_role.samples.push_back({{{"role", "none"}}, 0});
  f.push_back(std::move(by_role));
  f.push_back(family("genie_direct_transfer_bytes_total",
                     "Tensor bytes moved between two workers directly, never through this master.", true,
                     double(s.direct_transfer_bytes())));
  f.push_back({"genie_peer_bytes_total",
               "Tensor bytes exchanged with other servers, by direction.",
               true,
               {{{{"direction", "fetch"}}, double(s.peer_fetch_bytes())},
                {{{"direction", "export"}}, double(s.peer_export_bytes())}}});
  metrics::Family conns{"genie_data_connections_total", "Data connections admitted, by transport.", true, {}};
  for (const auto& [transport, n] : s.data_connections())
    conns.samples.push_back({{{"transport", transport}}, double(n)});
  if (!conns.samples.empty()) f.push_back(std::move(conns));
  return f;
}

// The address other servers and clients dial: this machine's host name
// for a wildcard listener.
std::string advertise_address(const std::string& host) {
  if (host != "0.0.0.0" && host != "::") return host;
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : host;
}

}  // namespace

NodeServer::NodeServer(Config cfg, const std::string& host, int port) {
  const std::string join_host = cfg.master_addr;
  const int32_t join_port = cfg.master_port;
  cfg.apply_env();
  cfg.validate();
  set_log_level(cfg.log_level);
  ServerOptions opts;
  opts.host = host.empty() ? "127.0.0.1" : host;
  opts.port = port;
  opts.auth_token = cfg.auth_token;
  opts.allow_insecure = cfg.allow_insecure;
  opts.tls_cert = cfg.tls_cert;
  opts.tls_key = cfg.tls_key;
  opts.tls_ca = cfg.tls_ca;
  opts.session_grace_ms = cfg.session_grace_ms;
  opts.session_idle_ms = cfg.session_idle_ms;
  opts.handshake_timeout_ms = cfg.handshake_timeout_ms;
  opts.max_connections = cfg.max_connections;
  opts.max_connections_per_source = cfg.max_connections_per_source;
  opts.max_sessions = cfg.max_sessions;
  opts.max_message_bytes = static_cast<uint32_t>(cfg.max_message_bytes);
  opts.max_graph_bytes = static_cast<uint64_t>(cfg.max_graph_bytes);
  opts.max_graph_nodes = static_cast<uint64_t>(cfg.max_graph_nodes);
  opts.stage_timeout_ms = cfg.stage_timeout_ms;
  opts.session_max_stages = cfg.session_max_stages;
  opts.num_threads = cfg.num_threads;
  opts.memory_budget = static_cast<uint64_t>(cfg.memory_budget_bytes);
  opts.quota = {static_cast<uint64_t>(cfg.session_max_bytes), static_cast<uint64_t>(cfg.session_max_tensors),
                static_cast<uint64_t>(cfg.session_max_graphs)};
  opts.node_id = cfg.node_id;
  opts.join_host = join_host;
  opts.join_port = join_port;
  opts.client_timeout_ms = cfg.timeout_ms;
  // On etcd, a server's calls to another server (and its reconnect window
  // there) end within the lease TTL: a server that does not answer again
  // within it has lost its key by then (docs/cluster.md).
  if (!cfg.etcd_endpoints.empty()) opts.client_timeout_ms = std::min(cfg.timeout_ms, cfg.etcd_lease_ttl_ms);
  opts.data_transports = cfg.serve_transports;
  opts.link_transport = cfg.transport;
  opts.multinode = true;
  // As the server takes it (0: its default share of the memory at start).
  const uint64_t budget = opts.memory_budget ? opts.memory_budget : default_memory_budget(read_host_memory());
  std::shared_ptr<MembershipStore> cluster;
  if (!cfg.etcd_endpoints.empty())
    cluster = open_membership_store(
        "etcd", StoreOptions{cfg.etcd_endpoints, cfg.cluster, std::min<int64_t>(cfg.timeout_ms, 5000)});
  master_ = std::make_unique<ClusterMaster>(cfg, cluster);
  const std::string advertise = opts.advertise_host.empty() ? opts.host : opts.advertise_host;
  opts.cluster = master_.get();
  server_ = std::make_unique<Server>(std::move(opts));
  master_->set_node_id(server_->node_id());
  if (cluster) {
    // Its CPU's calibration goes into its key: the others plan with it.
    master_->register_self(advertise_address(advertise), server_->port(),
                           profile_to_json(server_->multinode()->local_profile()));
    peers_ = std::make_unique<ClusterPeers>(*master_, *server_->multinode());
  }
  if (cfg.metrics_port >= 0) serve_metrics(cfg, budget);
}

void NodeServer::serve_metrics(const Config& cfg, uint64_t budget) {
  // The control port's exposure rule (docs/security.md): beyond loopback
  // only when clients must authenticate, or when allowed explicitly.
  const bool authenticated = !cfg.auth_token.empty() || !cfg.tls_ca.empty();
  check(is_loopback(cfg.metrics_addr) || authenticated || cfg.allow_insecure, GENIE_ERR_INVALID_ARGUMENT,
        "refusing to serve metrics on ", cfg.metrics_addr,
        " for a server without authentication: serve them on 127.0.0.1, set an auth token or client "
        "certificates, or allow it explicitly (genie serve --insecure, GENIE_ALLOW_INSECURE=1)");
  exposure_ = metrics::expose(cfg.metrics_addr, cfg.metrics_port);
  if (!is_loopback(cfg.metrics_addr))
    log(LogLevel::Warn, "server: metrics served on ", cfg.metrics_addr, ":", exposure_->port(),
        " without authentication (they show counts, never tensor data)");
  const SessionQuota quota{static_cast<uint64_t>(cfg.session_max_bytes),
                           static_cast<uint64_t>(cfg.session_max_tensors),
                           static_cast<uint64_t>(cfg.session_max_graphs)};
  collector_ = metrics::add_collector([this, budget, quota] {
    std::vector<metrics::Family> f = server_families(server_->stats(), budget, quota);
    for (metrics::Family& m : master_->metric_families()) f.push_back(std::move(m));
    return f;
  });
}

NodeServer::~NodeServer() {
  collector_.reset();
  peers_.reset();
  server_.reset();
}

}  // namespace genie
