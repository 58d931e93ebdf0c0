#include "exec/cuda/staging.hpp"

#include <algorithm>

#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/parallel_copy.hpp"

namespace genie::cuda {

Staging::Staging(int device) : device_(device) {
  DeviceGuard g(device);
  for (void*& c : chunk_) check_cuda(cudaHostAlloc(&c, kChunk, cudaHostAllocPortable), "cudaHostAlloc (staging)");
}

Staging::~Staging() {
  for (int i = 0; i < 2; ++i) {
    (void)cudaEventSynchronize(done_[i].handle());
    if (chunk_[i]) (void)cudaFreeHost(chunk_[i]);
  }
}

void Staging::to_device(void* dst, const void* src, size_t n, cudaStream_t s) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* h = static_cast<const std::byte*>(src);
  int i = 0;
  for (size_t off = 0; off < n; off += kChunk, i ^= 1) {
    const size_t len = std::min(kChunk, n - off);
    done_[i].wait_host();  // the DMA that last read this chunk is done
    parallel_memcpy(chunk_[i], h + off, len);
    check_cuda(cudaMemcpyAsync(d + off, chunk_[i], len, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (to device)");
    done_[i].record(s);
  }
}

void Staging::to_host(void* dst, const void* src, size_t n, cudaStream_t s) {
  auto* h = static_cast<std::byte*>(dst);
  const auto* d = static_cast<const std::byte*>(src);
  const size_t chunks = (n + kChunk - 1) / kChunk;
  const auto issue = [&](size_t c) {
    const size_t off = c * kChunk;
    check_cuda(cudaMemcpyAsync(chunk_[c & 1], d + off, std::min(kChunk, n - off), cudaMemcpyDeviceToHost, s),
               "cudaMemcpyAsync (to host)");
    done_[c & 1].record(s);
  };
  if (chunks > 0) issue(0);
  for (size_t c = 0; c < chunks; ++c) {
    // The next chunk's DMA runs while this one is copied out.
    if (c + 1 < chunks) issue(c + 1);
    done_[c & 1].wait_host();
    const size_t off = c * kChunk;
    parallel_memcpy(h + off, chunk_[c & 1], std::min(kChunk, n - off));
  }
}

bool is_pinned(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

}  // namespace genie::cuda
