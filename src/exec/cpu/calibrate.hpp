// The CPU backend's own calibration: this machine's CPU as the scheduler
// sees it.
#pragma once

#include <cstdint>

#include "sched/plan.hpp"

namespace genie::cpu {

// Profile of this machine's CPU ("cpu:0"): peak FLOP/s from a short sgemm
// (OpenBLAS, as the CPU kernels use), the element-wise rate (vector_flops)
// from the CPU kernels' own vectorised GELU over an in-cache buffer, and
// memory bandwidth from memcpy, under 50 ms in all; capacity from the
// physical memory. The measured rates are kept in the scheduler's profile
// cache (sched/profile_cache.hpp), keyed by CPU model and core count, so
// later starts read them instead (a damaged file is ignored and rewritten).
// op_overhead_s is a default: the executor measures its own
// (measure_node_overhead). Never throws for cache I/O problems; throws
// Error(INTERNAL) only if the measurement itself fails. Thread-safe.
sched::DeviceProfile calibrate_local_cpu(const sched::CalibrateOptions& opts = {});

// Physical memory of this machine in bytes (0 if unknown).
uint64_t host_memory_capacity();

}  // namespace genie::cpu
