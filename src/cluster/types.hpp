// What the cluster layer knows about a node, and its JSON form (the schemas
// are in docs/cluster.md). cJSON objects built here are owned by the caller
// (JsonPtr).
#pragma once

#include <cjson/cJSON.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/select.hpp"
#include "genie.h"

namespace genie {

struct JsonDeleter {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using JsonPtr = std::unique_ptr<cJSON, JsonDeleter>;

// A new empty object / array; throws OUT_OF_MEMORY.
JsonPtr json_object();
JsonPtr json_array();
// Unformatted text of `j`; throws OUT_OF_MEMORY.
std::string json_text(const cJSON* j, bool pretty = false);
// Parses `text`; throws Error(PROTOCOL) naming `what` when it is not JSON.
JsonPtr json_parse(const std::string& text, const char* what);

// Milliseconds since the Unix epoch (what last_heartbeat_ms reports).
int64_t unix_ms();

struct GpuInfo {
  uint32_t index = 0;
  std::string name;
  uint64_t memory_total = 0;  // bytes
  uint64_t memory_used = 0;
  uint32_t utilization = 0;  // percent
  int32_t temperature_c = 0;
  bool available = true;    // utilisation <= 90 %
  bool overheated = false;  // temperature > 85 C
  std::string pci_bus_id;   // "0000:65:00.0" (NVML's pciInfo); "" if unknown
  std::string device;       // the local device it is ("cuda:1", matched by bus id); "" if none
};

// The C enum's values: GENIE_HEALTH_*.
enum class Health { Healthy = 0, Degraded = 1, Unhealthy = 2, Critical = 3 };
const char* health_str(Health h);
Health health_from_str(const std::string& s);  // unknown: Critical

struct NodeStatus {
  std::string id;
  std::string host;     // the node's own host name
  std::string address;  // where the master saw it ("ip:port"), if it did
  std::string listen;   // a worker: the host:port it serves on (registered with its master)
  std::vector<std::string> devices;  // a worker: the devices it offers its master ("cpu:0")
  genie_node_role_t role = GENIE_NODE_ROLE_CLIENT;
  std::string backend = "tcp";
  bool alive = true;                // status "alive" / "lost"
  int64_t last_heartbeat_ms = 0;    // Unix ms; 0: never
  std::vector<GpuInfo> gpus;
  std::string gpu_reason;           // why there are no GPUs (no NVML ...)
  Health health = Health::Healthy;
  std::vector<std::string> health_reasons;
};

JsonPtr gpu_to_json(const GpuInfo& g);
JsonPtr node_to_json(const NodeStatus& n);
// Throws Error(PROTOCOL) naming what is missing or malformed.
NodeStatus node_from_json(const cJSON* j);

// Whether a data-plane backend can be used on one end: the hardware probe
// and whether this build has its transport.
JsonPtr backends_to_json(const std::vector<BackendAvail>& b);
// Throws Error(PROTOCOL).
std::vector<BackendAvail> backends_from_json(const cJSON* j);

// GENIE_EVENT_* bit -> "NODE_JOINED" ...; "UNKNOWN" otherwise.
const char* event_name(uint32_t type);

}  // namespace genie
