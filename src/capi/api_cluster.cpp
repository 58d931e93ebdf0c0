// C API: cluster state, discovery and events (docs/cluster.md).
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "capi/handles.hpp"
#include "cluster/discovery.hpp"
#include "cluster/entry.hpp"
#include "cluster/gpu_monitor.hpp"
#include "control/tls.hpp"
#include "core/log.hpp"

using namespace genie;

namespace {

char* copy_out(const std::string& s) {
  char* copy = static_cast<char*>(std::malloc(s.size() + 1));
  check(copy != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  std::memcpy(copy, s.c_str(), s.size() + 1);
  return copy;
}

std::string discover(const Config& cfg, const char* host, int32_t port) {
  const auto t0 = std::chrono::steady_clock::now();
  GpuMonitor gpu;
  gpu.poll();
  const RdmaProbe rdma = probe_rdma();
  const DpdkProbe dpdk = cfg.dpdk_probe ? probe_dpdk(std::min<int64_t>(cfg.timeout_ms, 10000))
                                        : dpdk_not_probed("EAL probe disabled (GENIE_DPDK_PROBE=0)");
  TcpProbe tcp;
  if (host) tcp = probe_tcp(host, port, cfg.timeout_ms, 5, probe_tls(cfg));
  const UcxProbe ucx = probe_ucx(std::min<int64_t>(cfg.timeout_ms, 10000));
  const std::vector<BackendAvail> local = local_backends(rdma, dpdk, ucx);

  JsonPtr o = json_object();
  cJSON_AddItemToObject(o.get(), "rdma", rdma_to_json(rdma).release());
  cJSON_AddItemToObject(o.get(), "ucx", ucx_to_json(ucx).release());
  cJSON_AddItemToObject(o.get(), "dpdk", dpdk_to_json(dpdk).release());
  cJSON_AddItemToObject(o.get(), "dpdk_gpudev", gpudev_to_json(dpdk).release());
  JsonPtr g = json_object();
  cJSON_AddBoolToObject(g.get(), "available", !gpu.gpus().empty());
  cJSON_AddNumberToObject(g.get(), "count", static_cast<double>(gpu.gpus().size()));
  cJSON_AddStringToObject(g.get(), "reason", gpu.reason().empty() ? cat(gpu.gpus().size(), " GPU(s) via NVML").c_str()
                                                                   : gpu.reason().c_str());
  cJSON_AddStringToObject(g.get(), "library", gpu.library().c_str());
  JsonPtr list = json_array();
  for (const GpuInfo& gi : gpu.gpus()) cJSON_AddItemToArray(list.get(), gpu_to_json(gi).release());
  cJSON_AddItemToObject(g.get(), "devices", list.release());
  cJSON_AddItemToObject(o.get(), "gpus", g.release());
  if (host)
    cJSON_AddItemToObject(o.get(), "tcp", tcp_to_json(tcp).release());
  else
    cJSON_AddNullToObject(o.get(), "tcp");
  JsonPtr b = json_object();
  cJSON_AddItemToObject(b.get(), "local", backends_to_json(local).release());
  const bool have_server = host && tcp.reachable && tcp.has_backends;
  if (have_server) cJSON_AddItemToObject(b.get(), "server", backends_to_json(tcp.server_backends).release());
  cJSON_AddItemToObject(o.get(), "backends", b.release());
  try {
    const Selection s =
        select_backend(cfg.backend, local, have_server ? &tcp.server_backends : nullptr, tcp.server_node_id);
    cJSON_AddItemToObject(o.get(), "selection", selection_to_json(s).release());
  } catch (const Error& e) {
    JsonPtr s = json_object();
    cJSON_AddStringToObject(s.get(), "requested", backend_str(cfg.backend));
    cJSON_AddNullToObject(s.get(), "selected");
    cJSON_AddStringToObject(s.get(), "error", e.detail().c_str());
    cJSON_AddItemToObject(o.get(), "selection", s.release());
  }
  cJSON_AddNumberToObject(
      o.get(), "duration_ms",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return json_text(o.get());
}

}  // namespace

extern "C" {

genie_status_t genie_cluster_state(genie_context_t* ctx, char** out_json) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out_json, "out_json");
    c.check_live();
    *out_json = copy_out(c.cluster().state_json());
  });
}

genie_status_t genie_discover(const genie_config_t* config, const char* host, int32_t port, char** out_json) {
  return guard([&] {
    check_out(out_json, "out_json");
    Config cfg = config ? live<ConfigObj>(config)->cfg : Config{};
    cfg.apply_env();
    cfg.validate();
    if (host) {
      check(*host != '\0' && std::strlen(host) <= 255, GENIE_ERR_INVALID_ARGUMENT,
            "host must be 1..255 bytes (NULL: no master checks)");
      check_port(port, "port");
    }
    *out_json = copy_out(discover(cfg, host, port));
  });
}

genie_status_t genie_cluster_members(const genie_config_t* config, char** out_json) {
  return guard([&] {
    check_out(out_json, "out_json");
    Config cfg = config ? live<ConfigObj>(config)->cfg : Config{};
    cfg.apply_env();
    cfg.validate();
    const std::shared_ptr<MembershipStore> store = open_cluster_store(cfg);
    *out_json = copy_out(members_json(*store, cfg.cluster));
  });
}

genie_status_t genie_subscribe(genie_context_t* ctx, uint32_t mask, genie_event_fn fn, void* user_data,
                               uint64_t* out_subscription) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    c.check_live();
    const uint64_t id = c.cluster().subscribe(mask, fn, user_data);
    if (out_subscription) *out_subscription = id;
  });
}

genie_status_t genie_unsubscribe(genie_context_t* ctx, uint64_t subscription) {
  return guard([&] { live<ContextObj>(ctx)->impl->cluster().unsubscribe(subscription); });
}

}  // extern "C"
