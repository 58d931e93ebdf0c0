// Matrix products through cuBLASLt (blas.cpp): what the matmul and linear
// kernels and the calibration share.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "exec/cuda/queue.hpp"

namespace genie::cuda {

// C = op(A) op(B) (+ bias per column of C) in row-major terms: A is m x k
// (k x m stored when ta), B is k x n (n x k stored when tb), C m x n, each
// with its leading dimension (elements between rows) and, for `batch` > 1,
// its batch stride (0: the same matrix for every batch).
struct Gemm {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Issues the product on the lane's stream (its device current). A, B, C
// and the bias (n elements, or nullptr) are all of `dt` (f32, f16, bf16),
// accumulated in f32 (TF32 for f32 only when GENIE_CUDA_ALLOW_TF32=1).
// Throws Error(UNSUPPORTED) when cuBLASLt has no algorithm for it.
void gemm(Lane& lane, DType dt, const Gemm& g, const void* a, const void* b, void* c, const void* bias);

// Whether f32 products may use TF32 tensor cores (GENIE_CUDA_ALLOW_TF32=1).
bool tf32_allowed();

}  // namespace genie::cuda
