// The CUDA device backend (docs/cuda.md): devices cuda:0 .. cuda:N-1 of
// this process, their memory (a stream-ordered pool per device, pinned
// staging for host copies), queues (one CUDA stream each, pooled), the
// kernels of every group in cuda_kernels.hpp, and the calibration.
//
// Kernels are called through one trampoline that makes the queue's device
// current, checks every tensor lives in that device's memory, and records
// the stream on each block for stream-ordered frees (memory.hpp).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/backend.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/memory.hpp"
#include "exec/cuda/queue.hpp"

namespace genie::cuda {

class CudaBackend final : public DeviceBackend {
 public:
  // Devices found by the caller (count > 0); throws Error when one cannot
  // be queried.
  explicit CudaBackend(int count);
  ~CudaBackend() override;

  const std::string& kind() const override { return kind_; }
  const std::vector<DeviceDesc>& devices() const override { return devices_; }

  Buffer allocate(int device, size_t bytes) override;
  Buffer allocate_pinned(size_t bytes) override;
  void fill_zero(Buffer& dst, size_t n, Queue* q) override;
  void copy_from_host(const void* src, Buffer& dst, size_t offset, size_t n, Queue* q) override;
  void copy_to_host(const Buffer& src, size_t offset, void* dst, size_t n, Queue* q) override;
  void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t n,
                   Queue* q) override;

  KernelFn find_kernel(const std::string& op) const override;
  // Kernels compute f16 and bf16 themselves.
  bool f32_compute() const override { return false; }
  // Embedding ids out of range and integer division by zero are raised by
  // the node that met them: those kernels read an error word back.
  bool kernel_waits(const std::string& op) const override { return op == "embedding" || op == "div"; }
  void convert(const TensorData& src, TensorData& dst, Queue* q) override;

  std::unique_ptr<Queue> create_queue(int device) override;
  void synchronize(int device) override;

  sched::DeviceProfile calibrate(int device, const sched::CalibrateOptions& opts) override;

  // The kernel of `op` in the union of the groups' tables (nullptr if none).
  KernelFn kernel(const std::string& op) const;
  // Work on `s` uses `b` (a buffer of this backend): frees wait for it.
  void note_use(const Buffer& b, const StreamPtr& s);
  DevicePool& pool(int device);

  // PCI bus id of a device ("0000:65:00.0"), as NVML's pciInfo.busId spells it.
  const std::string& pci_bus_id(int device) const { return pci_[static_cast<size_t>(device)]; }

 private:
  // A lane of `device` for work issued without a queue; returned on destruction.
  class Borrowed;
  std::unique_ptr<Lane> take_lane(int device);
  void give_lane(std::unique_ptr<Lane> lane);
  // DeviceBackend::check_device, which lives in libgenie (out of a plugin's reach).
  void check_index(int device) const;
  // `b`'s bytes at [offset, offset + n), which must be device memory of this backend.
  std::byte* mine(const Buffer& b, size_t offset, size_t n, const char* what) const;

  std::string kind_ = "cuda";
  std::vector<DeviceDesc> devices_;
  std::vector<std::string> pci_;
  KernelTable table_;
  struct PerDevice {
    std::once_flag pool_once;
    std::shared_ptr<DevicePool> pool;  // shared with the buffers it gave out
    std::mutex lanes_mu;
    std::vector<std::unique_ptr<Lane>> idle;
  };
  std::vector<std::unique_ptr<PerDevice>> per_;
  uint64_t keep_bytes_;
};

// The process's backend while it exists (kernels reach it through this).
CudaBackend* the_backend();

}  // namespace genie::cuda
