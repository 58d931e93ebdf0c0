// C API: versions, status, memory, dtypes, configuration, context lifetime.
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "capi/handles.hpp"
#include "core/dtype.hpp"
#include "core/metrics.hpp"
#include "core/trace.hpp"

using namespace genie;

namespace genie {

namespace {
thread_local std::string t_last_error;
}  // namespace

void set_last_error(const std::string& detail) { t_last_error = detail; }

}  // namespace genie

extern "C" {

uint32_t genie_version(void) { return GENIE_VERSION; }
const char* genie_version_string(void) { return "0.1.0"; }
uint32_t genie_abi_version(void) { return GENIE_ABI_VERSION; }
int genie_metrics_supported(void) { return metrics::supported() ? 1 : 0; }

genie_status_t genie_trace_start(const char* path) {
  return guard([&] {
    check(path != nullptr, GENIE_ERR_INVALID_ARGUMENT, "trace path is NULL");
    trace::start(path);
  });
}

genie_status_t genie_trace_stop(void) {
  return guard([] { trace::stop(); });
}

const char* genie_status_str(genie_status_t s) {
  switch (s) {
    case GENIE_OK: return "GENIE_OK";
    case GENIE_IN_PROGRESS: return "GENIE_IN_PROGRESS";
    case GENIE_ERR_INVALID_ARGUMENT: return "GENIE_ERR_INVALID_ARGUMENT";
    case GENIE_ERR_INVALID_HANDLE: return "GENIE_ERR_INVALID_HANDLE";
    case GENIE_ERR_OUT_OF_MEMORY: return "GENIE_ERR_OUT_OF_MEMORY";
    case GENIE_ERR_DTYPE_MISMATCH: return "GENIE_ERR_DTYPE_MISMATCH";
    case GENIE_ERR_SHAPE_MISMATCH: return "GENIE_ERR_SHAPE_MISMATCH";
    case GENIE_ERR_SIZE_MISMATCH: return "GENIE_ERR_SIZE_MISMATCH";
    case GENIE_ERR_UNKNOWN_OP: return "GENIE_ERR_UNKNOWN_OP";
    case GENIE_ERR_INVALID_ATTRIBUTE: return "GENIE_ERR_INVALID_ATTRIBUTE";
    case GENIE_ERR_INVALID_GRAPH: return "GENIE_ERR_INVALID_GRAPH";
    case GENIE_ERR_PARSE: return "GENIE_ERR_PARSE";
    case GENIE_ERR_TOO_LARGE: return "GENIE_ERR_TOO_LARGE";
    case GENIE_ERR_NOT_FOUND: return "GENIE_ERR_NOT_FOUND";
    case GENIE_ERR_UNSUPPORTED: return "GENIE_ERR_UNSUPPORTED";
    case GENIE_ERR_TIMEOUT: return "GENIE_ERR_TIMEOUT";
    case GENIE_ERR_CONNECTION: return "GENIE_ERR_CONNECTION";
    case GENIE_ERR_AUTH: return "GENIE_ERR_AUTH";
    case GENIE_ERR_PROTOCOL: return "GENIE_ERR_PROTOCOL";
    case GENIE_ERR_VERSION_MISMATCH: return "GENIE_ERR_VERSION_MISMATCH";
    case GENIE_ERR_SHUTDOWN: return "GENIE_ERR_SHUTDOWN";
    case GENIE_ERR_IO: return "GENIE_ERR_IO";
    case GENIE_ERR_CANCELLED: return "GENIE_ERR_CANCELLED";
    case GENIE_ERR_INTERNAL: return "GENIE_ERR_INTERNAL";
    default: return "unknown status";
  }
}

const char* genie_last_error(void) { return t_last_error.c_str(); }

void genie_free(void* ptr) { std::free(ptr); }

size_t genie_dtype_size(genie_dtype_t dtype) {
  return dtype_valid(dtype) ? genie::dtype_size(static_cast<DType>(dtype)) : 0;
}

const char* genie_dtype_name(genie_dtype_t dtype) {
  return dtype_valid(dtype) ? genie::dtype_name(static_cast<DType>(dtype)) : "invalid";
}

// --- configuration ---------------------------------------------------------

genie_status_t genie_config_create(genie_config_t** out) {
  return guard([&] {
    check_out(out, "out");
    *out = publish(std::make_unique<ConfigObj>());
  });
}

void genie_config_destroy(genie_config_t* config) { retire<ConfigObj>(config); }

#define GENIE_CONFIG_SETTER(fn, type, body)               \
  genie_status_t fn(genie_config_t* config, type value) { \
    return guard([&] {                                    \
      Config& c = live<ConfigObj>(config)->cfg;           \
      body;                                               \
    });                                                   \
  }

GENIE_CONFIG_SETTER(genie_config_set_master_addr, const char*, {
  const std::string v = value ? value : "";
  check(v.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, "master address is longer than 255 bytes");
  c.master_addr = v;
})
GENIE_CONFIG_SETTER(genie_config_set_master_port, int32_t, {
  check_port(value, "master port");
  c.master_port = value;
})
GENIE_CONFIG_SETTER(genie_config_set_node_id, const char*, {
  const std::string v = value ? value : "";
  check_node_id(v, "node id");
  c.node_id = v;
})
GENIE_CONFIG_SETTER(genie_config_set_role, genie_node_role_t, {
  check(value >= GENIE_NODE_ROLE_CLIENT && value <= GENIE_NODE_ROLE_WORKER, GENIE_ERR_INVALID_ARGUMENT,
        "role ", static_cast<int>(value), " is not a genie_node_role_t");
  c.role = value;
})
GENIE_CONFIG_SETTER(genie_config_set_backend, genie_backend_t, {
  check(value >= GENIE_BACKEND_AUTO && value <= GENIE_BACKEND_UCX, GENIE_ERR_INVALID_ARGUMENT,
        "backend ", static_cast<int>(value), " is not a genie_backend_t");
  c.backend = value;
})
GENIE_CONFIG_SETTER(genie_config_set_log_level, genie_log_level_t, {
  check(value >= GENIE_LOG_OFF && value <= GENIE_LOG_TRACE, GENIE_ERR_INVALID_ARGUMENT, "log level ",
        static_cast<int>(value), " is not a genie_log_level_t");
  c.log_level = static_cast<LogLevel>(value);
})
GENIE_CONFIG_SETTER(genie_config_set_timeout_ms, int64_t, {
  check(value > 0, GENIE_ERR_INVALID_ARGUMENT, "timeout ", value, " ms must be positive");
  c.timeout_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_num_threads, int32_t, {
  check(value >= 0 && value <= 1024, GENIE_ERR_INVALID_ARGUMENT, "num_threads ", value,
        " is outside 0..1024");
  c.num_threads = value;
})
GENIE_CONFIG_SETTER(genie_config_set_use_env, int, { c.use_env = value != 0; })
GENIE_CONFIG_SETTER(genie_config_set_graph_deltas, int, { c.graph_deltas = value != 0; })
GENIE_CONFIG_SETTER(genie_config_set_semantics, int, { c.semantics = value != 0; })
GENIE_CONFIG_SETTER(genie_config_set_auth_token, const char*, {
  const std::string v = value ? value : "";
  check_auth_token(v, "auth token");
  c.auth_token = v;
})
GENIE_CONFIG_SETTER(genie_config_set_tls_ca, const char*, { c.tls_ca = value ? value : ""; })
GENIE_CONFIG_SETTER(genie_config_set_tls_server_name, const char*, {
  const std::string v = value ? value : "";
  check(v.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, "TLS server name is longer than 255 bytes");
  c.tls_server_name = v;
})
genie_status_t genie_config_set_tls_cert(genie_config_t* config, const char* cert_file,
                                         const char* key_file) {
  return guard([&] {
    Config& c = live<ConfigObj>(config)->cfg;
    const std::string cert = cert_file ? cert_file : "", key = key_file ? key_file : "";
    check(cert.empty() == key.empty(), GENIE_ERR_INVALID_ARGUMENT,
          "a TLS certificate needs its private key and the other way round");
    c.tls_cert = cert;
    c.tls_key = key;
  });
}
GENIE_CONFIG_SETTER(genie_config_set_allow_insecure, int, { c.allow_insecure = value != 0; })
GENIE_CONFIG_SETTER(genie_config_set_session_grace_ms, int64_t, {
  check_grace(value, "session grace");
  c.session_grace_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_session_idle_ms, int64_t, {
  check_grace(value, "session idle timeout");
  c.session_idle_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_handshake_timeout_ms, int64_t, {
  check_interval(value, "handshake timeout");
  c.handshake_timeout_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_max_connections, int32_t, {
  check_limit(value, "max connections");
  c.max_connections = value;
})
GENIE_CONFIG_SETTER(genie_config_set_max_connections_per_source, int32_t, {
  check_limit(value, "max connections per source");
  c.max_connections_per_source = value;
})
GENIE_CONFIG_SETTER(genie_config_set_max_sessions, int32_t, {
  check_limit(value, "max sessions");
  c.max_sessions = value;
})
GENIE_CONFIG_SETTER(genie_config_set_max_graph_bytes, int64_t, {
  check_graph_limit(value, "max graph bytes");
  c.max_graph_bytes = value;
})
GENIE_CONFIG_SETTER(genie_config_set_max_graph_nodes, int64_t, {
  check_graph_limit(value, "max graph nodes");
  c.max_graph_nodes = value;
})
GENIE_CONFIG_SETTER(genie_config_set_stage_timeout_ms, int64_t, {
  check_interval(value, "stage timeout");
  c.stage_timeout_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_metrics_port, int32_t, {
  check(value >= -1 && value <= 65535, GENIE_ERR_INVALID_ARGUMENT, "metrics port ", value,
        " is outside -1..65535 (-1: off, 0: a free port)");
  c.metrics_port = value;
})
GENIE_CONFIG_SETTER(genie_config_set_metrics_addr, const char*, {
  const std::string v = value && *value ? value : "127.0.0.1";
  check(v.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, "metrics address is longer than 255 bytes");
  c.metrics_addr = v;
})
GENIE_CONFIG_SETTER(genie_config_set_etcd_endpoints, const char*, {
  c.etcd_endpoints = value && *value ? parse_etcd_endpoints(value, "etcd endpoints") : std::vector<std::string>{};
})
GENIE_CONFIG_SETTER(genie_config_set_cluster, const char*, {
  const std::string v = value && *value ? value : "default";
  check_cluster_name(v, "cluster name");
  c.cluster = v;
})
GENIE_CONFIG_SETTER(genie_config_set_etcd_lease_ttl_ms, int64_t, {
  check_etcd_lease_ttl(value, "etcd lease TTL");
  c.etcd_lease_ttl_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_memory_budget, int64_t, {
  check_quota(value, "memory budget");
  c.memory_budget_bytes = value;
})
genie_status_t genie_config_set_session_quota(genie_config_t* config, int64_t max_bytes, int64_t max_tensors,
                                              int64_t max_graphs) {
  return guard([&] {
    Config& c = live<ConfigObj>(config)->cfg;
    check_quota(max_bytes, "session byte quota");
    check_quota(max_tensors, "session tensor quota");
    check_quota(max_graphs, "session graph quota");
    c.session_max_bytes = max_bytes;
    c.session_max_tensors = max_tensors ? max_tensors : Config::kDefaultSessionMaxTensors;
    c.session_max_graphs = max_graphs ? max_graphs : Config::kDefaultSessionMaxGraphs;
  });
}
GENIE_CONFIG_SETTER(genie_config_set_max_message_bytes, int64_t, {
  check_max_message(value, "max message");
  c.max_message_bytes = value;
})

GENIE_CONFIG_SETTER(genie_config_set_heartbeat_interval_ms, int64_t, {
  check_interval(value, "heartbeat interval");
  c.heartbeat_interval_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_heartbeat_timeout_ms, int64_t, {
  check_interval(value, "heartbeat timeout");
  c.heartbeat_timeout_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_gpu_poll_interval_ms, int64_t, {
  check_interval(value, "GPU poll interval");
  c.gpu_poll_interval_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_health_interval_ms, int64_t, {
  check_interval(value, "health interval");
  c.health_interval_ms = value;
})
GENIE_CONFIG_SETTER(genie_config_set_dpdk_probe, int, { c.dpdk_probe = value != 0; })

#undef GENIE_CONFIG_SETTER

// --- context ---------------------------------------------------------------

genie_status_t genie_init_abi(uint32_t abi_version, const genie_config_t* config, genie_context_t** out) {
  return guard([&] {
    check_out(out, "out");
    check(abi_version == GENIE_ABI_VERSION, GENIE_ERR_VERSION_MISMATCH,
          "the program was compiled against ABI ", abi_version, " of genie.h but the library provides ABI ",
          GENIE_ABI_VERSION);
    const auto t0 = std::chrono::steady_clock::now();
    Config cfg = config ? live<ConfigObj>(config)->cfg : Config{};
    cfg.apply_env();
    cfg.validate();
    set_log_level(cfg.log_level);
    if (cfg.use_env) trace::start_from_env();
    const double config_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto h = std::make_unique<ContextObj>();
    h->impl = std::make_shared<Context>(cfg, config_ms);
    *out = publish(std::move(h));
  });
}

void genie_shutdown(genie_context_t* ctx) {
  ContextObj* h = find<ContextObj>(ctx);
  // Only the first of concurrent calls goes on; genie_is_initialized says 0
  // from here on.
  if (h == nullptr || h->closing.exchange(true)) return;
  try {
    // The handle stays live meanwhile, so completion callbacks that run
    // while shutdown waits for their graphs get SHUTDOWN from the context,
    // not INVALID_HANDLE.
    h->impl->shutdown();
  } catch (...) {
    // shutdown only waits and frees; nothing to report to a void function.
  }
  retire<ContextObj>(ctx);
}

int genie_is_initialized(const genie_context_t* ctx) {
  const ContextObj* h = find<ContextObj>(ctx);
  return h != nullptr && !h->closing.load() ? 1 : 0;
}

int genie_context_is_embedded(const genie_context_t* ctx) {
  if (!genie_is_initialized(ctx)) return -1;
  return find<ContextObj>(ctx)->impl->embedded() ? 1 : 0;
}

genie_status_t genie_context_is_connected(const genie_context_t* ctx, int* out) {
  return guard([&] {
    const Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out, "out");
    *out = c.connected() ? 1 : 0;
  });
}

const char* genie_context_node_id(const genie_context_t* ctx) {
  if (!genie_is_initialized(ctx)) return nullptr;
  return find<ContextObj>(ctx)->impl->node_id().c_str();
}

genie_status_t genie_context_server_info(genie_context_t* ctx, char** out_json) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out_json, "out_json");
    const std::string json = c.server_info_json();
    char* copy = static_cast<char*>(std::malloc(json.size() + 1));
    check(copy != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
    std::memcpy(copy, json.c_str(), json.size() + 1);
    *out_json = copy;
  });
}

}  // extern "C"
