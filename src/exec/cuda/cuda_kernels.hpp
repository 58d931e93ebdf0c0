// What the CUDA backend's kernels share: the stream a kernel issues on, the
// error checks, and the tables each group of kernels adds itself to.
//
// A kernel (exec/kernel.hpp) gets its tensors in device memory of the
// device it runs for, with that device current on the calling thread, and
// issues all its work on stream_of(args) without synchronising: the
// executor orders nodes with events and synchronises the queue when it
// needs results. Errors a launch reports are thrown as genie::Error at once.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <unordered_map>

#include "core/error.hpp"
#include "exec/kernel.hpp"

namespace genie::cuda {

using KernelTable = std::unordered_map<std::string, KernelFn>;

// The CUDA stream of the queue a kernel was issued on (exec/cuda/queue.hpp).
cudaStream_t stream_of(const KernelArgs& a);

// Throws Error(INTERNAL, or OUT_OF_MEMORY for cudaErrorMemoryAllocation)
// naming `what` and CUDA's message when `e` is not cudaSuccess.
void check_cuda(cudaError_t e, const char* what);
// After a kernel launch: the launch's own error (bad configuration), if any.
inline void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

// Each group of kernels registers its ops here (one .cu file or folder per
// group). The backend's find_kernel reads the union of these tables.
void add_blas_kernels(KernelTable& t);         // matmul, linear (cuBLASLt)
void add_conv_kernels(KernelTable& t);         // conv2d (cuDNN)
void add_elementwise_kernels(KernelTable& t);  // unary, binary, compare, where, masked_fill, cast, dropout
void add_norm_kernels(KernelTable& t);         // softmax, layer_norm, rms_norm
void add_layout_kernels(KernelTable& t);       // reshape, transpose, permute, flatten, concat, split, slice, embedding
void add_reduce_kernels(KernelTable& t);       // reduce_sum, reduce_mean, reduce_max
void add_pool_kernels(KernelTable& t);         // max/avg pool, adaptive pools
void add_attention_kernels(KernelTable& t);    // attention (fused, causal without the score matrix)

}  // namespace genie::cuda
