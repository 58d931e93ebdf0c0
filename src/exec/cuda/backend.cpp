#include "exec/cuda/backend.hpp"

#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "exec/cuda/convert.hpp"
#include "exec/cuda/plugin_util.hpp"
#include "exec/cuda/staging.hpp"

namespace genie::cuda {

namespace {

CudaBackend* g_backend = nullptr;

// Up to these sizes a copy of pageable memory goes straight to the driver.
// Device to host, staging pays from 64 KiB on. Host to device, a copy of
// one staging chunk or less has nothing to overlap, and the driver's own
// pipelined path was faster there (1 MiB on an H100 host: 14.7 GB/s
// against 6.7 staged; docs/cuda.md).
constexpr size_t kDirectToHostBytes = size_t{64} << 10;
constexpr size_t kDirectToDeviceBytes = Staging::kChunk;

uint64_t env_bytes(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  return end != nullptr && *end == '\0' ? x : dflt;
}

bool on_device(const TensorData* t, int device) {
  const Device& d = t->device();
  return t->memory() == MemoryKind::Device && d.kind == "cuda" && d.index == device && d.node.empty();
}

// Every kernel of the backend is called through here (find_kernel).
void run_kernel(const KernelArgs& a) {
  CudaBackend* be = the_backend();
  check(be != nullptr && a.queue != nullptr, GENIE_ERR_INTERNAL, "cuda backend: kernel '", a.op,
        "' issued without a queue");
  CudaQueue* q = as_cuda(a.queue);
  const int dev = q->device();
  for (const TensorData* t : a.in)
    check(t == nullptr || on_device(t, dev), GENIE_ERR_INTERNAL, "cuda backend: kernel '", a.op,
          "' issued on cuda:", dev, " was given a tensor of ", t ? t->device().kind : "", ":",
          t ? t->device().index : 0);
  for (const TensorData* t : a.out)
    check(t != nullptr && on_device(t, dev), GENIE_ERR_INTERNAL, "cuda backend: kernel '", a.op,
          "' issued on cuda:", dev, " must write memory of that device");
  KernelFn fn = be->kernel(a.op);
  check(fn != nullptr, GENIE_ERR_UNSUPPORTED, "cuda backend: no kernel for op '", a.op, "'");
  DeviceGuard g(dev);
  // Noted before the launch: a kernel that fails half-way has still queued work.
  const StreamPtr& s = q->lane().stream;
  for (const TensorData* t : a.in)
    if (t != nullptr) be->note_use(t->buffer(), s);
  for (TensorData* t : a.out) be->note_use(t->buffer(), s);
  fn(a);
}

}  // namespace

CudaBackend* the_backend() { return g_backend; }

// A lane for work issued without a queue: taken from the device's pool and
// given back, synchronised, when the call is done.
class CudaBackend::Borrowed {
 public:
  Borrowed(CudaBackend& be, int device) : be_(be), lane_(be.take_lane(device)) {}
  ~Borrowed() {
    if (lane_) be_.give_lane(std::move(lane_));
  }
  Lane& operator*() { return *lane_; }
  Lane* operator->() { return lane_.get(); }
  void finish() {
    DeviceGuard g(lane_->stream->device);
    check_cuda(cudaStreamSynchronize(lane_->stream->handle), "copy");
  }

 private:
  CudaBackend& be_;
  std::unique_ptr<Lane> lane_;
};

CudaBackend::CudaBackend(int count) : keep_bytes_(env_bytes("GENIE_CUDA_POOL_KEEP_BYTES", UINT64_MAX)) {
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties");
    char bus[32] = {};
    check_cuda(cudaDeviceGetPCIBusId(bus, sizeof bus, i), "cudaDeviceGetPCIBusId");
    DeviceDesc d;
    d.id.kind = kind_;
    d.id.index = i;
    d.memory = MemoryKind::Device;
    d.capacity_bytes = prop.totalGlobalMem;
    d.description = cat(prop.name, " (sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount, " SMs, PCI ",
                        bus, ")");
    devices_.push_back(std::move(d));
    pci_.emplace_back(bus);
    per_.push_back(std::make_unique<PerDevice>());
  }
  add_blas_kernels(table_);
  add_conv_kernels(table_);
  add_elementwise_kernels(table_);
  add_norm_kernels(table_);
  add_layout_kernels(table_);
  add_reduce_kernels(table_);
  add_pool_kernels(table_);
  add_attention_kernels(table_);
  g_backend = this;
}

CudaBackend::~CudaBackend() {
  if (g_backend == this) g_backend = nullptr;
}

DevicePool& CudaBackend::pool(int device) {
  check_index(device);
  PerDevice& p = *per_[static_cast<size_t>(device)];
  std::call_once(p.pool_once, [&] { p.pool = std::make_shared<DevicePool>(device, keep_bytes_); });
  return *p.pool;
}

Buffer CudaBackend::allocate(int device, size_t bytes) {
  pool(device);
  std::shared_ptr<DevicePool> p = per_[static_cast<size_t>(device)]->pool;
  void* ptr = p->allocate(bytes);
  Device id;
  id.kind = kind_;
  id.index = device;
  return Buffer(static_cast<std::byte*>(ptr), bytes, MemoryKind::Device, id,
                [p = std::move(p)](std::byte* q) { p->release(q); });
}

Buffer CudaBackend::allocate_pinned(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    fail(GENIE_ERR_OUT_OF_MEMORY, "cannot page-lock ", bytes, " bytes of host memory");
  }
  check_cuda(e, "cudaHostAlloc");
  return Buffer(static_cast<std::byte*>(p), bytes, MemoryKind::PinnedHost, Device{},
                [](std::byte* q) { (void)cudaFreeHost(q); });
}

void CudaBackend::check_index(int device) const {
  check(device >= 0 && static_cast<size_t>(device) < devices_.size(), GENIE_ERR_INVALID_ARGUMENT, "device cuda:",
        device, " does not exist (this process has ", devices_.size(), " CUDA device(s))");
}

std::byte* CudaBackend::mine(const Buffer& b, size_t offset, size_t n, const char* what) const {
  check(b.memory() == MemoryKind::Device && b.device().kind == kind_ && b.device().node.empty() &&
            b.device().index >= 0 && static_cast<size_t>(b.device().index) < devices_.size(),
        GENIE_ERR_INTERNAL, "cuda backend: the ", what, " is not CUDA device memory but ", b.device().kind, ":",
        b.device().index);
  check(offset <= b.size() && n <= b.size() - offset, GENIE_ERR_INTERNAL, "cuda backend: ", what, " range [",
        offset, ", +", n, ") exceeds its ", b.size(), " bytes");
  return b.data() + offset;
}

void CudaBackend::note_use(const Buffer& b, const StreamPtr& s) {
  if (b.memory() == MemoryKind::Device && b.device().kind == kind_) pool(b.device().index).note_use(b.data(), s);
}

void CudaBackend::fill_zero(Buffer& dst, size_t n, Queue* q) {
  std::byte* p = mine(dst, 0, n, "destination");
  if (n == 0) return;
  const int dev = dst.device().index;
  DeviceGuard g(dev);
  if (q != nullptr) {
    check(q->device() == dev, GENIE_ERR_INTERNAL, "cuda backend: a queue of cuda:", q->device(), " for cuda:", dev);
    note_use(dst, as_cuda(q)->lane().stream);
    check_cuda(cudaMemsetAsync(p, 0, n, as_cuda(q)->stream()), "cudaMemsetAsync");
    return;
  }
  Borrowed lane(*this, dev);
  note_use(dst, lane->stream);
  check_cuda(cudaMemsetAsync(p, 0, n, lane->stream->handle), "cudaMemsetAsync");
  lane.finish();
}

void CudaBackend::copy_from_host(const void* src, Buffer& dst, size_t offset, size_t n, Queue* q) {
  std::byte* p = mine(dst, offset, n, "destination");
  if (n == 0) return;
  const int dev = dst.device().index;
  DeviceGuard g(dev);
  const auto issue = [&](Lane& lane) {
    note_use(dst, lane.stream);
    if (n <= kDirectToDeviceBytes || is_pinned(src))
      check_cuda(cudaMemcpyAsync(p, src, n, cudaMemcpyHostToDevice, lane.stream->handle), "cudaMemcpyAsync");
    else
      lane.stager().to_device(p, src, n, lane.stream->handle);
  };
  if (q != nullptr) {
    check(q->device() == dev, GENIE_ERR_INTERNAL, "cuda backend: a queue of cuda:", q->device(), " for cuda:", dev);
    issue(as_cuda(q)->lane());
    return;
  }
  Borrowed lane(*this, dev);
  issue(*lane);
  lane.finish();
}

void CudaBackend::copy_to_host(const Buffer& src, size_t offset, void* dst, size_t n, Queue* q) {
  const std::byte* p = mine(src, offset, n, "source");
  if (n == 0) return;
  const int dev = src.device().index;
  DeviceGuard g(dev);
  // Staged copies return complete; direct ones are waited for without a queue.
  const auto issue = [&](Lane& lane) {
    note_use(src, lane.stream);
    if (n <= kDirectToHostBytes || is_pinned(dst)) {
      check_cuda(cudaMemcpyAsync(dst, p, n, cudaMemcpyDeviceToHost, lane.stream->handle), "cudaMemcpyAsync");
      return true;
    }
    lane.stager().to_host(dst, p, n, lane.stream->handle);
    return false;
  };
  if (q != nullptr) {
    check(q->device() == dev, GENIE_ERR_INTERNAL, "cuda backend: a queue of cuda:", q->device(), " for cuda:", dev);
    issue(as_cuda(q)->lane());
    return;
  }
  Borrowed lane(*this, dev);
  if (issue(*lane)) lane.finish();
}

void CudaBackend::copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset, size_t n,
                              Queue* q) {
  const std::byte* from = mine(src, src_offset, n, "source");
  std::byte* to = mine(dst, dst_offset, n, "destination");
  if (n == 0 || from == to) return;
  const int sdev = src.device().index;
  const int ddev = dst.device().index;
  // Overlapping ranges of one block (memmove semantics) go through a copy.
  if (sdev == ddev && from < to + n && to < from + n) {
    Buffer tmp = allocate(sdev, n);
    copy_device(src, src_offset, tmp, 0, n, q);
    copy_device(tmp, 0, dst, dst_offset, n, q);
    return;
  }
  DeviceGuard g(sdev);
  const auto issue = [&](Lane& lane) {
    note_use(src, lane.stream);
    note_use(dst, lane.stream);
    if (sdev == ddev)
      check_cuda(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, lane.stream->handle), "cudaMemcpyAsync");
    else
      check_cuda(cudaMemcpyPeerAsync(to, ddev, from, sdev, n, lane.stream->handle), "cudaMemcpyPeerAsync");
  };
  if (q != nullptr) {
    check(q->device() == sdev || q->device() == ddev, GENIE_ERR_INTERNAL, "cuda backend: a queue of cuda:",
          q->device(), " for a copy from cuda:", sdev, " to cuda:", ddev);
    issue(as_cuda(q)->lane());
    return;
  }
  Borrowed lane(*this, sdev);
  issue(*lane);
  lane.finish();
}

KernelFn CudaBackend::kernel(const std::string& op) const {
  auto it = table_.find(op);
  return it == table_.end() ? nullptr : it->second;
}

KernelFn CudaBackend::find_kernel(const std::string& op) const {
  return table_.count(op) != 0 ? &run_kernel : nullptr;
}

void CudaBackend::convert(const TensorData& src, TensorData& dst, Queue* q) {
  check(src.numel() == dst.numel(), GENIE_ERR_INTERNAL, "cuda backend: convert of ", src.numel(),
        " elements into ", dst.numel());
  const std::byte* from = mine(src.buffer(), 0, static_cast<size_t>(src.numel()) * dtype_size(src.dtype()), "source");
  std::byte* to = mine(dst.buffer(), 0, static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype()), "destination");
  const int dev = src.device().index;
  check(dst.device().index == dev, GENIE_ERR_INTERNAL, "cuda backend: convert from cuda:", dev, " into cuda:",
        dst.device().index);
  DeviceGuard g(dev);
  if (q != nullptr) {
    check(q->device() == dev, GENIE_ERR_INTERNAL, "cuda backend: a queue of cuda:", q->device(), " for cuda:", dev);
    note_use(src.buffer(), as_cuda(q)->lane().stream);
    note_use(dst.buffer(), as_cuda(q)->lane().stream);
    launch_convert(from, src.dtype(), to, dst.dtype(), src.numel(), as_cuda(q)->stream());
    return;
  }
  Borrowed lane(*this, dev);
  note_use(src.buffer(), lane->stream);
  note_use(dst.buffer(), lane->stream);
  launch_convert(from, src.dtype(), to, dst.dtype(), src.numel(), lane->stream->handle);
  lane.finish();
}

std::unique_ptr<Lane> CudaBackend::take_lane(int device) {
  check_index(device);
  PerDevice& p = *per_[static_cast<size_t>(device)];
  {
    std::lock_guard<std::mutex> lk(p.lanes_mu);
    if (!p.idle.empty()) {
      std::unique_ptr<Lane> l = std::move(p.idle.back());
      p.idle.pop_back();
      return l;
    }
  }
  return std::make_unique<Lane>(device);
}

void CudaBackend::give_lane(std::unique_ptr<Lane> lane) {
  PerDevice& p = *per_[static_cast<size_t>(lane->stream->device)];
  std::lock_guard<std::mutex> lk(p.lanes_mu);
  p.idle.push_back(std::move(lane));
}

std::unique_ptr<Queue> CudaBackend::create_queue(int device) {
  return std::make_unique<CudaQueue>(take_lane(device),
                                     [this](std::unique_ptr<Lane> l) { give_lane(std::move(l)); });
}

void CudaBackend::synchronize(int device) {
  check_index(device);
  DeviceGuard g(device);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace genie::cuda
