// reduce_sum, reduce_mean, reduce_max over any set of axes (keepdims only
// changes the output's shape, not its elements). One block per output
// element folds that element's inputs (ReducePlan, index_math.hpp) with a
// block reduction. Accumulators: f32 inputs in f64, as the CPU kernels sum
// (long rows then agree to f32 precision), f16/bf16 in f32, integers in
// 64-bit unsigned, which wraps rather than overflowing.
#include <cmath>
#include <limits>

#include "exec/cuda/kernels/device_util.cuh"

namespace genie::cuda {

namespace {

enum class Reduction { Sum, Mean, Max };

template <class T>
using SumAcc = std::conditional_t<std::is_same_v<T, float>, double,
                                  std::conditional_t<kIsFloat<T>, float, unsigned long long>>;

template <class T>
__device__ __forceinline__ SumAcc<T> widen(T v) {
  if constexpr (kIsFloat<T>) {
    return static_cast<SumAcc<T>>(to_f32(v));
  } else {
    return static_cast<SumAcc<T>>(v);
  }
}

// The lowest value of T's compute type (f32 for float elements).
template <class T>
__device__ __forceinline__ auto lowest() {
  if constexpr (kIsFloat<T>) {
    return -INFINITY;
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

template <class T, Reduction R>
__global__ void reduce_kernel(const T* __restrict__ x, T* __restrict__ out, ReducePlan p) {
  if constexpr (R == Reduction::Max) {
    using C = decltype(lowest<T>());
    __shared__ C scratch[32];
    for (int64_t o = blockIdx.x; o < p.outputs; o += gridDim.x) {
      const T* base = x + p.kept.offset(o);
      C m = lowest<T>();
      for (int64_t j = threadIdx.x; j < p.count; j += blockDim.x) {
        if constexpr (kIsFloat<T>) {
          m = MaxOp{}(m, to_f32(base[p.reduced.offset(j)]));
        } else {
          m = MaxOp{}(m, base[p.reduced.offset(j)]);
        }
      }
      m = block_reduce(m, MaxOp{}, lowest<T>(), scratch);
      if (threadIdx.x == 0) {
        if constexpr (kIsFloat<T>) {
          out[o] = from_f32<T>(m);
        } else {
          out[o] = m;
        }
      }
    }
  } else {
    using A = SumAcc<T>;
    __shared__ A scratch[32];
    for (int64_t o = blockIdx.x; o < p.outputs; o += gridDim.x) {
      const T* base = x + p.kept.offset(o);
      A s = 0;
      for (int64_t j = threadIdx.x; j < p.count; j += blockDim.x) s += widen(base[p.reduced.offset(j)]);
      s = block_reduce(s, SumOp{}, A(0), scratch);
      if (threadIdx.x == 0) {
        if constexpr (kIsFloat<T>) {
          // Mean divides by the reduced count; 0/0 gives NaN for an empty axis, as in NumPy.
          out[o] = from_f32<T>(static_cast<float>(R == Reduction::Mean ? s / static_cast<A>(p.count) : s));
        } else {
          out[o] = static_cast<T>(s);
        }
      }
    }
  }
}

template <Reduction R>
void reduce(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  TensorData& out = *k.out[0];
  expect_dtype(k, out, x.dtype());
  const ReducePlan p = plan_reduce(x.shape(), k.attrs.get_ints("axes", {}), out.numel());
  if (p.outputs == 0) return;
  if (R == Reduction::Max && p.count == 0)
    fail(GENIE_ERR_INVALID_ARGUMENT, k.op, ": maximum over an empty axis of ", shape_str(x.shape()));
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    // Short reductions (a softmax-like row of 64) waste fewer idle threads in a smaller block.
    const int threads =
        p.count >= kThreads ? kThreads : (p.count <= 32 ? 32 : static_cast<int>((p.count + 31) / 32 * 32));
    reduce_kernel<T, R><<<blocks_for(p.outputs, 1), threads, 0, stream_of(k)>>>(dev<T>(x), dev<T>(out), p);
    check_launch(k.op.c_str());
  };
  if (R == Reduction::Mean) {
    visit_float(k, x.dtype(), launch);
  } else {
    visit_numeric(k, x.dtype(), launch);
  }
}

}  // namespace

void add_reduce_kernels(KernelTable& t) {
  t["reduce_sum"] = reduce<Reduction::Sum>;
  t["reduce_mean"] = reduce<Reduction::Mean>;
  t["reduce_max"] = reduce<Reduction::Max>;
}

}  // namespace genie::cuda
