#include "exec/cuda/memory.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "exec/cuda/cuda_kernels.hpp"

namespace genie::cuda {

DevicePool::DevicePool(int device, uint64_t keep_bytes) : device_(device) {
  DeviceGuard g(device);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  check_cuda(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
  uint64_t keep = keep_bytes;
  check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  // Reuse only memory whose free has completed (see memory.hpp).
  int off = 0;
  check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolReuseFollowEventDependencies, &off),
             "cudaMemPoolSetAttribute");
  check_cuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolReuseAllowInternalDependencies, &off),
             "cudaMemPoolSetAttribute");
  own_ = std::make_shared<Stream>(device);
}

DevicePool::~DevicePool() {
  // Blocks still held (buffers that outlive the backend) keep their memory
  // until the process ends; destroying the pool would pull it from under them.
  std::lock_guard<std::mutex> lk(mu_);
  if (blocks_.empty() && pool_) (void)cudaMemPoolDestroy(pool_);
}

void* DevicePool::allocate(size_t bytes) {
  DeviceGuard g(device_);
  void* p = nullptr;
  const cudaError_t e = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool_, own_->handle);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    fail(GENIE_ERR_OUT_OF_MEMORY, "cuda:", device_, " cannot allocate ", bytes, " bytes (", free_b, " of ", total_b,
         " bytes free, ", live_bytes(), " held by this process's tensors)");
  }
  check_cuda(e, "cudaMallocFromPoolAsync");
  std::lock_guard<std::mutex> lk(mu_);
  blocks_[reinterpret_cast<uintptr_t>(p)] = Block{bytes, nullptr};
  live_ += bytes;
  return p;
}

void DevicePool::release(void* p) {
  StreamPtr last;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
    if (it == blocks_.end()) return;  // not ours: nothing to free
    live_ -= it->second.size;
    last = std::move(it->second.last);
    blocks_.erase(it);
  }
  int prev = -1;
  if (cudaGetDevice(&prev) == cudaSuccess && prev != device_) (void)cudaSetDevice(device_);
  // Errors cannot be reported from a destructor path; a failing free means
  // the context is lost, and the memory with it.
  if (cudaFreeAsync(p, last ? last->handle : own_->handle) != cudaSuccess) (void)cudaGetLastError();
  if (prev >= 0 && prev != device_) (void)cudaSetDevice(prev);
}

void DevicePool::note_use(const void* p, const StreamPtr& s) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = blocks_.upper_bound(a);
  if (it == blocks_.begin()) return;
  --it;
  if (a < it->first + std::max<size_t>(it->second.size, 1) && it->second.last != s) it->second.last = s;
}

uint64_t DevicePool::live_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return live_;
}

}  // namespace genie::cuda
