// How much host memory this process may use: the machine's physical memory,
// what the kernel says is available now (MemAvailable: free memory plus the
// caches it can drop), and the limit of the process's memory cgroup (v2
// memory.max, v1 memory.limit_in_bytes) with what the cgroup already uses.
// A server's memory budget is taken from the smallest of these, never from
// the physical memory alone: in a container the cgroup limit is what gets a
// process killed, and on a shared machine other programs hold memory too.
#pragma once

#include <cstdint>
#include <string>

namespace genie {

struct HostMemory {
  uint64_t physical = 0;      // total RAM (0: unknown)
  uint64_t available = 0;     // MemAvailable (0: unknown)
  uint64_t cgroup_limit = 0;  // the tightest limit of the cgroup and its ancestors (0: none)
  uint64_t cgroup_usage = 0;  // what that cgroup holds now
  // What this process may still take: min(available, cgroup_limit -
  // cgroup_usage), each where known; physical when neither is.
  uint64_t headroom() const;
};

// Reads /proc/meminfo, /proc/self/cgroup and the cgroup files under
// /sys/fs/cgroup. `proc` and `sys_cgroup` replace those roots (tests).
HostMemory read_host_memory(const std::string& proc = "/proc", const std::string& sys_cgroup = "/sys/fs/cgroup");

// The share of the headroom a server's tensors may hold by default: the rest
// stays for the process itself (graphs, buffers, connections) and the system.
constexpr double kDefaultBudgetFraction = 0.8;
uint64_t default_memory_budget(const HostMemory& m);

}  // namespace genie
