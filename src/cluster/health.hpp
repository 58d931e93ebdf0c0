// Health checks of one node: GPUs, network (the master), peers, memory
// pressure. Each finding raises the level to at least its own and adds a
// reason; the worst finding wins.
#pragma once

#include <string>
#include <vector>

#include "cluster/types.hpp"

namespace genie {

struct HealthInputs {
  std::vector<GpuInfo> gpus;
  std::string gpu_error;          // NVML failed after loading ("" if fine)
  bool remote = false;            // has a master
  bool master_lost = false;       // heartbeats unanswered past the timeout
  bool session_failed = false;    // the session with the master is gone
  bool reconnecting = false;      // the session is reconnecting
  std::string master;             // "id at host:port", for reasons
  std::vector<std::string> lost_peers;
  // Memory: MemAvailable / MemTotal of /proc/meminfo (negative: unknown).
  double memory_available_fraction = -1;
};

struct HealthReport {
  Health level = Health::Healthy;
  std::vector<std::string> reasons;
};

HealthReport evaluate_health(const HealthInputs& in);
// MemAvailable / MemTotal from /proc/meminfo, or -1.
double memory_available_fraction();

}  // namespace genie
