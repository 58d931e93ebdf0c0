#include "exec/cpu/backend.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "exec/cpu/calibrate.hpp"
#include "exec/cpu/kernels.hpp"
#include "exec/custom_kernels.hpp"

namespace genie::cpu {

namespace {

class CpuQueue final : public Queue {
 public:
  int device() const override { return 0; }
  void synchronize() override {}
};

void check_host(const Buffer& b, size_t offset, size_t n, const char* what) {
  if (!b.host_accessible())
    fail(GENIE_ERR_INTERNAL, "cpu backend: ", what, " is ", memory_kind_name(b.memory()), " memory of ",
         b.device().str());
  check(offset <= b.size() && n <= b.size() - offset, GENIE_ERR_INTERNAL, "cpu backend: ", what, " range [",
        offset, ", +", n, ") exceeds its ", b.size(), " bytes");
}

}  // namespace

CpuBackend::CpuBackend() {
  DeviceDesc d;
  d.memory = MemoryKind::Host;
  d.capacity_bytes = host_memory_capacity();
  d.description = std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " CPU cores";
  devices_.push_back(std::move(d));
}

Buffer CpuBackend::allocate(int device, size_t bytes) {
  if (device != 0) check_device(device);
  return buffers_->take(bytes);
}

Buffer CpuBackend::allocate_pinned(size_t bytes) { return buffers_->take(bytes); }

void CpuBackend::fill_zero(Buffer& dst, size_t n, Queue*) {
  check_host(dst, 0, n, "destination");
  std::memset(dst.data(), 0, n);
}

void CpuBackend::copy_from_host(const void* src, Buffer& dst, size_t offset, size_t n, Queue*) {
  check_host(dst, offset, n, "destination");
  if (n) std::memcpy(dst.data() + offset, src, n);
}

void CpuBackend::copy_to_host(const Buffer& src, size_t offset, void* dst, size_t n, Queue*) {
  check_host(src, offset, n, "source");
  if (n) std::memcpy(dst, src.data() + offset, n);
}

void CpuBackend::copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t n,
                             Queue*) {
  check_host(src, src_offset, n, "source");
  check_host(dst, dst_offset, n, "destination");
  if (n) std::memmove(dst.data() + dst_offset, src.data() + src_offset, n);
}

KernelFn CpuBackend::find_kernel(const std::string& op) const {
  if (KernelFn fn = cpu::find_kernel(op)) return fn;
  return custom_kernel_entry(kind_, op);  // a custom op's CPU kernel (docs/custom-ops.md)
}

void CpuBackend::convert(const TensorData& src, TensorData& dst, Queue*) { convert_into(src, dst); }

std::unique_ptr<Queue> CpuBackend::create_queue(int device) {
  check_device(device);
  return std::make_unique<CpuQueue>();
}

void CpuBackend::synchronize(int device) { check_device(device); }

sched::DeviceProfile CpuBackend::calibrate(int device, const sched::CalibrateOptions& opts) {
  check_device(device);
  return calibrate_local_cpu(opts);
}

}  // namespace genie::cpu
