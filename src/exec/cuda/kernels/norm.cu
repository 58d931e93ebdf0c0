// softmax over any axis, layer_norm and rms_norm over the last dim. A row
// of contiguous elements is one block (block reductions in f32, reading
// the row again rather than holding it, so rows of any length fit); softmax
// along a non-last axis gives one thread per column, which keeps the loads
// of neighbouring threads contiguous.
#include <cmath>

#include "exec/cuda/kernels/device_util.cuh"

namespace genie::cuda {

namespace {

constexpr float kNegInf = -INFINITY;

// Threads for a block walking rows of `len`: a multiple of 32, at most 256.
inline int row_threads(int64_t len) {
  const int64_t t = (len + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > kThreads ? kThreads : t));
}

// Numerically stable: the row's max is subtracted; a row whose every entry
// is -inf (everything masked) gives zeros rather than NaN.
template <class T>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t len) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float m = kNegInf;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) m = MaxOp{}(m, to_f32(xr[j]));
    m = block_reduce(m, MaxOp{}, kNegInf, scratch);
    if (m == kNegInf) {
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = from_f32<T>(0.f);
      continue;
    }
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += expf(to_f32(xr[j]) - m);
    s = block_reduce(s, SumOp{}, 0.f, scratch);
    const float inv = 1.f / s;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      yr[j] = from_f32<T>(expf(to_f32(xr[j]) - m) * inv);
  }
}

template <class T>
__global__ void softmax_columns(const T* __restrict__ x, T* __restrict__ y, AxisSplit s) {
  const int64_t columns = s.outer * s.inner;
  for (int64_t c = grid_start(); c < columns; c += grid_stride()) {
    const int64_t o = c / s.inner;
    const int64_t base = o * s.len * s.inner + (c - o * s.inner);
    float m = kNegInf;
    for (int64_t j = 0; j < s.len; ++j) m = MaxOp{}(m, to_f32(x[base + j * s.inner]));
    if (m == kNegInf) {
      for (int64_t j = 0; j < s.len; ++j) y[base + j * s.inner] = from_f32<T>(0.f);
      continue;
    }
    float sum = 0.f;
    for (int64_t j = 0; j < s.len; ++j) sum += expf(to_f32(x[base + j * s.inner]) - m);
    const float inv = 1.f / sum;
    for (int64_t j = 0; j < s.len; ++j)
      y[base + j * s.inner] = from_f32<T>(expf(to_f32(x[base + j * s.inner]) - m) * inv);
  }
}

void softmax(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  TensorData& out = *k.out[0];
  expect_dtype(k, out, x.dtype());
  if (out.numel() != x.numel())
    fail(GENIE_ERR_SHAPE_MISMATCH, "softmax: output ", shape_str(out.shape()), " for input ",
         shape_str(x.shape()));
  if (x.numel() == 0) return;
  const AxisSplit s = split_at_axis(x.shape(), k.attrs.get_int("axis", -1));
  visit_float(k, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (s.inner == 1) {
      softmax_rows<T><<<blocks_for(s.outer, 1), row_threads(s.len), 0, stream_of(k)>>>(dev<T>(x), dev<T>(out),
                                                                                       s.outer, s.len);
    } else {
      softmax_columns<T>
          <<<blocks_for(s.outer * s.inner), kThreads, 0, stream_of(k)>>>(dev<T>(x), dev<T>(out), s);
    }
    check_launch("softmax");
  });
}

// --- layer_norm, rms_norm --------------------------------------------------

// y = (x - shift)·scale·weight + bias over rows of d, where layer_norm
// takes shift = mean and scale = 1/sqrt(var + eps) (biased variance, two
// passes so that centred values do not cancel), and rms_norm shift = 0 and
// scale = 1/sqrt(mean(x²) + eps).
template <class T, bool kLayer>
__global__ void row_norm(const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ weight,
                         const T* __restrict__ bias, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  const float inv_d = 1.f / static_cast<float>(d);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    float shift = 0.f;
    if constexpr (kLayer) {
      float s = 0.f;
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += to_f32(xr[j]);
      shift = block_reduce(s, SumOp{}, 0.f, scratch) * inv_d;
    }
    float sq = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float v = to_f32(xr[j]) - shift;
      sq += v * v;
    }
    const float scale = rsqrtf(block_reduce(sq, SumOp{}, 0.f, scratch) * inv_d + eps);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float v = (to_f32(xr[j]) - shift) * scale;
      if (weight) v *= to_f32(weight[j]);
      if (bias) v += to_f32(bias[j]);
      yr[j] = from_f32<T>(v);
    }
  }
}

template <bool kLayer>
void norm(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  TensorData& out = *k.out[0];
  expect_dtype(k, out, x.dtype());
  const Shape& s = x.shape();
  check(!s.empty(), GENIE_ERR_SHAPE_MISMATCH, k.op, ": input must have rank >= 1");
  if (out.numel() != x.numel())
    fail(GENIE_ERR_SHAPE_MISMATCH, k.op, ": output ", shape_str(out.shape()), " for input ", shape_str(s));
  const int64_t d = s.back();
  auto param = [&](size_t slot, const char* what) -> const TensorData* {
    const TensorData* t = optional_input(k, slot);
    if (!t) return nullptr;
    expect_dtype(k, *t, x.dtype());
    if (t->numel() != d)
      fail(GENIE_ERR_SHAPE_MISMATCH, k.op, ": ", what, " ", shape_str(t->shape()),
           " does not match the last dim ", d);
    return t;
  };
  const TensorData* weight = param(1, "weight");
  const TensorData* bias = kLayer ? param(2, "bias") : nullptr;
  const auto eps = static_cast<float>(k.attrs.get_float("eps", kLayer ? 1e-5 : 1e-6));
  if (x.numel() == 0) return;
  const int64_t rows = x.numel() / d;
  visit_float(k, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    row_norm<T, kLayer><<<blocks_for(rows, 1), row_threads(d), 0, stream_of(k)>>>(
        dev<T>(x), dev<T>(out), weight ? dev<T>(*weight) : nullptr, bias ? dev<T>(*bias) : nullptr, rows, d,
        eps);
    check_launch(k.op.c_str());
  });
}

}  // namespace

void add_norm_kernels(KernelTable& t) {
  t["softmax"] = softmax;
  t["layer_norm"] = norm<true>;
  t["rms_norm"] = norm<false>;
}

}  // namespace genie::cuda
