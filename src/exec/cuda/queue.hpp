// CUDA streams and queues of the CUDA backend.
//
// A Stream is shared: the queue that issues on it holds it, and so does
// every device block last used on it (memory.hpp), so that a block freed
// after its queue is gone still frees in that stream's order, on a live
// stream. A Lane is a stream with its pinned staging buffers (staging.hpp);
// the backend keeps a pool of idle lanes per device, because the executor
// creates a queue for every run and creating streams and page-locking
// staging memory costs far more than a small run.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "exec/backend.hpp"

namespace genie::cuda {

// Makes `device` current on this thread for the guard's life, then restores
// the one that was.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

struct Stream {
  Stream(int device);  // a non-blocking stream on `device`; throws Error
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  int device;
  cudaStream_t handle = nullptr;
};
using StreamPtr = std::shared_ptr<Stream>;

// An event without timing (cheap to record and wait on).
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s);
  // Blocks the host until the work before the last record() is done; at
  // once if never recorded.
  void wait_host();
  cudaEvent_t handle() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class Staging;

// A stream with its own staging buffers, used by one thread at a time.
struct Lane {
  explicit Lane(int device);
  ~Lane();
  StreamPtr stream;
  std::unique_ptr<Staging> staging;  // created on the first staged copy
  Staging& stager();
  // At least `bytes` of device scratch memory for work on this lane's stream
  // (GEMM and convolution workspaces), grown in stream order; valid until
  // the next call.
  void* workspace(size_t bytes);

 private:
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

class CudaQueue final : public Queue {
 public:
  // `give_back` receives the lane when the queue is destroyed.
  CudaQueue(std::unique_ptr<Lane> lane, std::function<void(std::unique_ptr<Lane>)> give_back);
  ~CudaQueue() override;
  int device() const override { return lane_->stream->device; }
  void synchronize() override;
  cudaStream_t stream() const { return lane_->stream->handle; }
  Lane& lane() { return *lane_; }

 private:
  std::unique_ptr<Lane> lane_;
  std::function<void(std::unique_ptr<Lane>)> give_back_;
};

// The queue a backend call was given, as a CUDA queue (nullptr stays nullptr).
CudaQueue* as_cuda(Queue* q);

}  // namespace genie::cuda
