// Streams, events, queues, and the error checks every part of the backend
// uses (cuda_kernels.hpp).
#include "exec/cuda/queue.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/staging.hpp"

namespace genie::cuda {

void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  // Clears the error unless it is sticky (the context is then lost anyway).
  (void)cudaGetLastError();
  const genie_status_t code = e == cudaErrorMemoryAllocation ? GENIE_ERR_OUT_OF_MEMORY : GENIE_ERR_INTERNAL;
  int device = -1;
  (void)cudaGetDevice(&device);
  fail(code, "cuda:", device, ": ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

cudaStream_t stream_of(const KernelArgs& a) {
  check(a.queue != nullptr, GENIE_ERR_INTERNAL, "cuda backend: kernel '", a.op, "' issued without a queue");
  // Only this backend's queues reach its kernels (DeviceBackend::find_kernel).
  return static_cast<CudaQueue*>(a.queue)->stream();
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device)
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  else
    previous_ = -1;  // nothing to restore
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

Stream::Stream(int d) : device(d) {
  DeviceGuard g(d);
  check_cuda(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

Stream::~Stream() {
  // Work still queued completes; the handle is released after it.
  int prev = -1;
  if (cudaGetDevice(&prev) == cudaSuccess && prev != device) (void)cudaSetDevice(device);
  (void)cudaStreamDestroy(handle);
  if (prev >= 0 && prev != device) (void)cudaSetDevice(prev);
}

Event::Event() { check_cuda(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate"); }
Event::~Event() { (void)cudaEventDestroy(e_); }
void Event::record(cudaStream_t s) { check_cuda(cudaEventRecord(e_, s), "cudaEventRecord"); }
void Event::wait_host() { check_cuda(cudaEventSynchronize(e_), "cudaEventSynchronize"); }

Lane::Lane(int device) : stream(std::make_shared<Stream>(device)) {}
Lane::~Lane() {
  if (workspace_ == nullptr) return;
  // No DeviceGuard: a destructor must not throw (at exit the runtime may
  // already be unloading), and a failed free only leaves memory to the process's end.
  int prev = -1;
  if (cudaGetDevice(&prev) == cudaSuccess && prev != stream->device) (void)cudaSetDevice(stream->device);
  if (cudaFreeAsync(workspace_, stream->handle) != cudaSuccess) (void)cudaGetLastError();
  if (prev >= 0 && prev != stream->device) (void)cudaSetDevice(prev);
}

void* Lane::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_) return workspace_;
  DeviceGuard g(stream->device);
  if (workspace_) check_cuda(cudaFreeAsync(workspace_, stream->handle), "cudaFreeAsync (workspace)");
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  const size_t grown = std::max(bytes, size_t{1} << 20);
  check_cuda(cudaMallocAsync(&workspace_, grown, stream->handle), "cudaMallocAsync (workspace)");
  workspace_bytes_ = grown;
  return workspace_;
}

Staging& Lane::stager() {
  if (!staging) staging = std::make_unique<Staging>(stream->device);
  return *staging;
}

CudaQueue::CudaQueue(std::unique_ptr<Lane> lane, std::function<void(std::unique_ptr<Lane>)> give_back)
    : lane_(std::move(lane)), give_back_(std::move(give_back)) {}

CudaQueue::~CudaQueue() {
  if (give_back_) give_back_(std::move(lane_));
}

void CudaQueue::synchronize() {
  DeviceGuard g(device());
  check_cuda(cudaStreamSynchronize(stream()), "work on the queue");
}

CudaQueue* as_cuda(Queue* q) { return static_cast<CudaQueue*>(q); }

}  // namespace genie::cuda
