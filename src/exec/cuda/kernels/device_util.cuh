// What the kernel groups share: element types (f16 and bf16 as CUDA's own
// types, loaded and stored natively, computed in f32), dtype dispatch,
// launch shapes for grid-stride loops, warp and block reductions, and the
// device error word behind the execution errors kernels detect.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/kernels/index_math.hpp"

namespace genie::cuda {

// --- element types -----------------------------------------------------

template <class T>
inline constexpr bool kIsFloat =
    std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Value of a float element in f32 (f16/bf16 widen exactly).
template <class T>
__device__ __forceinline__ float to_f32(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return static_cast<float>(v);
  }
}

// An f32 result stored as T, rounded to nearest even.
template <class T>
__device__ __forceinline__ T from_f32(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return static_cast<T>(v);
  }
}

// --- dispatch ------------------------------------------------------------

[[noreturn]] inline void unsupported(const KernelArgs& a, DType t) {
  fail(GENIE_ERR_DTYPE_MISMATCH, "cuda kernel '", a.op, "' does not take ", dtype_name(t), " tensors");
}

// Calls f(T{}) with T the CUDA element type of a float dtype.
template <class F>
void visit_float(const KernelArgs& a, DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(float{});
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
    default: unsupported(a, t);
  }
}

// Float and integer dtypes.
template <class F>
void visit_numeric(const KernelArgs& a, DType t, F&& f) {
  switch (t) {
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    default: return visit_float(a, t, f);
  }
}

// Every dtype, bool as uint8_t.
template <class F>
void visit_any(const KernelArgs& a, DType t, F&& f) {
  if (t == DType::Bool) return f(uint8_t{});
  visit_numeric(a, t, f);
}

// A kernel reading memory with the wrong element size would overrun its
// buffer, so kernels check dtypes rather than trust their caller.
inline void expect_dtype(const KernelArgs& a, const TensorData& t, DType want) {
  if (t.dtype() != want)
    fail(GENIE_ERR_DTYPE_MISMATCH, "cuda kernel '", a.op, "': expected a ", dtype_name(want), " tensor, got ",
         dtype_name(t.dtype()));
}

inline const TensorData* optional_input(const KernelArgs& a, size_t i) {
  return i < a.in.size() ? a.in[i] : nullptr;
}

template <class T>
const T* dev(const TensorData& t) {
  return reinterpret_cast<const T*>(t.bytes());
}
template <class T>
T* dev(TensorData& t) {
  return reinterpret_cast<T*>(t.bytes());
}

// --- launch shapes -------------------------------------------------------

constexpr int kThreads = 256;
// Grid-stride loops cover any size, so grids stop at this many blocks
// (enough to fill every SM of an H100 many times over).
constexpr int64_t kMaxBlocks = 65535;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// The first index and the stride of a grid-stride loop, 64-bit.
__device__ __forceinline__ int64_t grid_start() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// --- reductions ----------------------------------------------------------

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
// Max that propagates NaN, as PyTorch does.
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return (b > a || b != b) ? b : a;
  }
};

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduction over the whole block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. `scratch` holds 32 values; the call
// may be repeated with the same scratch.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity, T* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
  v = lane < warps ? scratch[lane] : identity;
  return warp_reduce(v, op);
}

// --- execution errors ----------------------------------------------------

// One 64-bit word in device memory that kernels set to the first offending
// element index (integer division by zero, an embedding id out of range).
// Reading it is the one place these kernels synchronise their stream: an
// execution error must be raised by the node that met it, before anything
// reads the garbage it left. Lives for one kernel call; freed in stream order.
class DeviceErrorWord {
 public:
  static constexpr unsigned long long kNone = ~0ull;
  explicit DeviceErrorWord(cudaStream_t s) : stream_(s) {
    check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&word_), sizeof(*word_), s), "error word allocation");
    check_cuda(cudaMemsetAsync(word_, 0xff, sizeof(*word_), s), "error word reset");
  }
  ~DeviceErrorWord() { cudaFreeAsync(word_, stream_); }
  DeviceErrorWord(const DeviceErrorWord&) = delete;
  DeviceErrorWord& operator=(const DeviceErrorWord&) = delete;

  unsigned long long* get() const { return word_; }
  // Waits for the stream; the smallest index a kernel reported, or kNone.
  unsigned long long read() const {
    unsigned long long v = kNone;
    check_cuda(cudaMemcpyAsync(&v, word_, sizeof(v), cudaMemcpyDeviceToHost, stream_), "error word read");
    check_cuda(cudaStreamSynchronize(stream_), "error word read");
    return v;
  }

 private:
  cudaStream_t stream_;
  unsigned long long* word_ = nullptr;
};

__device__ __forceinline__ void report_error(unsigned long long* word, int64_t index) {
  atomicMin(word, static_cast<unsigned long long>(index));
}

}  // namespace genie::cuda
