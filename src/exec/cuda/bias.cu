#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "exec/cuda/bias.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/plugin_util.hpp"

namespace genie::cuda {

namespace {

__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

template <class T>
__global__ void channel_bias(T* __restrict__ y, const T* __restrict__ bias, int64_t total, int64_t channels,
                             int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    store(y, i, load(y, i) + load(bias, (i / inner) % channels));
}

template <class T>
void launch(void* y, const void* bias, int64_t total, int64_t channels, int64_t inner, cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65535);
  channel_bias<T><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(static_cast<T*>(y), static_cast<const T*>(bias),
                                                                     total, channels, inner);
  check_launch("conv2d bias");
}

}  // namespace

void launch_channel_bias(void* y, const void* bias, DType dt, int64_t outer, int64_t channels, int64_t inner,
                         cudaStream_t s) {
  const int64_t total = outer * channels * inner;
  if (total <= 0) return;
  switch (dt) {
    case DType::F32: return launch<float>(y, bias, total, channels, inner, s);
    case DType::F16: return launch<__half>(y, bias, total, channels, inner, s);
    case DType::BF16: return launch<__nv_bfloat16>(y, bias, total, channels, inner, s);
    default: fail(GENIE_ERR_INVALID_ARGUMENT, "conv2d bias of ", dtype_name(dt));
  }
}

}  // namespace genie::cuda
