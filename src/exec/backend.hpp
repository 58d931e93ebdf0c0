// The device-backend interface: everything the executor and the runtime do
// with a kind of device goes through one DeviceBackend per kind.
//
// A backend serves the devices of one kind ("cpu", "cuda", ...), numbered
// 0..N-1: it enumerates them, allocates, frees and copies their memory, finds
// the kernel for an op, issues work on queues (streams) and synchronises,
// and calibrates each device for the scheduler. The CPU backend is built in
// (exec/cpu/backend.hpp); the others are shared objects loaded at run time
// (exec/backend_loader.hpp), so that libgenie starts and runs where their
// drivers are missing.
//
// Memory: allocate() returns a core Buffer that knows its device and memory
// kind and frees itself through the backend when destroyed. The executor
// drops a value once its last reader is issued, so a buffer may be
// released while work queued on a device still reads it: a backend with
// asynchronous queues frees in stream order (cudaFreeAsync, or reuse only
// after the queue has passed an event). Copies take a queue: with nullptr
// they complete before returning; with a queue they are ordered on it and
// complete by its synchronize(). Host memory given to a copy is plain
// pageable memory unless the backend says otherwise.
//
// Threads: every member may be called from any thread, concurrently, except
// that one Queue is used by one thread at a time.
//
// Every virtual member is pure or inline, so that a backend built as a
// separate shared object needs nothing of libgenie but its headers.
//
// docs/architecture.md, "Writing a device backend", walks through adding one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/tensor_data.hpp"
#include "exec/kernel.hpp"
#include "sched/plan.hpp"

namespace genie {

// An ordered stream of work on one device (a CUDA stream). Work issued on a
// queue runs in issue order; synchronize() returns when all of it is done
// and throws the first error any of it met.
class Queue {
 public:
  virtual ~Queue() = default;
  virtual int device() const = 0;
  virtual void synchronize() = 0;
};

// One device a backend offers.
struct DeviceDesc {
  Device id;                             // "cpu:0", "cuda:1" (no node: this process)
  MemoryKind memory = MemoryKind::Host;  // what allocate() returns on it
  uint64_t capacity_bytes = 0;           // its memory (0 if unknown)
  std::string description;               // the hardware, for logs ("NVIDIA H100 80GB HBM3")
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // The device kind served ("cpu", "cuda"): Device::kind of its devices.
  virtual const std::string& kind() const = 0;
  // Its devices, device i at index i. Fixed for the backend's life.
  virtual const std::vector<DeviceDesc>& devices() const = 0;

  // --- memory ---------------------------------------------------------
  // `bytes` (> 0 is not required) of memory on `device`, contents
  // undefined; the buffer frees it through this backend when destroyed.
  // Throws Error(OUT_OF_MEMORY) naming the device, INVALID_ARGUMENT for a
  // device index out of range.
  virtual Buffer allocate(int device, size_t bytes) = 0;
  // `bytes` of host memory the devices' DMA engines reach directly
  // (MemoryKind::PinnedHost: page-locked, cudaHostAlloc), for staging
  // transfers; a backend without such memory returns pageable host memory
  // (MemoryKind::Host). Host code may use it either way.
  virtual Buffer allocate_pinned(size_t bytes) = 0;
  // Sets the first `n` bytes of `dst` to zero.
  virtual void fill_zero(Buffer& dst, size_t n, Queue* q) = 0;
  // Host memory -> dst[offset, offset + n).
  virtual void copy_from_host(const void* src, Buffer& dst, size_t offset, size_t n, Queue* q) = 0;
  // src[offset, offset + n) -> host memory.
  virtual void copy_to_host(const Buffer& src, size_t offset, void* dst, size_t n, Queue* q) = 0;
  // Between two buffers of this backend (one device or two).
  virtual void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t n,
                           Queue* q) = 0;

  // --- kernels --------------------------------------------------------
  // The kernel for `op` on this backend's devices, nullptr if none. Its
  // tensors live on the device it runs for; it issues on args.queue.
  virtual KernelFn find_kernel(const std::string& op) const = 0;
  // Whether kernels compute in f32 only: then the executor has f16/bf16
  // values converted (convert below) around each kernel call.
  virtual bool f32_compute() const { return true; }
  // Whether `op`'s kernel may wait for its queue before it returns (it
  // reads a result back, as a check for data-dependent errors does): its
  // caller then waits for the work issued before it. False: kernels only
  // queue work.
  virtual bool kernel_waits(const std::string& /*op*/) const { return false; }
  // Element conversion on the device: `dst` (same element count, allocated
  // by this backend on src's device) receives src's values as dst's dtype.
  virtual void convert(const TensorData& src, TensorData& dst, Queue* q) = 0;

  // --- queues ---------------------------------------------------------
  virtual std::unique_ptr<Queue> create_queue(int device) = 0;
  // Waits for all work issued on `device`, on any queue.
  virtual void synchronize(int device) = 0;

  // --- calibration ----------------------------------------------------
  // The scheduler's profile of `device` (DeviceProfile::device is its
  // id, node_id opts.node_id), measured or read from the profile cache.
  virtual sched::DeviceProfile calibrate(int device, const sched::CalibrateOptions& opts) = 0;

  // Convenience over the members above.
  // A tensor on `device` whose bytes are undefined.
  TensorPtr make_tensor(int device, DType dtype, const Shape& shape);
  // Throws Error(INVALID_ARGUMENT) unless 0 <= device < devices().size().
  void check_device(int device) const;
};

// Where an executor runs a graph: a backend and one of its devices.
struct DeviceRef {
  DeviceBackend* backend = nullptr;
  int index = 0;
  bool operator==(const DeviceRef&) const = default;
};

}  // namespace genie

// ---------------------------------------------------------------------------
// Plugins: the entry point of a backend shared object.
// ---------------------------------------------------------------------------
//
// A backend plugin, libgenie_backend_<kind>.so, exports one C symbol,
// GENIE_DEVICE_BACKEND_ENTRY, a function returning its entry. The loader
// reads abi_version first and refuses an entry of another version without
// touching anything else, so the layout below may change only with a new
// version. A plugin is C++ built against the same genie headers and C++
// runtime: abi_version covers the DeviceBackend layout and every type it
// passes (Buffer, TensorData, KernelArgs, DeviceProfile).

#define GENIE_DEVICE_BACKEND_ENTRY "genie_device_backend_entry"

namespace genie {

// Bumped whenever DeviceBackend, DeviceBackendEntry, BackendHost or a type
// they pass changes.
constexpr uint32_t kDeviceBackendAbi = 2;  // 2: DeviceBackend::kernel_waits

// What libgenie offers a plugin.
struct BackendHost {
  uint32_t abi_version = kDeviceBackendAbi;
  // The built-in CPU kernels, for a backend whose device memory host code
  // can reach (nullptr when none).
  KernelFn (*cpu_kernel)(const std::string& op) = nullptr;
  // Element conversion in host memory (core/tensor_data.hpp), for the same
  // backends' convert().
  void (*convert_elements)(const std::byte* src, DType from, std::byte* dst, DType to, int64_t n) = nullptr;
};

struct DeviceBackendEntry {
  uint32_t abi_version;  // kDeviceBackendAbi of the headers the plugin was built with
  const char* kind;      // the device kind it serves
  // Creates the backend. On failure (no driver, no device) returns nullptr
  // and writes why, NUL-terminated, into why[0, why_size): the reason
  // genie_tensor_alloc reports for the kind. Must not throw.
  DeviceBackend* (*create)(const BackendHost* host, char* why, size_t why_size);
};

using DeviceBackendEntryFn = const DeviceBackendEntry* (*)();

}  // namespace genie
