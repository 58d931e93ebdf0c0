#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "exec/cuda/convert.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/plugin_util.hpp"

namespace genie::cuda {

namespace {

// Bool is stored as one byte (uint8_t), 0 or 1. Every type goes through f32 (or i64 between integers, so that large
// integers survive), as the host's convert_elements does.
template <class T> __device__ inline float to_f32(T v) { return static_cast<float>(v); }
template <> __device__ inline float to_f32(__half v) { return __half2float(v); }
template <> __device__ inline float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ inline float to_f32(uint8_t v) { return v ? 1.f : 0.f; }

template <class T> __device__ inline T from_f32(float v) { return static_cast<T>(v); }
template <> __device__ inline __half from_f32(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 from_f32(float v) { return __float2bfloat16_rn(v); }
template <> __device__ inline uint8_t from_f32(float v) { return v != 0.f; }

template <class T> struct IsInt { static constexpr bool value = false; };
template <> struct IsInt<int32_t> { static constexpr bool value = true; };
template <> struct IsInt<int64_t> { static constexpr bool value = true; };
template <> struct IsInt<uint8_t> { static constexpr bool value = true; };

template <class From, class To>
__device__ inline To convert_one(From v) {
  if constexpr (IsInt<From>::value && IsInt<To>::value) {
    if constexpr (std::is_same_v<To, uint8_t>)
      return v != 0 ? 1 : 0;
    else
      return static_cast<To>(static_cast<int64_t>(v));
  } else if constexpr (IsInt<To>::value && !std::is_same_v<To, uint8_t>) {
    // Float to int truncates toward zero; NaN gives 0, out-of-range values saturate.
    const float f = to_f32(v);
    if (f != f) return To(0);
    if (f >= 9.2233720e18f) return static_cast<To>(std::is_same_v<To, int32_t> ? 2147483647LL : 9223372036854775807LL);
    if (f <= -9.2233720e18f) return static_cast<To>(std::is_same_v<To, int32_t> ? (-2147483647LL - 1) : (-9223372036854775807LL - 1));
    const int64_t t = static_cast<int64_t>(f);
    if constexpr (std::is_same_v<To, int32_t>) {
      if (t > 2147483647LL) return 2147483647;
      if (t < -2147483648LL) return -2147483647 - 1;
    }
    return static_cast<To>(t);
  } else {
    return from_f32<To>(to_f32(v));
  }
}

template <class From, class To>
__global__ void convert_kernel(const From* __restrict__ src, To* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = convert_one<From, To>(src[i]);
}

template <class From, class To>
void launch(const void* src, void* dst, int64_t n, cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535);
  convert_kernel<From, To><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(static_cast<const From*>(src),
                                                                               static_cast<To*>(dst), n);
  check_launch("convert");
}

template <class From>
void launch_from(const void* src, void* dst, DType to, int64_t n, cudaStream_t s) {
  switch (to) {
    case DType::F32: return launch<From, float>(src, dst, n, s);
    case DType::F16: return launch<From, __half>(src, dst, n, s);
    case DType::BF16: return launch<From, __nv_bfloat16>(src, dst, n, s);
    case DType::I32: return launch<From, int32_t>(src, dst, n, s);
    case DType::I64: return launch<From, int64_t>(src, dst, n, s);
    case DType::Bool: return launch<From, uint8_t>(src, dst, n, s);
    default: fail(GENIE_ERR_INVALID_ARGUMENT, "cuda convert: no conversion to ", dtype_name(to));
  }
}

}  // namespace

void launch_convert(const void* src, DType from, void* dst, DType to, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (from == to) {
    check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(from), cudaMemcpyDeviceToDevice, s),
               "cudaMemcpyAsync (convert)");
    return;
  }
  switch (from) {
    case DType::F32: return launch_from<float>(src, dst, to, n, s);
    case DType::F16: return launch_from<__half>(src, dst, to, n, s);
    case DType::BF16: return launch_from<__nv_bfloat16>(src, dst, to, n, s);
    case DType::I32: return launch_from<int32_t>(src, dst, to, n, s);
    case DType::I64: return launch_from<int64_t>(src, dst, to, n, s);
    case DType::Bool: return launch_from<uint8_t>(src, dst, to, n, s);
    default: fail(GENIE_ERR_INVALID_ARGUMENT, "cuda convert: no conversion from ", dtype_name(from));
  }
}

}  // namespace genie::cuda
