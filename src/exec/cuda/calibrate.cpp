// CudaBackend::calibrate: the device as the scheduler sees it, measured on
// first use and kept for the process (the measurement takes tens of
// milliseconds, mostly the first cuBLASLt call).
//
// peak_flops: the best of several f16 GEMMs 4096^3 through the same path as
// the matmul kernel (f16 and bf16 run at the same rate; f32 graphs run far
// below it unless TF32 is allowed, which the cost model does not model).
// mem_bw: a device-to-device copy of 256 MiB, bytes read + written per
// second, as the CPU's memcpy figure. vector_flops: the element rate of the
// device's conversion kernel (one read, one write: memory-bound, like every
// element-wise kernel) at the cost model's 8 FLOPs per element.
#include <algorithm>
#include <map>
#include <mutex>

#include "exec/cuda/backend.hpp"
#include "exec/cuda/blas.hpp"
#include "exec/cuda/convert.hpp"
#include "exec/cuda/plugin_util.hpp"

namespace genie::cuda {

namespace {

struct Rates {
  double gemm = 0, bw = 0, vector = 0;
};

class Timer {
 public:
  Timer() {
    check_cuda(cudaEventCreate(&a_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&b_), "cudaEventCreate");
  }
  ~Timer() {
    (void)cudaEventDestroy(a_);
    (void)cudaEventDestroy(b_);
  }
  // Seconds `issue` takes on `s` (the best of `reps`, after one warm-up).
  template <class F>
  double best(cudaStream_t s, int reps, F&& issue) {
    issue();
    double best_s = 1e30;
    for (int r = 0; r < reps; ++r) {
      check_cuda(cudaEventRecord(a_, s), "cudaEventRecord");
      issue();
      check_cuda(cudaEventRecord(b_, s), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(b_), "calibration");
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, a_, b_), "cudaEventElapsedTime");
      best_s = std::min(best_s, std::max(static_cast<double>(ms) * 1e-3, 1e-9));
    }
    return best_s;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

Rates measure(CudaBackend& be, int device) {
  Rates r;
  std::unique_ptr<Queue> q = be.create_queue(device);
  Lane& lane = as_cuda(q.get())->lane();
  cudaStream_t s = lane.stream->handle;
  DeviceGuard g(device);
  Timer t;
  {
    const int64_t n = 4096;
    const size_t bytes = static_cast<size_t>(n * n) * 2;
    Buffer a = be.allocate(device, bytes), b = be.allocate(device, bytes), c = be.allocate(device, bytes);
    for (Buffer* x : {&a, &b, &c}) be.note_use(*x, lane.stream);
    check_cuda(cudaMemsetAsync(a.data(), 0, bytes, s), "cudaMemsetAsync");
    check_cuda(cudaMemsetAsync(b.data(), 0, bytes, s), "cudaMemsetAsync");
    Gemm gm;
    gm.m = gm.n = gm.k = n;
    gm.lda = gm.ldb = gm.ldc = n;
    const double sec = t.best(s, 3, [&] { gemm(lane, DType::F16, gm, a.data(), b.data(), c.data(), nullptr); });
    r.gemm = 2.0 * static_cast<double>(n * n * n) / sec;
  }
  {
    const size_t bytes = size_t{256} << 20;
    Buffer a = be.allocate(device, bytes), b = be.allocate(device, bytes);
    be.note_use(a, lane.stream);
    be.note_use(b, lane.stream);
    check_cuda(cudaMemsetAsync(a.data(), 0, bytes, s), "cudaMemsetAsync");
    const double copy_s = t.best(s, 3, [&] {
      check_cuda(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    });
    r.bw = 2.0 * static_cast<double>(bytes) / copy_s;
    const int64_t elems = static_cast<int64_t>(bytes / 4);
    const double conv_s =
        t.best(s, 3, [&] { launch_convert(a.data(), DType::F32, b.data(), DType::F16, elems, s); });
    r.vector = 8.0 * static_cast<double>(elems) / conv_s;
  }
  q->synchronize();
  return r;
}

}  // namespace

sched::DeviceProfile CudaBackend::calibrate(int device, const sched::CalibrateOptions& opts) {
  check_index(device);
  static std::mutex mu;
  static std::map<int, Rates> measured;
  Rates r;
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = measured.find(device);
    if (it == measured.end()) it = measured.emplace(device, measure(*this, device)).first;
    r = it->second;
  }
  sched::DeviceProfile p;
  p.node_id = opts.node_id;
  p.device = cat("cuda:", device);
  p.peak_flops = r.gemm;
  p.vector_flops = r.vector;
  p.mem_bw_bytes_per_s = r.bw;
  p.mem_capacity_bytes = devices_[static_cast<size_t>(device)].capacity_bytes;
  size_t free_b = 0, total_b = 0;
  {
    DeviceGuard g(device);
    check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  }
  // What this process's pool holds counts as available to it.
  const uint64_t avail = std::min<uint64_t>(free_b + pool(device).live_bytes(), p.mem_capacity_bytes);
  const double frac = std::clamp(opts.budget_fraction, 0.01, 1.0);
  p.mem_budget_bytes = static_cast<uint64_t>(static_cast<double>(avail) * frac);
  // A launch and the executor's bookkeeping per node.
  p.op_overhead_s = 8e-6;
  return p;
}

}  // namespace genie::cuda
