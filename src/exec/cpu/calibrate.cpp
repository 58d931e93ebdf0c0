// calibrate_local_cpu: a short sgemm, vector and memcpy measurement, cached
// on disk through the scheduler's profile cache.
#include "exec/cpu/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/memory.hpp"
#include "exec/cpu/blas.hpp"
#include "exec/cpu/vec_math.hpp"  // the CPU kernels' own vectorised math

namespace genie::cpu {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        return b == std::string::npos ? "" : line.substr(b);
      }
    }
  return "unknown";
}

// Best of several sgemm runs: FLOP/s.
double measure_sgemm() {
  const int n = 256;
  std::vector<float> a(static_cast<size_t>(n) * n, 1.0f), b(a.size(), 0.5f), c(a.size(), 0.0f);
  double best = 1e30;
  const SgemmFn sgemm = blas_sgemm();
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = now_s();
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
          n);
    const double dt = now_s() - t0;
    if (rep > 0) best = std::min(best, dt);  // the first run warms up the threads
  }
  check(c[0] == 0.5f * n, GENIE_ERR_INTERNAL, "calibration sgemm gave a wrong result");
  return 2.0 * n * n * n / std::max(best, 1e-9);
}

// Best of two 16 MiB copies after a first one that also faults the
// destination in (32 MiB touched: beyond the share of the last-level cache
// a process keeps on most machines, as the weights a model streams are once
// other work has run): bytes read + written per second.
double measure_memcpy() {
  const size_t bytes = size_t{16} << 20;
  std::vector<char> src(bytes, 1);
  std::unique_ptr<char[]> dst(new char[bytes]);  // uninitialised: the first copy writes it
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    src[static_cast<size_t>(rep)] = static_cast<char>(rep);
    const double t0 = now_s();
    std::memcpy(dst.get(), src.data(), bytes);
    const double dt = now_s() - t0;
    if (rep > 0) best = std::min(best, dt);
  }
  check(dst[2] == 2, GENIE_ERR_INTERNAL, "calibration memcpy gave a wrong result");
  return 2.0 * static_cast<double>(bytes) / std::max(best, 1e-9);
}

// The rate element-wise kernels reach, in the cost model's FLOPs: the CPU
// kernels' tanh-approximated GELU (8 model FLOPs per element, cost.cpp) over
// a buffer that stays in cache, so the figure is compute, not memory; best
// of several passes.
double measure_vector() {
  const size_t n = 16384;
  std::vector<float> x(n), y(n, 0.0f);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 97) * 0.05f - 2.0f;
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    const double t0 = now_s();
    for (size_t i = 0; i + 4 <= n; i += 4) {
      vec::F4 v;
      std::memcpy(&v, x.data() + i, sizeof v);
      v = vec::gelu_tanh(v);
      std::memcpy(y.data() + i, &v, sizeof v);
    }
    const double dt = now_s() - t0;
    if (rep > 0) best = std::min(best, dt);
  }
  check(std::isfinite(y[n - 1]) && y[0] < 0.0f && y[0] > -0.2f, GENIE_ERR_INTERNAL,
        "calibration element-wise pass gave a wrong result");
  return 8.0 * static_cast<double>(n) / std::max(best, 1e-9);
}

}  // namespace

sched::DeviceProfile calibrate_local_cpu(const sched::CalibrateOptions& opts) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  sched::DeviceIdentity id;
  id.kind = "cpu";
  id.model = cpu_model();
  id.units = std::max(1u, std::thread::hardware_concurrency());
  const std::string dir = sched::profile_cache_dir(opts);
  const std::string file = sched::profile_cache_file(dir, id);

  sched::MeasuredRates r;
  if (!opts.use_cache || file.empty() || !sched::read_profile_cache(file, id, &r)) {
    // Whole units, so the cached text round-trips exactly.
    r.peak_flops = std::round(measure_sgemm());
    r.vector_flops = std::round(measure_vector());
    r.mem_bw_bytes_per_s = std::round(measure_memcpy());
    if (opts.use_cache && !file.empty()) sched::write_profile_cache(dir, file, id, r);
  }
  sched::DeviceProfile d;
  d.node_id = opts.node_id;
  d.device = "cpu:0";
  d.peak_flops = r.peak_flops;
  d.vector_flops = r.vector_flops;
  d.mem_bw_bytes_per_s = r.mem_bw_bytes_per_s;
  // Available memory and the cgroup limit, not the physical memory alone.
  const HostMemory m = read_host_memory();
  d.mem_capacity_bytes = m.physical;
  const uint64_t avail = m.headroom();
  const double frac = std::clamp(opts.budget_fraction, 0.01, 1.0);
  d.mem_budget_bytes =
      static_cast<uint64_t>(static_cast<double>(std::min(avail, d.mem_capacity_bytes)) * frac);
  d.op_overhead_s = 2e-6;
  if (opts.use_cache && !file.empty())
    d.learned = sched::CostLearner::shared(sched::CostLearner::file_for_profile(file));
  return d;
}

uint64_t host_memory_capacity() { return read_host_memory().physical; }

}  // namespace genie::cpu
