#include "cluster/health.hpp"

#include <cstdio>
#include <cstring>

#include "core/error.hpp"

namespace genie {

namespace {
void raise(HealthReport& r, Health h, std::string why) {
  if (static_cast<int>(h) > static_cast<int>(r.level)) r.level = h;
  r.reasons.push_back(std::move(why));
}
}  // namespace

HealthReport evaluate_health(const HealthInputs& in) {
  HealthReport r;
  for (const GpuInfo& g : in.gpus)
    if (g.overheated)
      raise(r, Health::Degraded, cat("GPU ", g.index, " (", g.name, ") at ", g.temperature_c, " C (above 85 C)"));
  if (!in.gpu_error.empty()) raise(r, Health::Degraded, cat("GPU monitor: ", in.gpu_error));
  if (in.remote) {
    if (in.master_lost)
      raise(r, Health::Critical, cat("master ", in.master, " lost: no heartbeat reply within the timeout"));
    else if (in.session_failed)
      raise(r, Health::Unhealthy, cat("the session with master ", in.master,
                                      " is gone (create a new context to use it again)"));
    else if (in.reconnecting)
      raise(r, Health::Degraded, cat("reconnecting to master ", in.master));
  }
  for (const std::string& p : in.lost_peers) raise(r, Health::Degraded, cat("peer ", p, " lost"));
  if (in.memory_available_fraction >= 0) {
    const double pct = in.memory_available_fraction * 100.0;
    char buf[96];
    std::snprintf(buf, sizeof buf, "memory pressure: %.1f%% of host memory available", pct);
    if (pct < 2)
      raise(r, Health::Critical, buf);
    else if (pct < 5)
      raise(r, Health::Unhealthy, buf);
    else if (pct < 10)
      raise(r, Health::Degraded, buf);
  }
  return r;
}

double memory_available_fraction() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  double total = -1, avail = -1;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "MemTotal: %llu kB", &kb) == 1) total = static_cast<double>(kb);
    if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = static_cast<double>(kb);
  }
  std::fclose(f);
  if (total <= 0 || avail < 0) return -1;
  return avail / total;
}

}  // namespace genie
