#include "core/config.hpp"

#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace genie {

namespace {

int64_t parse_int(const char* var, const char* text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  check(errno == 0 && end != text && *end == '\0', GENIE_ERR_INVALID_ARGUMENT, var, "='", text,
        "' is not an integer");
  return v;
}

template <class Enum, size_t N>
Enum parse_enum(const char* var, const char* text, const char* const (&names)[N], const Enum (&vals)[N]) {
  std::string choices;
  for (size_t i = 0; i < N; ++i) {
    if (strcasecmp(text, names[i]) == 0) return vals[i];
    choices += (i ? "|" : "");
    choices += names[i];
  }
  fail(GENIE_ERR_INVALID_ARGUMENT, var, "='", text, "' is not one of ", choices);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

// Each variable of `vars` that is set, parsed and checked by `check_value`
// (which names the variable), into its field.
template <class T, size_t N>
void read_numbers(const std::pair<const char*, T*> (&vars)[N], void (*check_value)(int64_t, const char*)) {
  for (const auto& [name, field] : vars) {
    if (const char* v = env(name)) {
      const int64_t n = parse_int(name, v);
      check_value(n, name);
      *field = static_cast<T>(n);
    }
  }
}

}  // namespace

void check_node_id(const std::string& id, const char* what) {
  check(id.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, what, " is longer than 255 bytes");
  for (char c : id)
    check(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-',
          GENIE_ERR_INVALID_ARGUMENT, what, " '", id, "' may hold only [A-Za-z0-9._-]");
}

void check_auth_token(const std::string& token, const char* what) {
  check(token.size() <= 4096, GENIE_ERR_INVALID_ARGUMENT, what, " is longer than 4096 bytes");
  check(token.empty() || token.size() >= kMinAuthTokenBytes, GENIE_ERR_INVALID_ARGUMENT, what, " has ",
        token.size(), " bytes: a shared secret needs at least ", kMinAuthTokenBytes,
        " (a guessable token protects nothing); e.g. 32 random bytes in hex");
}

void check_port(int64_t port, const char* what) {
  check(port >= 1 && port <= 65535, GENIE_ERR_INVALID_ARGUMENT, what, " ", port, " is outside 1..65535");
}

void Config::apply_env() {
  if (!use_env) return;
  if (const char* v = env("GENIE_MASTER_ADDR")) master_addr = v;
  if (const char* v = env("GENIE_MASTER_PORT")) {
    const int64_t p = parse_int("GENIE_MASTER_PORT", v);
    check_port(p, "GENIE_MASTER_PORT");
    master_port = static_cast<int32_t>(p);
  }
  if (const char* v = env("GENIE_NODE_ID")) {
    check_node_id(v, "GENIE_NODE_ID");
    node_id = v;
  }
  if (const char* v = env("GENIE_NODE_ROLE")) {
    static const char* const names[] = {"client", "server", "worker"};
    static const genie_node_role_t vals[] = {GENIE_NODE_ROLE_CLIENT, GENIE_NODE_ROLE_SERVER,
                                             GENIE_NODE_ROLE_WORKER};
    role = parse_enum("GENIE_NODE_ROLE", v, names, vals);
  }
  if (const char* v = env("GENIE_BACKEND")) {
    static const char* const names[] = {"auto", "tcp", "rdma", "dpdk", "dpdk_gpudev", "ucx"};
    static const genie_backend_t vals[] = {GENIE_BACKEND_AUTO, GENIE_BACKEND_TCP, GENIE_BACKEND_RDMA,
                                           GENIE_BACKEND_DPDK, GENIE_BACKEND_DPDK_GPUDEV, GENIE_BACKEND_UCX};
    backend = parse_enum("GENIE_BACKEND", v, names, vals);
  }
  if (const char* v = env("GENIE_LOG_LEVEL")) {
    static const char* const names[] = {"off", "error", "warn", "info", "debug", "trace"};
    static const LogLevel vals[] = {LogLevel::Off,  LogLevel::Error, LogLevel::Warn,
                                    LogLevel::Info, LogLevel::Debug, LogLevel::Trace};
    log_level = parse_enum("GENIE_LOG_LEVEL", v, names, vals);
  }
  if (const char* v = env("GENIE_TIMEOUT")) {
    const int64_t t = parse_int("GENIE_TIMEOUT", v);
    check(t > 0, GENIE_ERR_INVALID_ARGUMENT, "GENIE_TIMEOUT=", v,
          " must be a positive number of milliseconds");
    timeout_ms = t;
  }
  if (const char* v = env("GENIE_AUTH_TOKEN")) auth_token = v;
  if (const char* v = env("GENIE_TLS_CERT")) tls_cert = v;
  if (const char* v = env("GENIE_TLS_KEY")) tls_key = v;
  if (const char* v = env("GENIE_TLS_CA")) tls_ca = v;
  if (const char* v = env("GENIE_TLS_SERVER_NAME")) tls_server_name = v;
  if (const char* v = env("GENIE_SESSION_GRACE")) {
    session_grace_ms = parse_int("GENIE_SESSION_GRACE", v);
    check_grace(session_grace_ms, "GENIE_SESSION_GRACE");
  }
  if (const char* v = env("GENIE_SESSION_IDLE")) {
    session_idle_ms = parse_int("GENIE_SESSION_IDLE", v);
    check_grace(session_idle_ms, "GENIE_SESSION_IDLE");
  }
  if (const char* v = env("GENIE_HANDSHAKE_TIMEOUT")) {
    handshake_timeout_ms = parse_int("GENIE_HANDSHAKE_TIMEOUT", v);
    check_interval(handshake_timeout_ms, "GENIE_HANDSHAKE_TIMEOUT");
  }
  const std::pair<const char*, int32_t*> limits[] = {
      {"GENIE_MAX_CONNECTIONS", &max_connections},
      {"GENIE_MAX_CONNECTIONS_PER_SOURCE", &max_connections_per_source},
      {"GENIE_MAX_SESSIONS", &max_sessions}};
  read_numbers(limits, check_limit);
  const std::pair<const char*, int64_t*> graph_limits[] = {{"GENIE_MAX_GRAPH_BYTES", &max_graph_bytes},
                                                           {"GENIE_MAX_GRAPH_NODES", &max_graph_nodes}};
  read_numbers(graph_limits, check_graph_limit);
  if (const char* v = env("GENIE_MAX_MESSAGE")) {
    max_message_bytes = parse_int("GENIE_MAX_MESSAGE", v);
    check_max_message(max_message_bytes, "GENIE_MAX_MESSAGE");
  }
  const std::pair<const char*, int64_t*> quotas[] = {{"GENIE_MEMORY_BUDGET", &memory_budget_bytes},
                                                     {"GENIE_SESSION_MAX_BYTES", &session_max_bytes},
                                                     {"GENIE_SESSION_MAX_TENSORS", &session_max_tensors},
                                                     {"GENIE_SESSION_MAX_GRAPHS", &session_max_graphs}};
  read_numbers(quotas, check_quota);
  const std::pair<const char*, int64_t*> intervals[] = {{"GENIE_HEARTBEAT_INTERVAL", &heartbeat_interval_ms},
                                                        {"GENIE_HEARTBEAT_TIMEOUT", &heartbeat_timeout_ms},
                                                        {"GENIE_GPU_POLL_INTERVAL", &gpu_poll_interval_ms},
                                                        {"GENIE_HEALTH_INTERVAL", &health_interval_ms},
                                                        {"GENIE_STAGE_TIMEOUT", &stage_timeout_ms}};
  read_numbers(intervals, check_interval);
  if (const char* v = env("GENIE_DPDK_PROBE")) {
    static const char* const names[] = {"0", "1"};
    static const bool vals[] = {false, true};
    dpdk_probe = parse_enum("GENIE_DPDK_PROBE", v, names, vals);
  }
  if (const char* v = env("GENIE_ALLOW_INSECURE")) {
    static const char* const names[] = {"0", "1"};
    static const bool vals[] = {false, true};
    allow_insecure = parse_enum("GENIE_ALLOW_INSECURE", v, names, vals);
  }
  if (const char* v = env("GENIE_GRAPH_DELTAS")) {
    static const char* const names[] = {"0", "1"};
    static const bool vals[] = {false, true};
    graph_deltas = parse_enum("GENIE_GRAPH_DELTAS", v, names, vals);
  }
  if (const char* v = env("GENIE_SEMANTICS")) {
    static const char* const names[] = {"on", "off", "1", "0"};
    static const bool vals[] = {true, false, true, false};
    semantics = parse_enum("GENIE_SEMANTICS", v, names, vals);
  }
  if (const char* v = env("GENIE_DIRECT_CALLS")) {
    static const char* const names[] = {"0", "1"};
    static const bool vals[] = {false, true};
    direct_calls = parse_enum("GENIE_DIRECT_CALLS", v, names, vals);
  }
  if (const char* v = env("GENIE_TRANSPORT")) {
    check_transport_name(v, "GENIE_TRANSPORT");
    transport = v;
  }
  if (const char* v = env("GENIE_SERVE_TRANSPORTS")) {
    serve_transports.clear();
    const std::string list = v;
    for (size_t start = 0; start <= list.size();) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      const std::string name = list.substr(start, end - start);
      check_transport_name(name, "GENIE_SERVE_TRANSPORTS entry");
      serve_transports.push_back(name);
      start = end + 1;
    }
  }
  if (const char* v = env("GENIE_METRICS_PORT")) {
    const int64_t p = parse_int("GENIE_METRICS_PORT", v);
    check(p >= -1 && p <= 65535, GENIE_ERR_INVALID_ARGUMENT, "GENIE_METRICS_PORT=", v,
          " is outside -1..65535 (-1: off, 0: a free port)");
    metrics_port = static_cast<int32_t>(p);
  }
  if (const char* v = env("GENIE_METRICS_ADDR")) metrics_addr = v;
  if (const char* v = env("GENIE_ETCD_ENDPOINTS")) etcd_endpoints = parse_etcd_endpoints(v, "GENIE_ETCD_ENDPOINTS");
  if (const char* v = env("GENIE_CLUSTER")) {
    check_cluster_name(v, "GENIE_CLUSTER");
    cluster = v;
  }
  if (const char* v = env("GENIE_ETCD_LEASE_TTL")) {
    const int64_t ms = parse_int("GENIE_ETCD_LEASE_TTL", v);
    check_etcd_lease_ttl(ms, "GENIE_ETCD_LEASE_TTL");
    etcd_lease_ttl_ms = ms;
  }
  if (const char* v = env("GENIE_NUM_THREADS")) {
    const int64_t n = parse_int("GENIE_NUM_THREADS", v);
    check(n >= 0 && n <= 1024, GENIE_ERR_INVALID_ARGUMENT, "GENIE_NUM_THREADS=", v, " is outside 0..1024");
    num_threads = static_cast<int32_t>(n);
  }
}

void check_grace(int64_t ms, const char* what) {
  check(ms >= 0, GENIE_ERR_INVALID_ARGUMENT, what, " ", ms, " ms must not be negative");
}

void check_max_message(int64_t bytes, const char* what) {
  check(bytes >= 4096 && bytes <= (int64_t{1} << 30), GENIE_ERR_INVALID_ARGUMENT, what, " ", bytes,
        " is outside 4096..2^30 bytes");
}

void check_interval(int64_t ms, const char* what) {
  check(ms >= 10 && ms <= 86400000, GENIE_ERR_INVALID_ARGUMENT, what, " ", ms, " ms is outside 10..86400000");
}

void check_limit(int64_t n, const char* what) {
  check(n >= 0 && n <= 1000000, GENIE_ERR_INVALID_ARGUMENT, what, " ", n,
        " is outside 0..1000000 (0: no limit)");
}

void check_graph_limit(int64_t value, const char* what) {
  check(value >= 0 && value <= (int64_t{1} << 40), GENIE_ERR_INVALID_ARGUMENT, what, " ", value,
        " is outside 0..2^40 (0: no limit)");
}

void check_quota(int64_t value, const char* what) {
  check(value >= 0, GENIE_ERR_INVALID_ARGUMENT, what, " ", value, " must not be negative (0: the default)");
}

std::vector<std::string> parse_etcd_endpoints(const std::string& list, const char* what) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string e = list.substr(start, end - start);
    check(!e.empty() && e.size() <= 255 && e.find_first_of(" \t\r\n") == std::string::npos,
          GENIE_ERR_INVALID_ARGUMENT, what, " '", list,
          "': each endpoint is a URL of 1..255 bytes without blanks (http://host:port), comma-separated");
    out.push_back(e);
    start = end + 1;
  }
  check(out.size() <= 16, GENIE_ERR_INVALID_ARGUMENT, what, " names ", out.size(), " endpoints (at most 16)");
  return out;
}

void check_cluster_name(const std::string& name, const char* what) {
  check(!name.empty() && name.size() <= 64, GENIE_ERR_INVALID_ARGUMENT, what, " '", name,
        "' is not 1..64 bytes");
  for (char c : name)
    check(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-',
          GENIE_ERR_INVALID_ARGUMENT, what, " '", name, "' may hold only [A-Za-z0-9._-]");
}

void check_etcd_lease_ttl(int64_t ms, const char* what) {
  check(ms >= 1000 && ms <= 3600000, GENIE_ERR_INVALID_ARGUMENT, what, " ", ms,
        " ms is outside 1000..3600000 (etcd counts whole seconds)");
}

bool is_transport_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

void check_transport_name(const std::string& name, const char* what) {
  check(is_transport_name(name), GENIE_ERR_INVALID_ARGUMENT, what, " '", name,
        "' is not a transport name (1..64 of lowercase letters, digits and '_', e.g. tcp)");
}

void Config::validate() const {
  check_interval(heartbeat_interval_ms, "heartbeat interval");
  check_interval(heartbeat_timeout_ms, "heartbeat timeout");
  check_interval(gpu_poll_interval_ms, "GPU poll interval");
  check_interval(health_interval_ms, "health interval");
  check(heartbeat_timeout_ms >= heartbeat_interval_ms, GENIE_ERR_INVALID_ARGUMENT, "heartbeat timeout ",
        heartbeat_timeout_ms, " ms is below the heartbeat interval ", heartbeat_interval_ms,
        " ms: every node would be marked lost between two heartbeats");
  check_grace(session_grace_ms, "session grace");
  check_grace(session_idle_ms, "session idle timeout");
  check_interval(handshake_timeout_ms, "handshake timeout");
  check_limit(max_connections, "max connections");
  check_limit(max_connections_per_source, "max connections per source");
  check_limit(max_sessions, "max sessions");
  check_max_message(max_message_bytes, "max message");
  check_graph_limit(max_graph_bytes, "max graph bytes");
  check_graph_limit(max_graph_nodes, "max graph nodes");
  check_interval(stage_timeout_ms, "stage timeout");
  check_auth_token(auth_token, "auth token");
  check(tls_cert.empty() == tls_key.empty(), GENIE_ERR_INVALID_ARGUMENT,
        "a TLS certificate needs its private key and the other way round (GENIE_TLS_CERT and GENIE_TLS_KEY)");
  check_quota(memory_budget_bytes, "memory budget");
  check_quota(session_max_bytes, "session byte quota");
  check_quota(session_max_tensors, "session tensor quota");
  check_quota(session_max_graphs, "session graph quota");
  check_port(master_port, "master port");
  check(metrics_port >= -1 && metrics_port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "metrics port ", metrics_port,
        " is outside -1..65535");
  check(!metrics_addr.empty() && metrics_addr.size() <= 255, GENIE_ERR_INVALID_ARGUMENT,
        "metrics address is empty or longer than 255 bytes");
  check_node_id(node_id, "node id");
  check(master_addr.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, "master address is longer than 255 bytes");
  check(timeout_ms > 0, GENIE_ERR_INVALID_ARGUMENT, "timeout must be positive");
  check(num_threads >= 0 && num_threads <= 1024, GENIE_ERR_INVALID_ARGUMENT, "num_threads outside 0..1024");
  if (!transport.empty()) check_transport_name(transport, "transport");
  if (!selected_transport.empty()) check_transport_name(selected_transport, "selected transport");
  for (const std::string& t : serve_transports) check_transport_name(t, "served transport");
  check(etcd_endpoints.size() <= 16, GENIE_ERR_INVALID_ARGUMENT, "more than 16 etcd endpoints");
  check_cluster_name(cluster, "cluster name");
  check_etcd_lease_ttl(etcd_lease_ttl_ms, "etcd lease TTL");
}

const char* role_str(genie_node_role_t r) {
  switch (r) {
    case GENIE_NODE_ROLE_CLIENT: return "client";
    case GENIE_NODE_ROLE_SERVER: return "server";
    case GENIE_NODE_ROLE_WORKER: return "worker";
    default: break;
  }
  return "?";
}

const char* backend_str(genie_backend_t b) {
  switch (b) {
    case GENIE_BACKEND_AUTO: return "auto";
    case GENIE_BACKEND_TCP: return "tcp";
    case GENIE_BACKEND_RDMA: return "rdma";
    case GENIE_BACKEND_DPDK: return "dpdk";
    case GENIE_BACKEND_DPDK_GPUDEV: return "dpdk_gpudev";
    case GENIE_BACKEND_UCX: return "ucx";
    default: break;
  }
  return "?";
}

}  // namespace genie
