// Device memory of one CUDA device: a stream-ordered pool (cudaMemPool,
// cudaMallocFromPoolAsync / cudaFreeAsync).
//
// The executor drops a value once its last reader is issued, while that
// reader may still be running (exec/backend.hpp). So each block remembers
// the stream that last used it (kernels and queued copies say so through
// note_use), and release() frees it on that stream: the pool hands the
// memory out again only once the free, and so every use before it, is done.
//
// Blocks come from a stream of the pool's own that runs nothing else, and
// the pool reuses memory only opportunistically (a free already completed):
// a new block is therefore free of pending work and usable on any stream
// at once. Memory freed to the pool is kept for reuse up to the release
// threshold (GENIE_CUDA_POOL_KEEP_BYTES, default: all of it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "exec/cuda/queue.hpp"

namespace genie::cuda {

class DevicePool {
 public:
  DevicePool(int device, uint64_t keep_bytes);  // throws Error
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // `bytes` (0 allowed) of device memory; Error(OUT_OF_MEMORY) naming the device.
  void* allocate(size_t bytes);
  // Frees the block at `p` in the order of the stream that last used it.
  void release(void* p);
  // Work on `s` reads or writes the block containing `p` (any address inside it).
  void note_use(const void* p, const StreamPtr& s);
  // Bytes allocated now.
  uint64_t live_bytes() const;

 private:
  struct Block {
    size_t size;
    StreamPtr last;  // null: never used on a stream
  };
  int device_;
  cudaMemPool_t pool_ = nullptr;
  StreamPtr own_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;  // by start address
  uint64_t live_ = 0;
};

}  // namespace genie::cuda
