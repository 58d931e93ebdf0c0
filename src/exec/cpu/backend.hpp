// The CPU device backend: host memory from the executor's BufferPool, the
// CPU kernel table, synchronous queues (kernels finish their work, split
// over the executor's thread pool by Parallel, before returning), and the
// CPU calibration. One device, cpu:0. Each Executor owns one, so that its
// buffer pool is its own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exec/backend.hpp"
#include "exec/buffer_pool.hpp"

namespace genie::cpu {

class CpuBackend final : public DeviceBackend {
 public:
  CpuBackend();

  const std::string& kind() const override { return kind_; }
  const std::vector<DeviceDesc>& devices() const override { return devices_; }

  // Host memory of the pool (allocations are reused when freed).
  Buffer allocate(int device, size_t bytes) override;
  // Host memory of the pool too: the CPU needs no page-locking.
  Buffer allocate_pinned(size_t bytes) override;
  void fill_zero(Buffer& dst, size_t n, Queue* q) override;
  void copy_from_host(const void* src, Buffer& dst, size_t offset, size_t n, Queue* q) override;
  void copy_to_host(const Buffer& src, size_t offset, void* dst, size_t n, Queue* q) override;
  void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t n,
                   Queue* q) override;

  KernelFn find_kernel(const std::string& op) const override;
  void convert(const TensorData& src, TensorData& dst, Queue* q) override;

  // Work on the CPU is done when issued: these queues only order nothing.
  std::unique_ptr<Queue> create_queue(int device) override;
  void synchronize(int device) override;

  // calibrate_local_cpu (exec/cpu/calibrate.hpp).
  sched::DeviceProfile calibrate(int device, const sched::CalibrateOptions& opts) override;

  BufferPool& buffers() { return *buffers_; }

 private:
  std::string kind_ = "cpu";
  std::vector<DeviceDesc> devices_;
  std::shared_ptr<BufferPool> buffers_ = BufferPool::create();
};

}  // namespace genie::cpu
