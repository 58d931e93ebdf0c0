// The probe of the dpdk and dpdk_gpudev transports (dataplane/select.hpp).
// EAL initialises once per process, takes about half a second and claims
// devices, hugepages and signal handlers; so the full probe (rte_eal_init,
// rte_eth_dev_count_avail, rte_gpu_count_avail) runs only on request
// (genie_discover, or an explicit dpdk/dpdk_gpudev backend) and always in a
// forked child process (dataplane/child_probe.hpp), which reports through a
// pipe and exits: this process never runs EAL. Compiled into libgenie, not
// the plugin.
#pragma once

#include <cstdint>
#include <string>

namespace genie {

struct DpdkProbe {
  bool probed = false;  // the EAL probe ran
  bool eal_ok = false;
  int ports = 0;
  int gpus = 0;         // rte_gpu_count_avail
  bool gpudev_lib = false;
  std::string reason;   // what was found, or why not
  double probe_ms = 0;
};
// Full probe in a forked child (waits at most timeout_ms).
DpdkProbe probe_dpdk(int64_t timeout_ms);
// Not probed: the reason says so.
DpdkProbe dpdk_not_probed(const std::string& why);

// Whether the dpdk transport plugin is installed, and where (it is not
// loaded: loading it starts an EAL in this process).
std::string dpdk_plugin_status();

}  // namespace genie
