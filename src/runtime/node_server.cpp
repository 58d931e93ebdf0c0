#include "runtime/node_server.hpp"

#include "core/log.hpp"
#include "runtime/multinode.hpp"

namespace genie {

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
  opts.num_threads = cfg.num_threads;
  opts.memory_budget = static_cast<uint64_t>(cfg.memory_budget_bytes);
  opts.quota = {static_cast<uint64_t>(cfg.session_max_bytes), static_cast<uint64_t>(cfg.session_max_tensors),
                static_cast<uint64_t>(cfg.session_max_graphs)};
  opts.node_id = cfg.node_id;
  opts.join_host = join_host;
  opts.join_port = join_port;
  opts.client_timeout_ms = cfg.timeout_ms;
  opts.data_transports = cfg.serve_transports;
  opts.link_transport = cfg.transport;
  opts.orchestrator = [](const std::string& node_id, const Config& c, Executor& exec,
                         OrchestratorHooks hooks) {
    return std::make_unique<MultiNode>(node_id, c, exec, std::move(hooks));
  };
  master_ = std::make_unique<ClusterMaster>(cfg);
  master_->install(opts);
  server_ = std::make_unique<Server>(std::move(opts));
  master_->set_node_id(server_->node_id());
}

NodeServer::~NodeServer() { server_.reset(); }

}  // namespace genie
