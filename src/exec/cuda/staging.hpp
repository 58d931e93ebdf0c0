// Copies between pageable host memory and device memory through two pinned
// chunks: while the DMA engine moves one chunk, the CPU fills (or drains)
// the other. The driver's own path for pageable memory synchronises the
// stream first and stages through buffers of its choosing; this one keeps
// the copy ordered on the caller's stream and overlaps both halves. The
// CPU's half is the slower one, so several threads copy each chunk
// (parallel_copy.hpp, GENIE_CUDA_COPY_THREADS).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "exec/cuda/queue.hpp"

namespace genie::cuda {

class Staging {
 public:
  static constexpr size_t kChunk = size_t{4} << 20;

  explicit Staging(int device);  // page-locks 2 x kChunk; throws Error
  ~Staging();                    // waits for copies still reading the chunks
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Host `src` -> device `dst`, ordered on `s`. Returns once `src` has been
  // read (the caller may reuse it); the last chunks may still be in flight.
  void to_device(void* dst, const void* src, size_t n, cudaStream_t s);
  // Device `src` -> host `dst`, ordered on `s` after the work before it.
  // Returns when `dst` holds every byte.
  void to_host(void* dst, const void* src, size_t n, cudaStream_t s);

 private:
  int device_;
  void* chunk_[2] = {nullptr, nullptr};
  Event done_[2];
};

// Whether host code's pointer `p` is page-locked memory the DMA engines reach.
bool is_pinned(const void* p);

}  // namespace genie::cuda
