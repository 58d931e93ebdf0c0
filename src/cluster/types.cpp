#include "cluster/types.hpp"

#include <chrono>

#include "core/config.hpp"
#include "core/error.hpp"

namespace genie {

JsonPtr json_object() {
  JsonPtr j(cJSON_CreateObject());
  check(j != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  return j;
}

JsonPtr json_array() {
  JsonPtr j(cJSON_CreateArray());
  check(j != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  return j;
}

std::string json_text(const cJSON* j, bool pretty) {
  char* text = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
  check(text != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  std::string s(text);
  cJSON_free(text);
  return s;
}

JsonPtr json_parse(const std::string& text, const char* what) {
  JsonPtr j(cJSON_ParseWithLength(text.data(), text.size()));
  check(j != nullptr, GENIE_ERR_PROTOCOL, what, " is not JSON");
  return j;
}

int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

const char* health_str(Health h) {
  switch (h) {
    case Health::Healthy: return "HEALTHY";
    case Health::Degraded: return "DEGRADED";
    case Health::Unhealthy: return "UNHEALTHY";
    case Health::Critical: return "CRITICAL";
  }
  return "CRITICAL";
}

Health health_from_str(const std::string& s) {
  if (s == "HEALTHY") return Health::Healthy;
  if (s == "DEGRADED") return Health::Degraded;
  if (s == "UNHEALTHY") return Health::Unhealthy;
  return Health::Critical;
}

namespace {

void add_str(cJSON* o, const char* k, const std::string& v) {
  check(cJSON_AddStringToObject(o, k, v.c_str()) != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
}
void add_num(cJSON* o, const char* k, double v) {
  check(cJSON_AddNumberToObject(o, k, v) != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
}
void add_bool(cJSON* o, const char* k, bool v) {
  check(cJSON_AddBoolToObject(o, k, v) != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
}

std::string get_str(const cJSON* o, const char* k, bool required = true) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!v) {
    check(!required, GENIE_ERR_PROTOCOL, "node status: '", k, "' is missing");
    return {};
  }
  check(cJSON_IsString(v), GENIE_ERR_PROTOCOL, "node status: '", k, "' is not a string");
  return v->valuestring;
}
double get_num(const cJSON* o, const char* k) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!v) return 0;
  check(cJSON_IsNumber(v), GENIE_ERR_PROTOCOL, "node status: '", k, "' is not a number");
  return v->valuedouble;
}
bool get_bool(const cJSON* o, const char* k, bool dflt) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!v) return dflt;
  check(cJSON_IsBool(v), GENIE_ERR_PROTOCOL, "node status: '", k, "' is not a boolean");
  return cJSON_IsTrue(v);
}

}  // namespace

JsonPtr gpu_to_json(const GpuInfo& g) {
  JsonPtr o = json_object();
  add_num(o.get(), "index", g.index);
  add_str(o.get(), "name", g.name);
  add_num(o.get(), "memory_total", static_cast<double>(g.memory_total));
  add_num(o.get(), "memory_used", static_cast<double>(g.memory_used));
  add_num(o.get(), "utilization", g.utilization);
  add_num(o.get(), "temperature_c", g.temperature_c);
  add_bool(o.get(), "available", g.available);
  add_bool(o.get(), "overheated", g.overheated);
  if (!g.pci_bus_id.empty()) add_str(o.get(), "pci_bus_id", g.pci_bus_id);
  if (!g.device.empty()) add_str(o.get(), "device", g.device);
  return o;
}

JsonPtr node_to_json(const NodeStatus& n) {
  JsonPtr o = json_object();
  add_str(o.get(), "id", n.id);
  add_str(o.get(), "host", n.host);
  if (!n.address.empty()) add_str(o.get(), "address", n.address);
  add_str(o.get(), "role", role_str(n.role));
  if (!n.listen.empty()) add_str(o.get(), "listen", n.listen);
  if (!n.devices.empty()) {
    JsonPtr devs = json_array();
    for (const std::string& d : n.devices) cJSON_AddItemToArray(devs.get(), cJSON_CreateString(d.c_str()));
    cJSON_AddItemToObject(o.get(), "devices", devs.release());
  }
  add_str(o.get(), "backend", n.backend);
  add_str(o.get(), "status", n.alive ? "alive" : "lost");
  add_num(o.get(), "last_heartbeat_ms", static_cast<double>(n.last_heartbeat_ms));
  JsonPtr gpus = json_array();
  for (const GpuInfo& g : n.gpus) cJSON_AddItemToArray(gpus.get(), gpu_to_json(g).release());
  cJSON_AddItemToObject(o.get(), "gpus", gpus.release());
  if (!n.gpu_reason.empty()) add_str(o.get(), "gpu_reason", n.gpu_reason);
  add_str(o.get(), "health", health_str(n.health));
  JsonPtr reasons = json_array();
  for (const std::string& r : n.health_reasons) cJSON_AddItemToArray(reasons.get(), cJSON_CreateString(r.c_str()));
  cJSON_AddItemToObject(o.get(), "health_reasons", reasons.release());
  return o;
}

NodeStatus node_from_json(const cJSON* j) {
  check(cJSON_IsObject(j), GENIE_ERR_PROTOCOL, "node status is not a JSON object");
  NodeStatus n;
  n.id = get_str(j, "id");
  check_node_id(n.id, "node status id");
  check(!n.id.empty(), GENIE_ERR_PROTOCOL, "node status: empty id");
  n.host = get_str(j, "host", false).substr(0, 255);
  n.address = get_str(j, "address", false).substr(0, 255);
  n.listen = get_str(j, "listen", false).substr(0, 300);
  const cJSON* devs = cJSON_GetObjectItemCaseSensitive(j, "devices");
  if (devs) {
    check(cJSON_IsArray(devs) && cJSON_GetArraySize(devs) <= 1024, GENIE_ERR_PROTOCOL,
          "node status: 'devices' is not an array of at most 1024 names");
    const cJSON* d;
    cJSON_ArrayForEach(d, devs) {
      check(cJSON_IsString(d), GENIE_ERR_PROTOCOL, "node status: a device is not a string");
      n.devices.push_back(std::string(d->valuestring).substr(0, 255));
    }
  }
  const std::string role = get_str(j, "role", false);
  n.role = role == "server"   ? GENIE_NODE_ROLE_SERVER
           : role == "worker" ? GENIE_NODE_ROLE_WORKER
                              : GENIE_NODE_ROLE_CLIENT;
  n.backend = get_str(j, "backend", false).substr(0, 32);
  n.alive = get_str(j, "status", false) != "lost";
  n.last_heartbeat_ms = static_cast<int64_t>(get_num(j, "last_heartbeat_ms"));
  const cJSON* gpus = cJSON_GetObjectItemCaseSensitive(j, "gpus");
  if (gpus) {
    check(cJSON_IsArray(gpus), GENIE_ERR_PROTOCOL, "node status: 'gpus' is not an array");
    check(cJSON_GetArraySize(gpus) <= 1024, GENIE_ERR_PROTOCOL, "node status: too many GPUs");
    const cJSON* g;
    cJSON_ArrayForEach(g, gpus) {
      check(cJSON_IsObject(g), GENIE_ERR_PROTOCOL, "node status: a GPU is not an object");
      GpuInfo gi;
      gi.index = static_cast<uint32_t>(get_num(g, "index"));
      gi.name = get_str(g, "name", false).substr(0, 255);
      gi.memory_total = static_cast<uint64_t>(get_num(g, "memory_total"));
      gi.memory_used = static_cast<uint64_t>(get_num(g, "memory_used"));
      gi.utilization = static_cast<uint32_t>(get_num(g, "utilization"));
      gi.temperature_c = static_cast<int32_t>(get_num(g, "temperature_c"));
      gi.available = get_bool(g, "available", true);
      gi.overheated = get_bool(g, "overheated", false);
      gi.pci_bus_id = get_str(g, "pci_bus_id", false).substr(0, 64);
      gi.device = get_str(g, "device", false).substr(0, 64);
      n.gpus.push_back(std::move(gi));
    }
  }
  n.gpu_reason = get_str(j, "gpu_reason", false).substr(0, 1024);
  n.health = health_from_str(get_str(j, "health", false));
  const cJSON* reasons = cJSON_GetObjectItemCaseSensitive(j, "health_reasons");
  if (cJSON_IsArray(reasons)) {
    const cJSON* r;
    cJSON_ArrayForEach(r, reasons) {
      if (cJSON_IsString(r) && n.health_reasons.size() < 64) n.health_reasons.push_back(std::string(r->valuestring).substr(0, 1024));
    }
  }
  return n;
}

JsonPtr backends_to_json(const std::vector<BackendAvail>& list) {
  JsonPtr a = json_array();
  for (const BackendAvail& b : list) {
    JsonPtr o = json_object();
    add_str(o.get(), "backend", backend_str(b.backend));
    add_bool(o.get(), "available", b.available());
    add_bool(o.get(), "probe_ok", b.probe_ok);
    add_str(o.get(), "probe", b.probe);
    add_bool(o.get(), "transport_built", b.built);
    cJSON_AddItemToArray(a.get(), o.release());
  }
  return a;
}

std::vector<BackendAvail> backends_from_json(const cJSON* j) {
  check(cJSON_IsArray(j), GENIE_ERR_PROTOCOL, "backend list is not a JSON array");
  std::vector<BackendAvail> out;
  const cJSON* o;
  cJSON_ArrayForEach(o, j) {
    check(cJSON_IsObject(o), GENIE_ERR_PROTOCOL, "backend entry is not an object");
    const std::string name = get_str(o, "backend");
    BackendAvail b;
    if (name == "tcp") b.backend = GENIE_BACKEND_TCP;
    else if (name == "rdma") b.backend = GENIE_BACKEND_RDMA;
    else if (name == "dpdk") b.backend = GENIE_BACKEND_DPDK;
    else if (name == "dpdk_gpudev") b.backend = GENIE_BACKEND_DPDK_GPUDEV;
    else if (name == "ucx") b.backend = GENIE_BACKEND_UCX;
    else continue;  // a backend this build does not know
    b.probe_ok = get_bool(o, "probe_ok", false);
    b.probe = get_str(o, "probe", false).substr(0, 1024);
    b.built = get_bool(o, "transport_built", false);
    out.push_back(std::move(b));
  }
  return out;
}

const char* event_name(uint32_t type) {
  switch (type) {
    case GENIE_EVENT_NODE_JOINED: return "NODE_JOINED";
    case GENIE_EVENT_NODE_LOST: return "NODE_LOST";
    case GENIE_EVENT_NODE_RECOVERED: return "NODE_RECOVERED";
    case GENIE_EVENT_GPU_AVAILABLE: return "GPU_AVAILABLE";
    case GENIE_EVENT_GPU_UNAVAILABLE: return "GPU_UNAVAILABLE";
    case GENIE_EVENT_GPU_OVERHEATED: return "GPU_OVERHEATED";
    case GENIE_EVENT_HEALTH_CHANGED: return "HEALTH_CHANGED";
    case GENIE_EVENT_BACKEND_SELECTED: return "BACKEND_SELECTED";
    default: return "UNKNOWN";
  }
}

}  // namespace genie
